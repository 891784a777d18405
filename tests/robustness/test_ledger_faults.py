"""A fault of the ledger reaches the client as an error with a SQLSTATE, and the session goes on
(docs/admin.md): the fault here is real — a trigger in the ledger file that makes every audit write
fail, as a full or broken disk would."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import psycopg
import pytest

from tests.conftest import Admin, running_server
from tests.integration.slow_dataset import build_slow_dataset, connect

QUERY = "SELECT COUNT(*) FROM medium WHERE v > 50"


def test_an_audit_log_that_cannot_be_written_withholds_the_answer_and_keeps_the_session(
    tmp_path: Path,
) -> None:
    config = build_slow_dataset(tmp_path / "slow")
    admin = Admin(config)
    analyst = admin.add_analyst(1.0, prefix="faulted")
    ledger = config.with_name("ledger.sqlite")
    with running_server(config, tmp_path / "serve.log") as server, connect(server, analyst) as connection:
        with contextlib.closing(sqlite3.connect(ledger)) as behind:
            behind.execute(
                "CREATE TRIGGER veil_test_fault BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'fault'); END"
            )
            behind.commit()
        with pytest.raises(psycopg.Error) as failed:
            connection.execute(QUERY)
        assert failed.value.sqlstate == "58030"
        assert failed.value.diag.message_primary == "the privacy ledger is unavailable"
        assert [spend["state"] for spend in admin.history(analyst)] == ["committed"]  # it was charged
        with contextlib.closing(sqlite3.connect(ledger)) as behind:
            behind.execute("DROP TRIGGER veil_test_fault")
            behind.commit()
        assert connection.execute(QUERY).fetchone() is not None  # the same session, the stored answer
        assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(admin.history(analyst)[0]["epsilon"])
        assert "audit append failed" in server.output()
