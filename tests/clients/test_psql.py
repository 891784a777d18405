"""The real ``psql`` binary against ``veil serve``."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import ALICE, Admin, Analyst, RunningServer

pytestmark = [
    pytest.mark.client,
    pytest.mark.skipif(
        shutil.which("psql") is None,
        reason="the psql client is not installed (apt-get install postgresql-client)",
    ),
]


def psql(
    server: RunningServer,
    *args: str,
    analyst: Analyst = ALICE,
    dbname: str = "demo",
    script: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``psql -X -v ON_ERROR_STOP=1 URL ARGS…`` with the password in PGPASSWORD and no other PG* variable."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PG")},
        "PGPASSWORD": analyst.password,
        "PGCONNECT_TIMEOUT": "10",
    }
    return subprocess.run(
        ["psql", "-X", "-v", "ON_ERROR_STOP=1", server.url(analyst.name, dbname), *args],
        input=script,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def test_count_prints_a_number_and_the_notice_on_stderr(veil_server: RunningServer) -> None:
    result = psql(veil_server, "-A", "-t", "-c", "SELECT COUNT(*) FROM visits")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().lstrip("-").isdigit(), result.stdout
    assert "NOTICE:  differential privacy: this answer spent ε=0.1" in result.stderr
    assert "ε remains on dataset demo" in result.stderr


def test_group_by_prints_a_table_with_every_region(veil_server: RunningServer) -> None:
    result = psql(veil_server, "-c", "SELECT region, COUNT(*) FROM patients GROUP BY region")
    assert result.returncode == 0, result.stderr
    assert "(7 rows)" in result.stdout
    for region in ("capital", "north", "south", "east", "west", "coast", "islands"):
        assert region in result.stdout


def test_select_star_fails_with_an_error_about_private_rows(veil_server: RunningServer) -> None:
    result = psql(veil_server, "-c", "SELECT * FROM visits")
    assert result.returncode != 0
    assert "ERROR:" in result.stderr
    assert "private rows" in result.stderr
    assert result.stdout == ""


def test_on_error_stop_stops_a_script_at_the_first_refusal(veil_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="psql")
    script = (
        "SELECT COUNT(*) FROM patients;\nSELECT patient_id FROM patients;\nSELECT COUNT(*) FROM visits;\n"
    )
    result = psql(veil_server, "-f", "-", analyst=analyst, script=script)
    assert result.returncode == 3  # psql: a script stopped by ON_ERROR_STOP
    assert 'column "patient_id" is private' in result.stderr
    assert result.stderr.count("NOTICE:  differential privacy") == 1
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.1, abs=1e-12)  # the third never ran


def test_set_and_show_epsilon_in_one_session(veil_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="psqlset")
    result = psql(
        veil_server,
        "-A",
        "-t",
        "-c",
        "SET veil.epsilon = 0.5",
        "-c",
        "SHOW veil.epsilon",
        "-c",
        "SELECT COUNT(*) FROM patients",
        analyst=analyst,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["SET", "0.5"]
    assert "spent ε=0.5" in result.stderr
    assert admin.balance(analyst)["spent_epsilon"] == 0.5


def test_wrong_password_fails_to_connect(veil_server: RunningServer) -> None:
    result = psql(veil_server, "-c", "SELECT 1", analyst=Analyst("alice", "wrong"))
    assert result.returncode == 2  # psql: the connection failed
    assert 'password authentication failed for user "alice"' in result.stderr
