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

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from proxy.wire.types import encode_text_value

CopyFormat = Literal["text", "csv"]
_TEXT_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f", "\v": "\\v"}


@dataclass(frozen=True)
class CopyOptions:
    """``FORMAT``, ``HEADER`` (CSV only, as in PostgreSQL 15) and ``DELIMITER`` of a COPY TO."""

    format: CopyFormat = "text"
    header: bool = False
    delimiter: str | None = None

    @property
    def separator(self) -> str:
        return self.delimiter if self.delimiter is not None else ("," if self.format == "csv" else "\t")


def copy_out_response(columns: int) -> bytes:
    """'H': overall text format, every column text."""
    payload = struct.pack("!bh", 0, columns) + struct.pack(f"!{columns}h", *([0] * columns))
    return b"H" + struct.pack("!i", len(payload) + 4) + payload


def copy_data(data: bytes) -> bytes:
    return b"d" + struct.pack("!i", len(data) + 4) + data


def copy_done() -> bytes:
    return b"c\x00\x00\x00\x04"


def copy_rows(names: Sequence[str], rows: Sequence[Sequence[object]], options: CopyOptions) -> list[bytes]:
    """The CopyData messages of a whole answer (a header line first, when asked for)."""
    lines = []
    if options.header and options.format == "csv":
        lines.append(_line(list(names), options))
    lines.extend(_line([_text(value) for value in row], options) for row in rows)
    return [copy_data(line.encode()) for line in lines]


def _text(value: object) -> str | None:
    encoded = encode_text_value(value)
    return None if encoded is None else encoded.decode()


def _line(values: list[str | None], options: CopyOptions) -> str:
    separator = options.separator
    if options.format == "csv":
        return separator.join(_csv_field(value, separator) for value in values) + "\n"
    return separator.join(_text_field(value, separator) for value in values) + "\n"


def _text_field(value: str | None, separator: str) -> str:
    if value is None:
        return "\\N"
    escaped = "".join(_TEXT_ESCAPES.get(character, character) for character in value)
    return escaped.replace(separator, "\\" + separator) if separator not in _TEXT_ESCAPES else escaped


def _csv_field(value: str | None, separator: str) -> str:
    if value is None:
        return ""
    if value == "" or any(character in value for character in (separator, '"', "\n", "\r")):
        return '"' + value.replace('"', '""') + '"'
    return value
