"""A fault of the ledger reaches the client as an error with a SQLSTATE, and the session goes on
(docs/admin.md). The faults are real: a trigger in the ledger file that makes every audit write fail, as
a full or broken disk would; another process holding the SQLite ledger's write lock; the network to a
PostgreSQL ledger cut and restored."""

from __future__ import annotations

import contextlib
import sqlite3
import tomllib
from pathlib import Path

import psycopg
import pytest
import tomli_w
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.conftest import Admin, running_server, schema_in
from tests.integration.slow_dataset import build_slow_dataset, connect
from tests.robustness.tcp_relay import TcpRelay

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


def test_a_locked_ledger_is_55p03_charges_nothing_and_the_session_goes_on(tmp_path: Path) -> None:
    """Another process holds the SQLite ledger's write lock past ``[ledger] lock_timeout_s``."""
    config = with_ledger_settings(build_slow_dataset(tmp_path / "slow"), lock_timeout_s=1)
    admin = Admin(config)
    analyst = admin.add_analyst(1.0, prefix="locked")
    with running_server(config, tmp_path / "serve.log") as server, connect(server, analyst) as connection:
        with contextlib.closing(
            sqlite3.connect(config.with_name("ledger.sqlite"), isolation_level=None)
        ) as holder:
            holder.execute("BEGIN IMMEDIATE")  # the write lock, held by another process's connection
            with pytest.raises(psycopg.Error) as failed:
                connection.execute(QUERY)
            holder.execute("ROLLBACK")
        assert failed.value.sqlstate == "55P03"
        assert admin.history(analyst) == []  # refused before the engine: nothing reserved, nothing spent
        assert connection.execute(QUERY).fetchone() is not None  # the same session, once the lock is gone
    assert admin.balance(analyst)["spent_epsilon"] > 0


@pytest.mark.postgres
def test_an_unreachable_postgresql_ledger_is_08006_and_the_session_recovers(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """The network to a PostgreSQL ledger goes down (a relay is cut) and comes back."""
    parts = conninfo_to_dict(postgres_dsn)
    upstream = (str(parts.get("host", "127.0.0.1")), int(parts.get("port", 5432)))
    with schema_in(postgres_dsn) as schema, TcpRelay(upstream) as relay:
        dsn = make_conninfo(postgres_dsn, host="127.0.0.1", port=str(relay.port))
        config = with_ledger_settings(build_slow_dataset(tmp_path / "slow"), dsn=dsn, schema=schema)
        admin = Admin(config)
        analyst = admin.add_analyst(1.0, prefix="remote")
        with running_server(config, tmp_path / "serve.log") as server, connect(server, analyst) as connection:
            assert connection.execute(QUERY).fetchone() is not None
            relay.cut()
            with pytest.raises(psycopg.Error) as failed:
                connection.execute(QUERY + " AND v < 90")
            relay.restore()
            assert failed.value.sqlstate == "08006"
            assert failed.value.diag.message_primary == "the connection to the privacy ledger was lost"
            assert connection.execute(QUERY + " AND v < 90").fetchone() is not None  # the same session
        assert [spend["state"] for spend in admin.history(analyst)] == ["committed", "committed"]


def with_ledger_settings(config: Path, **ledger: object) -> Path:
    """The policy with other ``[ledger]`` keys (``path`` kept unless ``dsn`` replaces it)."""
    document = tomllib.loads(config.read_text(encoding="utf-8"))
    document["ledger"] = ({} if "dsn" in ledger else document["ledger"]) | ledger
    config.write_text(tomli_w.dumps(document), encoding="utf-8")
    return config
