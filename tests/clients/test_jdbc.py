"""The client scenario through pgjdbc (Debian's ``libpostgresql-jdbc-java``, ``/usr/share/java/postgresql.jar``)
and the small program ``java/Scenario.java``, over plain TCP and TLS (``ssl=true&sslmode=require`` with
``NonValidatingFactory``), on both engines: connect with SCRAM, ``SELECT 1``, a DP count through a
``PreparedStatement`` with ``?`` (extended protocol), ``DatabaseMetaData.getTables/getColumns``, a refused
query then a good one on the same connection, ``Statement.cancel()`` of a slow query (57014, nothing
spent), disconnect.

The program is compiled once per module into a temporary directory and prints one JSON line per step;
see ``external_clients.py`` for the fixtures and the skip rules.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.clients.external_clients import (
    EPSILON,
    MIN_AGE,
    TRANSPORTS,
    SlowTarget,
    Target,
    assert_cancel_charged,
    certificate,
    check_common_steps,
    run_scenario,
    slow_target,
    target_for,
    tls_server,
    visits_columns,
)
from tests.conftest import Admin, Analyst, Demo, RunningServer, missing

__all__ = ["certificate", "slow_target", "tls_server"]  # fixtures used by name

pytestmark = pytest.mark.client

SOURCE = Path(__file__).with_name("java") / "Scenario.java"
JAR_VARIABLE = "VEIL_PGJDBC_JAR"
DEFAULT_JAR = Path("/usr/share/java/postgresql.jar")
TLS_OPTIONS = "ssl=true&sslmode=require&sslfactory=org.postgresql.ssl.NonValidatingFactory"


@pytest.fixture(scope="module")
def java_classpath(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """``java`` and the classpath of the compiled ``Scenario`` (pgjdbc jar first)."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if java is None or javac is None:
        missing("java and javac (JDK 11 or later) are not installed")
    jar = Path(os.environ.get(JAR_VARIABLE) or DEFAULT_JAR)
    if not jar.is_file():
        missing(
            f"the pgjdbc jar {jar} is missing: apt-get install libpostgresql-jdbc-java (or set {JAR_VARIABLE})"
        )
    build = tmp_path_factory.mktemp("jdbc-build")
    compiled = subprocess.run(
        [str(javac), "-d", str(build), "-cp", str(jar), str(SOURCE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert compiled.returncode == 0, f"javac failed:\n{compiled.stdout}\n{compiled.stderr}"
    return [str(java), "-cp", os.pathsep.join([str(jar), str(build)])]


def jdbc_url(server: RunningServer, tls: bool) -> str:
    url = f"jdbc:postgresql://{server.host}:{server.port}/demo"
    return f"{url}?{TLS_OPTIONS}" if tls else f"{url}?sslmode=disable"


def jdbc_scenario(
    java: list[str], target: Target, slow: SlowTarget, slow_analyst: Analyst
) -> dict[str, dict[str, Any]]:
    return run_scenario(
        [
            *java,
            "Scenario",
            jdbc_url(target.server, target.tls),
            target.analyst.name,
            target.analyst.password,
            str(MIN_AGE),
            repr(EPSILON),
            jdbc_url(slow.server, target.tls),
            slow_analyst.name,
            slow_analyst.password,
            slow.query,
        ]
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_pgjdbc_scenario(
    transport: str,
    java_classpath: list[str],
    veil_server: RunningServer,
    tls_server: RunningServer,
    slow_target: SlowTarget,
    admin: Admin,
    demo: Demo,
) -> None:
    analyst = admin.add_analyst(5.0, prefix="jdbc")
    slow_analyst = slow_target.admin.add_analyst(1.0, prefix="jdbcslow")
    target = target_for(transport, veil_server, tls_server, analyst)
    steps = jdbc_scenario(java_classpath, target, slow_target, slow_analyst)

    check_common_steps(steps, demo, target.tls)
    assert steps["tables"]["tables"] == ["patients", "visits", "zones"]
    columns = steps["columns"]["columns"]
    assert [name for name, _, _ in columns] == visits_columns(demo)
    types = {name: type_name for name, type_name, _ in columns}
    assert types["cost"] == "float8"
    remarks = {name: remark for name, _, remark in columns}
    assert "privacy unit" in remarks["patient_id"]
    assert steps["disconnect"]["closed"] is True
    assert steps["fetch_size"]["rows"] == 7  # every region, read two at a time through a portal
    # two DP answers charged (the count, the grouped count read through a portal); the refused query, the
    # metadata and the repeated count cost nothing
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(2 * EPSILON)
    # the cancelled query released nothing but is charged: the engine had started on it
    assert_cancel_charged(slow_target, slow_analyst)
