"""What both parties must agree on before a comparison: input bit length, κ, output sharing, key floor.

The Paillier modulus N must satisfy ``N >= 2^(ℓ+2+κ)`` (spec §3, erratum 5): Conversion 5 adds Bob's mask
``b < 2^(ℓ+1+κ)`` to ``a = 2^ℓ + x − y < 2^(ℓ+1)`` and the sum must not wrap mod N, while κ bounds the
statistical distance by which ``a + b`` reveals ``a`` (2^−κ). [D]'s footnote (4n < N) guarantees neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from mechanisms.errors import MechanismError

OutputSharing = Literal["xor", "additive"]
"""``xor``: δ = δ^A ⊕ δ^B with shares in {0, 1} (Type 1's definition, the default);
``additive``: δ ≡ δ^A + δ^B (mod N) (what Conversion 4 produces as printed in [D] §3.2)."""

DEFAULT_KEY_BITS = 2048
"""Current recommendations for factoring-based keys; [D] ch. 8 measured 1024 bits."""

REPRODUCTION_KEY_BITS = 1024
"""The smallest modulus accepted unless the caller lowers ``minimum_key_bits`` (tests do, for speed)."""


@dataclass(frozen=True)
class ComparisonParameters:
    """Public parameters of one comparison of ``x, y ∈ [0, 2^bit_length)``; both parties use equal ones."""

    bit_length: int
    kappa: int = 40
    output_sharing: OutputSharing = "xor"
    minimum_key_bits: int = REPRODUCTION_KEY_BITS

    def __post_init__(self) -> None:
        _require_positive_int(self.bit_length, "bit_length", hint="pass the number of bits of the inputs")
        _require_positive_int(self.kappa, "kappa", hint="pass the statistical security parameter, e.g. 40")
        _require_positive_int(self.minimum_key_bits, "minimum_key_bits", hint="pass 2048 (or 1024)")
        if self.output_sharing not in get_args(OutputSharing):
            raise MechanismError(
                f"output_sharing must be 'xor' or 'additive', got {self.output_sharing!r}",
                hint="use 'xor' for shares in {0, 1}, 'additive' for shares mod N",
            )

    @property
    def leaves(self) -> int:
        """n = 2^ℓ, the number of leaves of the comparison tree (not the Paillier modulus N)."""
        return 1 << self.bit_length

    @property
    def mask_bound(self) -> int:
        """Conversion 5 draws Bob's mask b from [0, 2^(ℓ+1+κ)): never wraps mod N, hides a within 2^−κ."""
        return 1 << (self.bit_length + 1 + self.kappa)

    def check_modulus(self, modulus: int) -> None:
        """Refuse a key that is weaker than the floor or too small for correct, private Conversion 5."""
        bits = modulus.bit_length()
        if bits < self.minimum_key_bits:
            raise MechanismError(
                f"the Paillier modulus has {bits} bits; at least {self.minimum_key_bits} are required",
                hint=f"generate the key with bits={DEFAULT_KEY_BITS} ({REPRODUCTION_KEY_BITS} only to reproduce [D] ch. 8)",
            )
        exponent = self.bit_length + 2 + self.kappa
        if modulus < 1 << exponent:
            raise MechanismError(
                f"a {bits}-bit Paillier modulus is too small for {self.bit_length}-bit inputs at kappa = "
                f"{self.kappa}: N must be at least 2^{exponent}",
                hint="use a larger key or compare fewer bits",
            )

    def check_input(self, value: int, name: str) -> None:
        """A plaintext comparison input must lie in [0, 2^ℓ); outside it the tree has no leaf for it."""
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.leaves:
            raise MechanismError(
                f"{name} = {value!r} is outside [0, 2^{self.bit_length})",
                hint="raise bit_length or clamp the input",
            )


def check_share(value: int, modulus: int, name: str) -> None:
    """Additive input shares live in Z_N (Conversion 3 adds them under Alice's key)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < modulus:
        raise MechanismError(
            f"{name} is not a share in [0, N)",
            hint="reduce the share modulo the Paillier modulus N of Alice's public key",
        )


def _require_positive_int(value: object, name: str, *, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MechanismError(f"{name} must be a positive integer, got {value!r}", hint=hint)
