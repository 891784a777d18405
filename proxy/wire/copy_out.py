"""COPY … TO STDOUT on the wire: CopyOutResponse, one CopyData per row in PostgreSQL's text or CSV format,
CopyDone (the protocol's "COPY Operations" section).

Values are written as their text form in a DataRow (``encode_text_value``), then escaped per format:

* text — columns separated by the delimiter (tab), NULL as ``\\N``; backslash, newline, carriage return,
  tab and the delimiter are backslash-escaped, as ``COPY … (FORMAT text)`` writes them;
* csv — columns separated by the delimiter (comma), NULL as an empty unquoted field; a value is quoted
  (``"``, doubled inside) when it is empty, or holds the delimiter, a quote, a newline or a carriage
  return; an optional header line of the column names.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Sequence
from itertools import chain, repeat

from proxy.wire.rows import float_texts, latin1_chars, length_fields
from proxy.wire.types import encode_text_value

_TEXT_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f", "\v": "\\v"}


def copy_out_response(columns: int) -> bytes:
    """'H': overall text format, every column text."""
    payload = struct.pack("!bh", 0, columns) + struct.pack(f"!{columns}h", *([0] * columns))
    return b"H" + struct.pack("!i", len(payload) + 4) + payload


def copy_data(data: bytes) -> bytes:
    return b"d" + struct.pack("!i", len(data) + 4) + data


def copy_done() -> bytes:
    return b"c\x00\x00\x00\x04"


def copy_rows(
    names: Sequence[str], rows: Sequence[Sequence[object]], *, csv: bool, header: bool, separator: str
) -> bytes:
    """The CopyData messages of a whole answer, one per row (a header line first, when asked for), built column
    by column as proxy/wire/rows.py builds DataRows: a 100,000-row COPY must not cost a Python call per value.
    The result is assembled as a Latin-1 string (one character per byte) and encoded once."""
    lines: list[str] = []
    if header and csv:
        lines.append(separator.join(_column([str(name) for name in names], csv, separator, header=True)))
    if rows:
        columns = [_column(list(values), csv, separator) for values in zip(*rows, strict=True)]
        lines.extend(map(separator.join, zip(*columns, strict=True)) if columns else [""] * len(rows))
    if not lines:
        return b""
    prefixes = length_fields([len(line) + 5 for line in lines])  # the length, 4 bytes, and the newline
    return "".join(chain.from_iterable(zip(repeat("d"), prefixes, lines, repeat("\n")))).encode("latin-1")


def _column(values: list[object], csv: bool, separator: str, *, header: bool = False) -> list[str]:
    """One column's fields, escaped for the format, as Latin-1 characters (one per byte)."""
    types = set(map(type, values))
    if types == {int}:
        return list(map(int.__repr__, values))  # type: ignore[arg-type]
    if types == {float}:
        return float_texts(tuple(values))  # type: ignore[arg-type]
    if types == {str}:
        texts: list[str | None] = list(values)  # type: ignore[arg-type]
    else:
        texts = [None if (text := encode_text_value(value)) is None else text.decode() for value in values]
    fields = _csv_fields(texts, separator, header) if csv else _text_fields(texts, separator)
    joined = "".join(fields)
    return fields if joined.isascii() else list(latin1_chars(map(str.encode, fields)))


def _text_fields(texts: list[str | None], separator: str) -> list[str]:
    if None not in texts and _needs_escape(separator).search("".join(texts)) is None:  # type: ignore[arg-type]
        return texts  # type: ignore[return-value]
    return [_text_field(text, separator) for text in texts]


@functools.cache
def _needs_escape(separator: str) -> re.Pattern[str]:
    return re.compile("[" + re.escape("".join({*_TEXT_ESCAPES, separator})) + "]")


def _csv_fields(texts: list[str | None], separator: str, header: bool) -> list[str]:
    return [_csv_field(text, separator, quote_empty=not header) for text in texts]


def _text_field(value: str | None, separator: str) -> str:
    if value is None:
        return "\\N"
    escaped = "".join(_TEXT_ESCAPES.get(character, character) for character in value)
    return escaped.replace(separator, "\\" + separator) if separator not in _TEXT_ESCAPES else escaped


def _csv_field(value: str | None, separator: str, *, quote_empty: bool = True) -> str:
    if value is None:
        return ""
    if (value == "" and quote_empty) or any(character in value for character in (separator, '"', "\n", "\r")):
        return '"' + value.replace('"', '""') + '"'
    return value
