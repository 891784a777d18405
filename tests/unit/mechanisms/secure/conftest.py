"""Keys are generated once per session: they are immutable, and key generation dominates small runs.

256-bit moduli keep the exhaustive runs fast; N >= 2^(ℓ+2+κ) still holds at κ = 40 for ℓ <= 64.
"""

from __future__ import annotations

import pytest

from mechanisms.secure import ComparisonParameters, KeyPair, generate_keypair

TEST_KEY_BITS = 256


@pytest.fixture(scope="session")
def keypair() -> KeyPair:
    return generate_keypair(TEST_KEY_BITS)


@pytest.fixture(scope="session")
def other_keypair() -> KeyPair:
    return generate_keypair(TEST_KEY_BITS)


def parameters(bit_length: int, **overrides: object) -> ComparisonParameters:
    """Test parameters: the production key floor lowered to the test key size."""
    return ComparisonParameters(bit_length=bit_length, minimum_key_bits=TEST_KEY_BITS, **overrides)  # type: ignore[arg-type]
