"""Long statement texts analysed in worker processes (proxy/server/analysis_pool.py) are answered exactly as
when the server analyses them itself (``analysis_processes = 0``): same SQLSTATE, message and position,
statement by statement, in both protocols and inside a failed transaction block — and what a batch ran
before a refused statement still ran and was charged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import Admin, Analyst, RunningServer, running_server
from tests.integration.slow_dataset import build_slow_dataset, connect, with_server_settings

VALUES = ", ".join(map(str, range(4000)))
HEAVY = f"SELECT COUNT(*) FROM medium WHERE v IN ({VALUES})"  # over max_nodes (2,000): 54001
LONG_TEXTS = {
    "over the complexity budget": HEAVY,
    "a syntax error far into the text": f"SELECT COUNT(*) FROM medium WHERE v IN ({VALUES}) AND AND v > 1",
    "an unknown column": f"SELECT COUNT(*) FROM medium WHERE nope IN ({', '.join(map(str, range(900)))})",
    "a second statement refused": f"SELECT COUNT(*) FROM medium; {HEAVY}",
    "a refused statement before an accepted one": f"{HEAVY}; SELECT COUNT(*) FROM medium",
}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[RunningServer, Admin]]]:
    """The same dataset served twice: analysis in worker processes, and in the server process only."""
    directory = tmp_path_factory.mktemp("analysis_pool")
    configs = {
        name: with_server_settings(build_slow_dataset(directory / name), f"{name}.toml", analysis_processes=n)
        for name, n in (("pool", 2), ("threads", 0))
    }
    with (
        running_server(configs["pool"], directory / "pool.log") as pool,
        running_server(configs["threads"], directory / "threads.log") as threads,
    ):
        yield {"pool": (pool, Admin(configs["pool"])), "threads": (threads, Admin(configs["threads"]))}


def outcome(server: RunningServer, analyst: Analyst, sql: str, **options: Any) -> tuple[object, ...]:
    """(SQLSTATE, message, position, ε the analyst has spent) of sending ``sql`` once."""
    with connect(server, analyst) as connection:
        try:
            connection.execute(sql, **options)  # type: ignore[arg-type]
            error: tuple[object, ...] = (None, None, None)
        except psycopg.Error as failure:
            diag = failure.diag
            error = (diag.sqlstate, diag.message_primary, diag.statement_position)
        spent = connection.execute("SELECT spent_epsilon FROM veil.budget").fetchone()
    return (*error, spent[0] if spent else None)


@pytest.mark.parametrize("case", sorted(LONG_TEXTS))
def test_a_long_text_is_answered_as_the_server_process_would(
    servers: dict[str, tuple[RunningServer, Admin]], case: str
) -> None:
    results = {}
    for name, (server, admin) in servers.items():
        results[name] = outcome(server, admin.add_analyst(10.0, prefix="long"), LONG_TEXTS[case])
    assert results["pool"] == results["threads"]
    assert results["pool"][0] is not None, "every text here is refused somewhere"


def test_what_ran_before_the_refused_statement_was_charged(
    servers: dict[str, tuple[RunningServer, Admin]],
) -> None:
    server, admin = servers["pool"]
    sqlstate, _, _, spent = outcome(
        server, admin.add_analyst(10.0, prefix="first"), LONG_TEXTS["a second statement refused"]
    )
    assert sqlstate == "54001" and spent is not None and float(spent) > 0
    sqlstate, _, _, spent = outcome(
        server,
        admin.add_analyst(10.0, prefix="none"),
        LONG_TEXTS["a refused statement before an accepted one"],
    )
    assert sqlstate == "54001" and float(spent or 0) == 0  # the batch ended at the refusal


def test_a_failed_block_answers_25p02_before_any_analysis(
    servers: dict[str, tuple[RunningServer, Admin]],
) -> None:
    results = {}
    for name, (server, admin) in servers.items():
        with connect(server, admin.add_analyst(1.0, prefix="block")) as connection:
            connection.execute("BEGIN")
            with pytest.raises(psycopg.errors.UndefinedTable):
                connection.execute("SELECT COUNT(*) FROM nowhere")
            with pytest.raises(psycopg.Error) as refused:
                connection.execute(HEAVY)
            results[name] = refused.value.diag.sqlstate
    assert results == {"pool": "25P02", "threads": "25P02"}


def test_the_extended_protocol_gets_the_same_refusal(servers: dict[str, tuple[RunningServer, Admin]]) -> None:
    results = {}
    for name, (server, admin) in servers.items():
        results[name] = outcome(server, admin.add_analyst(1.0, prefix="ext"), HEAVY, prepare=True)
    assert results["pool"] == results["threads"] and results["pool"][0] == "54001"


def test_a_long_accepted_statement_is_answered(servers: dict[str, tuple[RunningServer, Admin]]) -> None:
    server, admin = servers["pool"]
    values = ", ".join(map(str, range(1000, 1900)))  # 5,400 characters: over the event loop's share
    sql = f"SELECT COUNT(*) FROM medium WHERE v IN ({values})"
    assert len(sql) > 4096
    with connect(server, admin.add_analyst(10.0, prefix="accepted")) as connection:
        (count,) = connection.execute(sql).fetchone()  # type: ignore[misc]
    assert count is not None


def test_only_the_pool_server_started_analysis_processes(
    servers: dict[str, tuple[RunningServer, Admin]],
) -> None:
    """Run last (file order): by now both servers have analysed long texts; only one did it elsewhere."""
    pool, threads = (servers[name][0] for name in ("pool", "threads"))
    assert descendants(pool.process.pid) and not descendants(threads.process.pid)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc): the forkserver and the workers it forked. A child is
    listed under the thread that started it, so every thread of each process is read."""
    found, stack = [], [pid]
    while stack:
        parent = stack.pop()
        for children in Path(f"/proc/{parent}/task").glob("*/children"):
            for child in map(int, children.read_text().split()):
                found.append(child)
                stack.append(child)
    return found
