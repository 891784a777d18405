"""``veil serve`` refuses to start on a ledger with damaged pages, with one line (it used to start and
then drop every login)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from pathlib import Path

from tests.conftest import Admin, veil_command
from tests.integration.slow_dataset import build_slow_dataset


def test_serve_refuses_a_damaged_ledger_in_one_line(tmp_path: Path) -> None:
    config = build_slow_dataset(tmp_path / "slow")
    Admin(config).add_analyst(1.0, prefix="before")
    ledger = config.with_name("ledger.sqlite")
    with contextlib.closing(sqlite3.connect(ledger)) as db:  # the page only a login reads
        ((root,),) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'analysts'").fetchall()
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
    with ledger.open("r+b") as file:  # scribble over it: the header and the schema stay intact
        file.seek((root - 1) * page_size + 8)
        file.write(os.urandom(page_size - 8))
    result = subprocess.run(
        [*veil_command(), "serve", "--config", str(config), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "is damaged" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
