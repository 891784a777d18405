"""Federated small-cell suppression end to end: two ``veil serve`` sites on loopback, generated data
(proxy/federation/sites.py), psycopg at site A — what is released, what is suppressed, who was charged, and
the failures that must cost nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from proxy.federation.sites import (
    ANALYST,
    ANALYST_PASSWORD,
    DATASET,
    FEDERATION,
    PEER_ANALYST,
    SECRET_ENV,
    Site,
    build_sites,
)
from tests.conftest import Admin, RunningServer, running_server

THRESHOLD = 20
COUNT = f"SELECT region, COUNT(*) FROM {FEDERATION} GROUP BY region"


@pytest.fixture
def sites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Site, Site]:
    monkeypatch.setenv(SECRET_ENV, "a-secret-both-sites-share-0123")
    return build_sites(tmp_path, cells=6, threshold=THRESHOLD, key_bits=1024)


def connect(server: RunningServer) -> psycopg.Connection:
    return psycopg.connect(
        host=server.host,
        port=server.port,
        dbname=DATASET,
        user=ANALYST,
        password=ANALYST_PASSWORD,
        autocommit=True,
    )


def spent(site: Site, account: str) -> float:
    rows = json.loads(Admin(site.config).check("budget", "show", account, "--json").stdout)
    return float(next(row for row in rows if row["dataset"] == DATASET)["spent_epsilon"])


@pytest.fixture
def both(sites: tuple[Site, Site]) -> Iterator[tuple[RunningServer, RunningServer]]:
    site_a, site_b = sites
    with (
        running_server(site_b.config, site_b.directory / "serve.log") as server_b,
        running_server(site_a.config, site_a.directory / "serve.log") as server_a,
    ):
        yield server_a, server_b


@pytest.mark.parametrize("prepare", [False, True], ids=["simple", "extended"])
def test_only_cells_reaching_k_are_released_and_both_sites_are_charged(
    sites: tuple[Site, Site], both: tuple[RunningServer, RunningServer], prepare: bool
) -> None:
    site_a, site_b = sites
    notices: list[str] = []
    with connect(both[0]) as connection:
        connection.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        rows = dict(connection.execute(COUNT, prepare=prepare).fetchall())
    for region in site_a.counts:
        exact = site_a.counts[region] + site_b.counts[region]
        if exact >= 3 * THRESHOLD:  # the large cells: far above k, released with two sites' noise (ε = 1)
            assert rows[region] is not None and abs(rows[region] - exact) <= 30
        else:  # the small cells: far below k
            assert exact < THRESHOLD / 2 and rows[region] is None
    assert any("3 suppressed (NULL)" in n and "other site spent ε = 1" in n for n in notices), notices
    assert spent(site_a, ANALYST) == pytest.approx(1.0)
    assert spent(site_b, PEER_ANALYST) == pytest.approx(1.0)


def test_a_count_at_a_site_whose_peer_is_down_fails_and_costs_nothing(sites: tuple[Site, Site]) -> None:
    site_a, _ = sites
    with (
        running_server(site_a.config, site_a.directory / "serve.log") as server_a,
        connect(server_a) as connection,
    ):
        with pytest.raises(psycopg.OperationalError) as raised:
            connection.execute(COUNT)
        assert raised.value.sqlstate == "08001" and "cannot reach the federation peer" in str(raised.value)
        assert connection.execute("SELECT 1").fetchone() == (1,)  # the session goes on
    assert spent(site_a, ANALYST) == 0


def test_sites_with_different_secrets_refuse_each_other_before_any_spend(
    sites: tuple[Site, Site], monkeypatch: pytest.MonkeyPatch
) -> None:
    site_a, site_b = sites
    with running_server(site_b.config, site_b.directory / "serve.log"):
        monkeypatch.setenv(SECRET_ENV, "not-the-secret-site-b-knows")
        with (
            running_server(site_a.config, site_a.directory / "serve.log") as server_a,
            connect(server_a) as c,
            pytest.raises(psycopg.OperationalError, match="did not prove it knows the shared secret"),
        ):
            c.execute(COUNT)
    assert spent(site_a, ANALYST) == 0 and spent(site_b, PEER_ANALYST) == 0


REFUSED = [
    f"SELECT COUNT(*) FROM {FEDERATION}",
    f"SELECT region, COUNT(DISTINCT patient_id) FROM {FEDERATION} GROUP BY region",
    f"SELECT region, COUNT(*) FROM {FEDERATION} GROUP BY region ORDER BY 2 DESC LIMIT 2",
    f"SELECT f.region, COUNT(*) FROM {FEDERATION} f JOIN patients p ON f.region = p.region GROUP BY 1",
]


def test_other_shapes_on_a_federation_are_refused_for_free(
    sites: tuple[Site, Site], both: tuple[RunningServer, RunningServer]
) -> None:
    with connect(both[0]) as connection:
        for statement in REFUSED:
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                connection.execute(statement)
    assert spent(sites[0], ANALYST) == 0 and spent(sites[1], PEER_ANALYST) == 0


def test_federate_test_shows_what_each_site_learned(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from proxy.cli.main import main as veil_main

    result = CliRunner().invoke(
        veil_main,
        ["federate", "test", "--cells", "4", "--key-bits", "1024", "--directory", str(tmp_path), "--json"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    cells = report["cells"]
    assert len(cells) == 4 and (tmp_path / "site_a" / "veil.toml").exists()
    for cell in cells:
        released = cell["exact_a"] + cell["exact_b"] >= 3 * THRESHOLD
        assert (cell["answer"] is not None) == released
        assert cell["site_b_learned"] == (
            f"reached k = {THRESHOLD}" if released else f"below k = {THRESHOLD}, nothing more"
        )
