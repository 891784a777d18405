"""``DuckDBBackend.execute_columns`` (a COPY of a public table) gives exactly ``execute``'s values, column by
column — fetched as NumPy arrays for integers, floats, booleans and strings, row by row otherwise — and
fails and stops as ``execute`` does."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from proxy.backends.base import Columns
from proxy.backends.duckdb import DuckDBBackend
from proxy.errors import BackendUnavailableError, QueryCanceledError

TABLE = """
CREATE TABLE t AS SELECT * FROM (VALUES
    (1::TINYINT, 2::SMALLINT, 3::INTEGER, 4::BIGINT, 5::UBIGINT, 0.1::FLOAT, 0.1::DOUBLE, true, 'é',
     DATE '2024-02-29', 1.25::DECIMAL(10, 2), 170141183460469231731687303715884105727::HUGEINT),
    (NULL, NULL, NULL, (-9223372036854775807 - 1)::BIGINT, NULL, NULL, 'NaN'::DOUBLE, NULL, NULL, NULL, NULL, NULL),
    (-1, -2, -3, 9223372036854775807::BIGINT, 18446744073709551615::UBIGINT, -0.0, -0.0, false, '', NULL, NULL, -1)
) AS v(ti, si, i, bi, ub, f, d, b, s, day, dec, huge)
"""
NUMPY_COLUMNS = "ti, si, i, bi, ub, f, d, b, s"


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "columns.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute(TABLE)
        connection.execute("CREATE TABLE big AS SELECT range AS i FROM range(50000)")
    return path


@pytest.fixture
def backend(dataset: Path) -> Iterator[DuckDBBackend]:
    engine = DuckDBBackend(dataset)
    yield engine
    engine.close()


def same(left: object, right: object) -> bool:
    """Equal values of the same type (NaN equal to NaN, -0.0 not to 0.0)."""
    if isinstance(left, float) and isinstance(right, float):
        return repr(left) == repr(right)
    return type(left) is type(right) and left == right


@pytest.mark.parametrize(
    "query",
    [
        f"SELECT {NUMPY_COLUMNS} FROM t ORDER BY bi",  # every type NumPy hands back exactly, NULLs too
        "SELECT i, day, dec, huge FROM t ORDER BY bi",  # a date, a decimal, a hugeint: row by row
        "SELECT i, i, s AS I FROM t ORDER BY bi",  # duplicate names (fetchnumpy would rename them)
        "SELECT i, s FROM t WHERE false",  # no rows
    ],
)
def test_columns_are_executes_rows_transposed(backend: DuckDBBackend, query: str) -> None:
    description, rows = backend.execute(query)
    columns = backend.execute_columns(query)
    assert columns.description == description and columns.count == len(rows)
    expected = Columns.of_rows(description, rows).values
    assert len(columns.values) == len(expected)
    for got, want in zip(columns.values, expected, strict=True):
        assert len(got) == len(want) and all(map(same, got, want)), (got, want)


def test_an_engine_error_is_generic(backend: DuckDBBackend) -> None:
    with pytest.raises(BackendUnavailableError, match="could not run the query") as raised:
        backend.execute_columns("SELECT CAST(s AS INTEGER) FROM t")
    assert "é" not in str(raised.value)  # the engine's text can quote a value: never passed on


def test_the_statement_timeout_stops_a_columnar_fetch(dataset: Path) -> None:
    backend = DuckDBBackend(dataset, statement_timeout_ms=100)
    started = time.monotonic()
    with pytest.raises(QueryCanceledError, match="statement timeout"):
        backend.execute_columns("SELECT count(*) FROM big AS a, big AS b WHERE (a.i * b.i) % 7 = 1")
    assert time.monotonic() - started < 5
    assert backend.execute("SELECT count(*) FROM big")[1] == [(50000,)]  # the engine still answers
    backend.close()
