"""The batch DataRow encoder sends exactly the bytes of one ``data_row`` per row."""

from __future__ import annotations

import datetime
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from proxy.wire import messages as wire
from proxy.wire.rows import text_data_rows
from proxy.wire.types import encode_text_value

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.floats(min_value=-1e6, max_value=1e6).map(lambda value: round(value, 2)),
    st.text(),
    st.text(alphabet="abc xyz", max_size=5000),
    st.dates(),
    st.decimals(allow_nan=False, allow_infinity=False),
)


def one_by_one(rows: list[tuple[object, ...]]) -> bytes:
    return b"".join(wire.data_row([encode_text_value(value) for value in row]) for row in rows)


@st.composite
def tables(draw: st.DrawFn) -> list[tuple[object, ...]]:
    """Columns of one type (the encoder's fast paths) or of any values (its fallback)."""
    width = draw(st.integers(min_value=0, max_value=4))
    kinds = [
        draw(st.sampled_from([VALUES, st.integers(), st.floats(), st.text(), st.floats(0.0, 1e3)]))
        for _ in range(width)
    ]
    rows = draw(st.lists(st.tuples(*kinds), max_size=12))
    return rows


@given(tables())
def test_batch_encoding_equals_one_data_row_per_row(rows: list[tuple[object, ...]]) -> None:
    assert text_data_rows(rows) == one_by_one(rows)


def test_mixed_widths_and_long_values() -> None:
    rows: list[tuple[object, ...]] = [
        (1, "x" * 70_000, 0.0),
        (-0.0, None, datetime.date(2024, 2, 29)),
        (True, "日本", Decimal("1.50")),
        (1e15,),
        (),
    ]
    assert text_data_rows(rows) == one_by_one(rows)
    assert text_data_rows([]) == b""
