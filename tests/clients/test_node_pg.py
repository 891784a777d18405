"""The client scenario through node-postgres (``pg`` from npm, installed by ``npm ci --prefix
tests/clients/node``), over plain TCP and TLS, on both engines: connect with SCRAM, ``SELECT 1``, a DP
count with a ``$1`` parameter (extended protocol), a query on ``information_schema.columns``, a refused
query then a good one on the same connection, cancel of a slow query (57014, charged), disconnect.

``node/scenario.js`` prints one JSON line per step; see ``external_clients.py`` for the fixtures and
the skip rules.
"""

from __future__ import annotations

import json
import shutil
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

NODE_DIRECTORY = Path(__file__).with_name("node")
SCENARIO = NODE_DIRECTORY / "scenario.js"


@pytest.fixture(scope="module")
def node() -> str:
    node = shutil.which("node")
    if node is None:
        missing("node is not installed")
    if not (NODE_DIRECTORY / "node_modules" / "pg" / "package.json").exists():
        missing(f"node-postgres is not installed: run `npm ci --prefix {NODE_DIRECTORY}`")
    return str(node)


def node_scenario(node: str, target: Target, slow: SlowTarget, slow_analyst: Analyst) -> dict[str, Any]:
    server = target.server
    options = {
        "host": server.host,
        "port": server.port,
        "database": "demo",
        "user": target.analyst.name,
        "password": target.analyst.password,
        "ssl": target.tls,
        "epsilon": EPSILON,
        "minAge": MIN_AGE,
        "slow": {
            "host": slow.server.host,
            "port": slow.server.port,
            "database": "demo",
            "user": slow_analyst.name,
            "password": slow_analyst.password,
            "query": slow.query,
        },
    }
    return run_scenario([node, str(SCENARIO), json.dumps(options)], cwd=NODE_DIRECTORY)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_node_postgres_scenario(
    transport: str,
    node: str,
    veil_server: RunningServer,
    tls_server: RunningServer,
    slow_target: SlowTarget,
    admin: Admin,
    demo: Demo,
) -> None:
    analyst = admin.add_analyst(5.0, prefix="node")
    slow_analyst = slow_target.admin.add_analyst(1.0, prefix="nodeslow")
    target = target_for(transport, veil_server, tls_server, analyst)
    steps = node_scenario(node, target, slow_target, slow_analyst)

    check_common_steps(steps, demo, target.tls)
    if target.tls:
        assert steps["connect"]["protocol"].startswith("TLSv1."), steps["connect"]
    assert steps["dp_count"]["fields"] == ["n"]
    columns = steps["introspection"]["columns"]
    assert [name for name, _ in columns] == visits_columns(demo)
    assert dict(columns)["cost"] == "double precision"
    # one DP count charged; the refused query, the catalog and the repeated count cost nothing
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(EPSILON)
    # the cancelled query released nothing but is charged: the engine had started on it
    assert_cancel_charged(slow_target, slow_analyst)
