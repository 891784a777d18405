"""Test key size and parameters: 256-bit moduli keep exhaustive runs fast, and N >= 2^(ℓ+2+κ) still holds
at κ = 40 for ℓ <= 214, so only the production key floor (1024 bits) has to be lowered."""

from __future__ import annotations

from mechanisms.secure import ComparisonParameters

TEST_KEY_BITS = 256


def parameters(bit_length: int, **overrides: object) -> ComparisonParameters:
    """Test parameters: the production key floor lowered to the test key size."""
    return ComparisonParameters(bit_length=bit_length, minimum_key_bits=TEST_KEY_BITS, **overrides)  # type: ignore[arg-type]
