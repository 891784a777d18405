"""The real ``psql`` binary against ``veil serve``, on both backends (``[duckdb]`` and ``[postgres]``, see
``conftest.py``): what an analyst sees in a terminal — tables, NOTICEs on stderr, SQLSTATEs of refusals."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess

import pytest

from tests.conftest import ALICE, DATASET, Admin, Analyst, RunningServer

NUMBERS = itertools.count(1)

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


def test_count_prints_a_number_and_the_notice_on_stderr(veil_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="psqlcount")  # alice may have asked this before: a free repeat
    result = psql(veil_server, "-A", "-t", "-c", "SELECT COUNT(*) FROM visits", analyst=analyst)
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


WIDER_SURFACE = """
SET veil.epsilon = 0.5;
SELECT MEDIAN(age) AS median_age, PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) AS p90 FROM patients;
SELECT COUNT(*) AS people, AVG(veil_clamp(n, 0, 20)) AS visits_per_patient
  FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) AS p;
SELECT p.sex, COUNT(*) AS visits, AVG(v.cost) AS mean_cost
  FROM visits v JOIN patients p ON v.patient_id = p.patient_id WHERE p.age >= 65 GROUP BY p.sex;
SELECT z.zone, COUNT(*) AS patients FROM patients p JOIN zones z ON p.region = z.code GROUP BY z.zone;
SET veil.delta = 1e-6;
SELECT visit_id % 2 AS parity, COUNT(*) AS visits FROM visits GROUP BY 1 ORDER BY 1;
SET veil.show_error = on;
SET veil.other_row = on;
SELECT sex, SUM(income) AS income FROM patients GROUP BY sex;
"""


def test_the_wider_sql_surface_answers_in_one_script(veil_server: RunningServer, admin: Admin) -> None:
    """Quantiles, a per-person subquery, joins on the privacy unit and with a lookup table, keys from the
    data under τ, show_error and the (other) row — each answered, each charged once."""
    analyst = Analyst(f"psqlwide{next(NUMBERS)}", "pw-wide")
    admin.check("analyst", "add", analyst.name, "--password-stdin", input=analyst.password + "\n")
    admin.check("budget", "grant", analyst.name, DATASET, "5", "--delta", "1e-5")

    result = psql(veil_server, "-f", "-", analyst=analyst, script=WIDER_SURFACE)

    assert result.returncode == 0, result.stderr
    assert "ERROR" not in result.stderr
    tables = [line for line in result.stdout.splitlines() if line.startswith("(")]
    # median/p90, per-person, sex, zones (centre, mainland, shore, overseas), parities, sex + (other)
    assert tables == ["(1 row)", "(1 row)", "(2 rows)", "(4 rows)", "(2 rows)", "(3 rows)"]
    assert " overseas " in result.stdout  # the lookup table's zone without patients: a noisy zero
    assert "(other)" in result.stdout
    assert result.stderr.count("NOTICE:  differential privacy: this answer spent ε=0.5") == 6
    assert "τ=" in result.stderr
    assert result.stderr.count("NOTICE:  95% error bounds of the noise") == 1
    balance = admin.balance(analyst)
    assert balance["spent_epsilon"] == pytest.approx(3.0)
    assert balance["spent_delta"] == pytest.approx(1e-6)


def test_refusals_show_their_sqlstate_and_the_script_goes_on(
    veil_server: RunningServer, admin: Admin
) -> None:
    analyst = admin.add_analyst(0.25, prefix="psqlerr")
    script = (
        "\\set ON_ERROR_STOP off\n\\set VERBOSITY verbose\n"
        "SELECT * FROM visits;\n"
        "SELECT SUM(nope) FROM visits;\n"
        "SELEC COUNT(*) FROM visits;\n"
        "SET veil.epsilon = 0.2;\n"
        "SELECT COUNT(*) FROM patients;\n"
        "SELECT COUNT(*) FROM visits;\n"  # another query: a repeat would get the stored answer, free
        "SELECT 1 AS still_here;\n"
    )
    result = psql(veil_server, "-f", "-", analyst=analyst, script=script)
    assert result.returncode == 0, result.stderr  # errors do not stop a script without ON_ERROR_STOP
    errors = [line.split("ERROR:  ", 1)[1] for line in result.stderr.splitlines() if "ERROR:  " in line]
    assert [error.split(":", 1)[0] for error in errors] == ["42501", "42703", "42601", "53Z01"], errors
    assert "private rows" in errors[0]
    assert 'column "nope" does not exist' in errors[1]
    assert "syntax error" in errors[2]
    assert "exhausted" in errors[3]
    assert "still_here" in result.stdout
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.2)
