"""DataRow messages for a whole result in text format, built column by column.

A 10,000-row answer is 30,000 values: encoding them one function call at a time (``encode_text_value``
then ``messages.data_row``) cost ten times what PostgreSQL takes to send the same rows. Here each column
is encoded at once — for a column of one common type (str, int, float) with ``map`` over C functions —
and the messages are interleaved from those columns without a Python loop per value.

The result is assembled as a ``str`` in which each character stands for one byte (Latin-1), and encoded
once at the end: ASCII text and numbers then need no encoding of their own, and a value's length in
characters is its length in bytes. Anything else goes through ``encode_text_value`` value by value, so
the bytes are those ``messages.data_row`` would frame.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from operator import add
from typing import Final

from proxy.wire.errors import UnencodableValueError
from proxy.wire.types import encode_text_value, float_text

_INT32: Final = struct.Struct("!i")
_MAX_COLUMNS: Final = 32767  # the Int16 column count of a DataRow
_FLOAT_EXPONENT_FROM: Final = 1e15  # float8out writes "1e+15"; repr is positional up to 1e16
_CACHED_LENGTHS: Final = 4096
_LENGTH_PREFIXES: Final = [_INT32.pack(n).decode("latin-1") for n in range(_CACHED_LENGTHS)] + [
    _INT32.pack(-1).decode("latin-1")
]
"""The length field of a value of each length below 4096; the last item, index -1, is NULL's."""


def text_data_rows(rows: Sequence[Sequence[object]]) -> bytes:
    """One DataRow per row, every value in text format (None is SQL NULL), concatenated."""
    if not rows:
        return b""
    widths = set(map(len, rows))
    if len(widths) != 1:
        return b"".join(text_data_rows([row]) for row in rows)  # ragged: never from a result table
    (width,) = widths
    if width > _MAX_COLUMNS:
        raise UnencodableValueError(f"integer does not fit its protocol field: ({width},)")
    columns = [_column_text(column) for column in zip(*rows, strict=True)]
    sizes = map(sum, zip(*(sizes for _, _, sizes in columns), strict=True)) if width else repeat(0, len(rows))
    headers = map(add, length_fields(list(map(add, sizes, repeat(6 + 4 * width)))), repeat(_int16(width)))
    fields = (part for texts, lengths, _ in columns for part in (length_fields(lengths), texts))
    return "".join(chain.from_iterable(zip(repeat("D"), headers, *fields))).encode("latin-1")


def _column_text(values: tuple[object, ...]) -> tuple[list[str], list[int], list[int]]:
    """The encoded values of one column, a character per byte ("" for NULL), their DataRow lengths
    (-1 for NULL) and their sizes (0 for NULL)."""
    types = set(map(type, values))
    if types == {str}:
        texts: list[str] = list(values)  # type: ignore[arg-type]
        if not "".join(texts).isascii():
            texts = list(latin1_chars(map(str.encode, texts)))
    elif types == {int}:
        texts = list(map(int.__repr__, values))  # type: ignore[arg-type]
    elif types == {float}:
        texts = float_texts(values)  # type: ignore[arg-type]
    else:
        encoded = [encode_text_value(value) for value in values]
        texts = [item.decode("latin-1") if item is not None else "" for item in encoded]
        return texts, [-1 if item is None else len(item) for item in encoded], list(map(len, texts))
    lengths = list(map(len, texts))
    return texts, lengths, lengths


def float_texts(values: Sequence[float]) -> list[str]:
    """float8out's text of each value. Where repr is positional and below 1e15 in magnitude (the usual
    case) that is repr without a trailing ".0"; otherwise ``float_text`` one by one. repr switches to an
    exponent below 1e-4 and from 1e16 ("1e-05", "1e+16"), and spells NaN and infinity "nan" and "inf":
    one look for an "e" or an "n" in all the texts, and the extremes, tell the usual case without a
    Python call per value."""
    if not values:
        return []
    texts = list(map(float.__repr__, values))
    joined = "".join(texts)
    if (
        "e" in joined
        or "n" in joined
        or not -_FLOAT_EXPONENT_FROM < min(values) <= max(values) < _FLOAT_EXPONENT_FROM
    ):
        return list(map(float_text, values))
    return list(map(str.removesuffix, texts, repeat(".0")))


def length_fields(lengths: list[int]) -> Iterable[str]:
    """The Int32 length field before each value, from a table for the usual short values."""
    if max(lengths) < _CACHED_LENGTHS:
        return map(_LENGTH_PREFIXES.__getitem__, lengths)
    return latin1_chars(map(_INT32.pack, lengths))


def _int16(value: int) -> str:
    return value.to_bytes(2, "big").decode("latin-1")


def latin1_chars(chunks: Iterable[bytes]) -> Iterable[str]:
    return map(bytes.decode, chunks, repeat("latin-1"))
