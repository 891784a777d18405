"""The batch COPY encoder (proxy/wire/copy_out.py) writes exactly what escaping each value by itself, as
PostgreSQL's ``CopyAttributeOutText`` and ``CopyAttributeOutCSV`` do, and framing one CopyData per row give —
whatever the values, the delimiter, the chunk size. (tests/postgres/test_copy_format.py compares with
PostgreSQL itself.)"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.wire.copy_out import copy_data, copy_data_messages
from proxy.wire.types import encode_text_value
from tests.unit.wire.test_wire_rows import VALUES

SPECIAL = 'a,;|.é \t\n\r\b\f\v\\"\x00'  # what the formats escape or quote, and more
TEXT_ESCAPES = {"\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def text_field(value: object, separator: str) -> str:
    encoded = encode_text_value(value)
    if encoded is None:
        return "\\N"
    return "".join(TEXT_ESCAPES.get(c, "\\" + c if c == separator else c) for c in encoded.decode())


def csv_field(value: object, separator: str, *, single: bool) -> str:
    encoded = encode_text_value(value)
    if encoded is None:
        return ""
    text = encoded.decode()
    if text == "" or any(c in text for c in (separator, '"', "\n", "\r")) or (single and text == "\\."):
        return '"' + text.replace('"', '""') + '"'
    return text


def one_by_one(
    names: list[str], rows: list[tuple[object, ...]], *, csv: bool, header: bool, separator: str
) -> bytes:
    def line(values: tuple[object, ...]) -> bytes:
        if csv:
            fields = [csv_field(value, separator, single=len(names) == 1) for value in values]
        else:
            fields = [text_field(value, separator) for value in values]
        return copy_data((separator.join(fields) + "\n").encode())

    return (line(tuple(names)) if header else b"") + b"".join(line(row) for row in rows)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[tuple[object, ...]]]:
    """Columns of one type (the encoder's fast paths), with NULLs or without, or of any values."""
    width = draw(st.integers(min_value=1, max_value=4))
    kinds = [
        draw(
            st.sampled_from([VALUES, st.integers(), st.floats(), st.text(), st.booleans(), st.text(SPECIAL)])
        )
        for _ in range(width)
    ]
    nullable = [draw(st.booleans()) for _ in range(width)]
    columns = [
        st.one_of(st.none(), kind) if null else kind for kind, null in zip(kinds, nullable, strict=True)
    ]
    names = draw(st.lists(st.text(min_size=1, max_size=6), min_size=width, max_size=width))
    return names, draw(st.lists(st.tuples(*columns), max_size=12))


@given(
    tables(),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["\t", ",", "|", ";", '"', "\\", "x"]),
    st.integers(min_value=1, max_value=5),
)
def test_batch_encoding_equals_escaping_value_by_value(
    table: tuple[list[str], list[tuple[object, ...]]], csv: bool, header: bool, separator: str, chunk: int
) -> None:
    names, rows = table
    if (csv and separator == '"') or (not csv and separator in "\\x"):
        return  # delimiters PostgreSQL (and proxy/analysis/copy.py) refuse in that format
    columns = [list(column) for column in zip(*rows, strict=True)] or [[] for _ in names]
    encoded = copy_data_messages(
        names, columns, len(rows), csv=csv, header=header, separator=separator, chunk_rows=chunk
    )
    assert b"".join(encoded) == one_by_one(names, rows, csv=csv, header=header, separator=separator)


def test_rows_are_sent_a_chunk_at_a_time() -> None:
    chunks = list(
        copy_data_messages(["a"], [[1, 2, 3, 4, 5]], 5, csv=False, header=True, separator="\t", chunk_rows=2)
    )
    assert chunks == [
        copy_data(b"a\n"),
        copy_data(b"1\n") + copy_data(b"2\n"),
        copy_data(b"3\n") + copy_data(b"4\n"),
        copy_data(b"5\n"),
    ]


def test_a_row_without_columns_is_an_empty_line() -> None:
    assert (
        b"".join(copy_data_messages([], [], 2, csv=True, header=False, separator=",")) == copy_data(b"\n") * 2
    )
