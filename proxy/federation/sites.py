"""Two generated Veil sites that share a federation, for ``veil federate test`` and the end-to-end tests.

Each site is a directory with a DuckDB file (``patients``: one row per patient, with a region from a public
domain), a policy declaring the dataset and the federation, and an SQLite ledger with an analyst. Site A
asks (``peer``), site B answers (``listen``) and pays from its ``peer_analyst`` account. Half the regions are
small at both sites, so that their joint counts stay below k and are suppressed; the other half are large.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import tomli_w

from budget.loss import PrivacyLoss
from proxy.config import load_config
from proxy.ledger_access import open_ledger
from proxy.wire.scram import make_scram_verifier

DATASET = "clinic"
FEDERATION = "hospitals"
REGIONS = ("north", "south", "east", "west", "centre", "coast", "islands", "hills", "lakes", "valley")
ANALYST, ANALYST_PASSWORD = "alice", "alice-federation"
PEER_ANALYST = "peer_site_a"
SECRET_ENV = "VEIL_FEDERATION_SECRET"
GRANT = 10.0


@dataclass(frozen=True)
class Site:
    name: str
    directory: Path
    counts: dict[str, int]  # the exact patients per region (known to the site, and to this test harness)

    @property
    def config(self) -> Path:
        return self.directory / "veil.toml"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build_sites(
    directory: Path,
    *,
    cells: int = 8,
    threshold: int = 20,
    key_bits: int = 1024,
    epsilon: float = 1.0,
    seed: int = 7,
) -> tuple[Site, Site]:
    """Sites A (asks) and B (answers) under ``directory``; the federation's peer port is chosen free now."""
    rng = np.random.default_rng(seed)
    regions = REGIONS[:cells]
    port = free_port()
    sites = []
    for name in ("a", "b"):
        small = rng.integers(0, max(1, threshold // 4), size=len(regions))
        large = rng.integers(3 * threshold, 10 * threshold, size=len(regions))
        counts = {region: int(small[i] if i % 2 else large[i]) for i, region in enumerate(regions)}
        federation = {"dataset": DATASET, "table": "patients", "group_by": ["region"], "threshold": threshold,
                      "secret_env": SECRET_ENV, "key_bits": key_bits}  # fmt: skip
        if name == "a":
            federation["peer"] = f"127.0.0.1:{port}"
        else:
            federation.update(listen=f"127.0.0.1:{port}", peer_analyst=PEER_ANALYST, epsilon=epsilon)
        sites.append(_site(directory / f"site_{name}", name, counts, regions, federation, epsilon))
    return sites[0], sites[1]


def _site(
    directory: Path,
    name: str,
    counts: dict[str, int],
    regions: tuple[str, ...],
    federation: dict[str, object],
    epsilon: float,
) -> Site:
    directory.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(
        {"region": [region for region, count in counts.items() for _ in range(count)]}
    ).reset_index(names="patient_id")
    with duckdb.connect(str(directory / "clinic.duckdb")) as connection:
        connection.register("frame", frame)
        connection.execute("CREATE OR REPLACE TABLE patients AS SELECT * FROM frame")
    table = {
        "privacy_unit": "patient_id",
        "max_contributions": 1,
        "columns": {
            "patient_id": {"type": "integer"},
            "region": {"type": "text", "public": True, "values": list(regions)},
        },
    }
    dataset = {"backend": "duckdb", "path": "clinic.duckdb", "default_epsilon": epsilon, "max_epsilon": 10.0,
               "answer_cache": False, "tables": {"patients": table}}  # fmt: skip
    document = {
        "ledger": {"path": "ledger.sqlite"},
        "server": {"port": 0},
        "datasets": {DATASET: dataset},
        "federations": {FEDERATION: federation},
    }
    config = directory / "veil.toml"
    config.write_text(tomli_w.dumps(document))
    ledger = open_ledger(load_config(config), {}, create=True)
    account = ANALYST if name == "a" else PEER_ANALYST
    ledger.add_analyst(account, make_scram_verifier(ANALYST_PASSWORD))
    ledger.grant(account, DATASET, PrivacyLoss(GRANT))
    return Site(name, directory, counts)
