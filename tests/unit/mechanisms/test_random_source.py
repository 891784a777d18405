"""The RandomSource seam: production uses the OS CSPRNG, tests a seeded random.Random."""

from __future__ import annotations

import random
import secrets
from fractions import Fraction

from mechanisms.discrete_laplace import sample_discrete_laplace
from mechanisms.random_source import RandomSource, secure_random_source


def test_secure_source_is_the_os_csprng() -> None:
    assert isinstance(secure_random_source(), secrets.SystemRandom)


def test_seeded_and_secure_sources_satisfy_the_protocol() -> None:
    assert isinstance(random.Random(1), RandomSource)
    assert isinstance(secure_random_source(), RandomSource)


def test_secure_source_drives_the_sampler() -> None:
    assert type(sample_discrete_laplace(Fraction(3), rng=secure_random_source())) is int
