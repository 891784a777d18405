"""Keys are generated once per session: they are immutable, and key generation dominates small runs."""

from __future__ import annotations

import pytest

from mechanisms.secure import KeyPair, generate_keypair
from tests.unit.mechanisms.secure.keys import TEST_KEY_BITS


@pytest.fixture(scope="session")
def keypair() -> KeyPair:
    return generate_keypair(TEST_KEY_BITS)
