"""Secure two-party comparison with Paillier ([D] ch. 2, 3 and 8; spec: secure-comparison.md).

Two parties, Alice (holds the Paillier key pair) and Bob (holds her public key), compare x >= y for
ℓ-bit values without revealing them, in the semi-honest model (a deviating party is detected at best,
never resisted). The product uses the Type 1 protocol (SS-SS-SS): both inputs and the output are shared.

- :mod:`.encoding` — pointEnc / rangeEnc on the complete binary tree (Lemmas 8.2–8.4).
- :mod:`.paillier` — phe keys, raw-integer homomorphic arithmetic, precomputed randomness pools.
- :mod:`.protocols` — Protocols 1 and 2 with the root removed.
- :mod:`.conversions` — Conversions 1–5 (Conversion 5 after Veugen 2014).
- :mod:`.type1` — the Type 1 protocol with the optimization of 2ℓ + 6 ciphertexts.
- :mod:`.messages` — frozen message dataclasses and their versioned byte format.
- :mod:`.party` — the sans-I/O party base class and :func:`run_local`, an in-memory driver.

Parties never do I/O: ``start()`` and ``receive(message)`` return the messages to send; a transport moves
``message.to_bytes()`` and feeds ``decode_message(data)`` to the other side. Randomness is injected: a
:class:`~mechanisms.random_source.RandomSource` for protocol coins (``secrets.SystemRandom`` by default)
and a :class:`RandomnessPool` per party for encryption randomness.

References: [D] the dissertation of spec 000; [NNPC10] Nishide et al.'s tree-based comparison;
Veugen, "Encrypted integer division and secure comparison", 2014.
"""

from mechanisms.secure.conversions import (
    Conversion5Alice,
    Conversion5Bob,
    combine_shares,
    complete_encryption,
    encrypt_share,
    mask_ciphertext,
    split_plaintext,
    unmask,
)
from mechanisms.secure.encoding import node_label, point_enc, range_enc
from mechanisms.secure.messages import (
    FORMAT_VERSION,
    EncryptedBit,
    EncryptedQuotient,
    EncryptedShare,
    MaskedDifference,
    MaskedResult,
    MembershipTests,
    Message,
    PointEncoding,
    PublicKeyAnnouncement,
    decode_message,
)
from mechanisms.secure.paillier import (
    Encryptor,
    KeyPair,
    RandomnessPool,
    decrypt,
    generate_keypair,
    public_key_from_modulus,
)
from mechanisms.secure.parameters import (
    DEFAULT_KEY_BITS,
    REPRODUCTION_KEY_BITS,
    ComparisonParameters,
    OutputSharing,
)
from mechanisms.secure.party import LocalRun, Party, run_local
from mechanisms.secure.protocols import Protocol1Alice, Protocol1Bob, Protocol2Alice, Protocol2Bob
from mechanisms.secure.type1 import Type1Alice, Type1Bob, type1_ciphertexts, type1_pool_demand

__all__ = [
    "DEFAULT_KEY_BITS",
    "FORMAT_VERSION",
    "REPRODUCTION_KEY_BITS",
    "ComparisonParameters",
    "Conversion5Alice",
    "Conversion5Bob",
    "EncryptedBit",
    "EncryptedQuotient",
    "EncryptedShare",
    "Encryptor",
    "KeyPair",
    "LocalRun",
    "MaskedDifference",
    "MaskedResult",
    "MembershipTests",
    "Message",
    "OutputSharing",
    "Party",
    "PointEncoding",
    "Protocol1Alice",
    "Protocol1Bob",
    "Protocol2Alice",
    "Protocol2Bob",
    "PublicKeyAnnouncement",
    "RandomnessPool",
    "Type1Alice",
    "Type1Bob",
    "combine_shares",
    "complete_encryption",
    "decode_message",
    "decrypt",
    "encrypt_share",
    "generate_keypair",
    "mask_ciphertext",
    "node_label",
    "point_enc",
    "public_key_from_modulus",
    "range_enc",
    "run_local",
    "split_plaintext",
    "type1_ciphertexts",
    "type1_pool_demand",
    "unmask",
]
