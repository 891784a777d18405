"""A DuckDB dataset's engine session (proxy/backends/duckdb.py): in UTC whatever the machine's time zone,
without external access, and with a configuration no query can change back."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

from proxy.backends.duckdb import DuckDBBackend
from proxy.errors import BackendUnavailableError

SETTINGS = "SELECT current_setting('TimeZone'), current_setting('enable_external_access')"


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The machine's time zone is New York: DuckDB takes ``TZ`` as its TimeZone when a database opens."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def dataset(tmp_path: Path, new_york: None) -> Path:
    path = tmp_path / "moments.duckdb"
    with duckdb.connect(str(path)) as connection:
        assert connection.execute("SELECT current_setting('TimeZone')").fetchone() == ("America/New_York",)
        connection.execute("CREATE TABLE t AS SELECT TIMESTAMPTZ '2024-01-31 23:30:00-05' AS ts")
    return path


@pytest.mark.parametrize("open_backend", [DuckDBBackend, lambda _: DuckDBBackend.sandbox()])
def test_sessions_run_in_utc_without_external_access(
    dataset: Path, open_backend: Callable[[Path], DuckDBBackend]
) -> None:
    backend = open_backend(dataset)
    try:
        assert backend.execute(SETTINGS)[1] == [("UTC", False)]
    finally:
        backend.close()


def test_a_timestamp_with_a_time_zone_is_truncated_in_utc(dataset: Path) -> None:
    backend = DuckDBBackend(dataset)
    try:
        ((day, hour),) = backend.execute(
            "SELECT CAST(date_trunc('day', ts) AS TIMESTAMP), EXTRACT(hour FROM ts) FROM t"
        )[1]
    finally:
        backend.close()
    assert (day.isoformat(), hour) == ("2024-02-01T00:00:00", 4)


@pytest.mark.parametrize(
    "setting", ["SET TimeZone = 'America/New_York'", "SET enable_external_access = true"]
)
def test_a_query_cannot_change_the_session_back(dataset: Path, setting: str) -> None:
    backend = DuckDBBackend(dataset)
    try:
        with pytest.raises(BackendUnavailableError):
            backend.execute(setting)
        assert backend.execute(SETTINGS)[1] == [("UTC", False)]
    finally:
        backend.close()
