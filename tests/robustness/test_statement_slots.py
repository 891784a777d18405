"""``[server] max_statements_per_analyst``: one analyst's statements beyond the limit wait their turn,
across all their connections, while other analysts are served at once."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import psycopg

from tests.conftest import Admin, running_server
from tests.integration.slow_dataset import (
    MEDIUM_QUERY,
    SLOW_QUERY,
    build_slow_dataset,
    connect,
    with_server_settings,
)


def test_a_second_statement_of_one_analyst_waits_for_the_first_others_do_not(tmp_path: Path) -> None:
    config = with_server_settings(
        build_slow_dataset(tmp_path / "slow"), "one.toml", max_statements_per_analyst=1
    )
    admin = Admin(config)
    greedy, other = admin.add_analyst(2.0, prefix="greedy"), admin.add_analyst(1.0, prefix="other")
    with running_server(config, tmp_path / "serve.log") as server, contextlib.ExitStack() as stack:
        first, second = (stack.enter_context(connect(server, greedy)) for _ in range(2))
        done = threading.Event()

        def run(connection: psycopg.Connection, sql: str) -> None:  # type: ignore[type-arg]
            with contextlib.suppress(psycopg.Error):
                connection.execute(sql)
            if connection is second:
                done.set()

        slow = threading.Thread(target=run, args=(first, SLOW_QUERY))
        slow.start()
        while not admin.history(greedy):  # the slow statement holds the analyst's one slot
            threading.Event().wait(0.05)
        waiting = threading.Thread(target=run, args=(second, MEDIUM_QUERY))
        waiting.start()
        with connect(server, other) as unaffected:
            assert unaffected.execute(MEDIUM_QUERY).fetchone() is not None
        assert not done.wait(1.0), "the second statement ran although the analyst's slot was taken"
        while slow.is_alive():
            first.cancel_safe(timeout=5)
            slow.join(1)
        assert done.wait(60)
        waiting.join()
