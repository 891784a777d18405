"""Parameter validation: N >= 2^(ℓ+2+κ), the key floor, input ranges."""

from __future__ import annotations

import pytest

from mechanisms.errors import MechanismError
from mechanisms.secure import ComparisonParameters


def test_defaults_follow_the_spec() -> None:
    params = ComparisonParameters(bit_length=10)
    assert (params.kappa, params.output_sharing, params.minimum_key_bits) == (40, "xor", 1024)


def test_modulus_exactly_at_the_bound_is_accepted() -> None:
    ComparisonParameters(bit_length=10, minimum_key_bits=8).check_modulus(2 ** (10 + 2 + 40))


def test_modulus_below_the_bound_is_refused() -> None:
    params = ComparisonParameters(bit_length=10, minimum_key_bits=8)
    with pytest.raises(
        MechanismError, match=r"too small for 10-bit inputs at kappa = 40: N must be at least 2\^52"
    ):
        params.check_modulus(2**52 - 1)


def test_modulus_below_the_key_floor_is_refused() -> None:
    with pytest.raises(MechanismError, match="512 bits; at least 1024 are required") as raised:
        ComparisonParameters(bit_length=10).check_modulus(2**511 + 1)
    assert raised.value.hint is not None and "2048" in raised.value.hint


@pytest.mark.parametrize("field", ["bit_length", "kappa", "minimum_key_bits"])
@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_rejects_non_positive_integers(field: str, value: object) -> None:
    arguments: dict[str, object] = {"bit_length": 4, field: value}
    with pytest.raises(MechanismError, match=f"{field} must be a positive integer"):
        ComparisonParameters(**arguments)  # type: ignore[arg-type]


def test_rejects_unknown_output_sharing() -> None:
    with pytest.raises(MechanismError, match="output_sharing must be 'xor' or 'additive'"):
        ComparisonParameters(bit_length=4, output_sharing="mod2")  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-1, 16, 100])
def test_rejects_inputs_outside_the_bit_length(value: int) -> None:
    with pytest.raises(MechanismError, match=r"x = .* is outside \[0, 2\^4\)"):
        ComparisonParameters(bit_length=4).check_input(value, "x")
