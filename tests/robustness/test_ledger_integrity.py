"""``veil serve`` refuses to start on a ledger with damaged pages, with one line (it used to start and
then drop every login)."""

from __future__ import annotations

import contextlib
import random
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Admin, veil_command
from tests.integration.slow_dataset import build_slow_dataset


@pytest.mark.parametrize("seed", [0, 16])  # 16: the check itself fails (SQLITE_CORRUPT)
def test_serve_refuses_a_damaged_ledger_in_one_line(tmp_path: Path, seed: int) -> None:
    """Random bytes over a page: some make ``PRAGMA quick_check`` list the damage, others make it fail
    outright (CI once drew such bytes); either way the one line says the ledger is damaged."""
    config = build_slow_dataset(tmp_path / "slow")
    Admin(config).add_analyst(1.0, prefix="before")
    ledger = config.with_name("ledger.sqlite")
    with contextlib.closing(sqlite3.connect(ledger)) as db:  # the page only a login reads
        ((root,),) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'analysts'").fetchall()
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
    with ledger.open("r+b") as file:  # scribble over it: the header and the schema stay intact
        file.seek((root - 1) * page_size + 8)
        file.write(random.Random(seed).randbytes(page_size - 8))
    result = subprocess.run(
        [*veil_command(), "serve", "--config", str(config), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "is damaged" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
