"""``veil materialize diversity`` and ``veil reconstruct`` end to end (docs/anonymize.md): CSV and Parquet
files, a DuckDB dataset (the policy's public values as domains, db:TABLE with its metadata table), and
``veil_reconstruct`` over the wire, which spends nothing and refuses private tables."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import psycopg
import pytest
from click.testing import CliRunner

from proxy.cli.main import main as veil_main
from tests.conftest import DATASET, Admin, build_demo, running_server

ROWS = 3000


def veil(*arguments: object, expect: int = 0) -> str:
    result = CliRunner().invoke(veil_main, [str(a) for a in arguments])
    assert result.exit_code == expect, result.output
    return result.output


@pytest.fixture
def people(tmp_path: Path) -> Path:
    rng = np.random.default_rng(5)
    path = tmp_path / "people.csv"
    pd.DataFrame(
        {
            "age": rng.integers(18, 90, ROWS),
            "job": rng.choice(
                ["clerk", "nurse", "cook", "pilot", "judge"], ROWS, p=[0.4, 0.3, 0.15, 0.1, 0.05]
            ),
            "sex": rng.choice(["F", "M"], ROWS),
        }
    ).to_csv(path, index=False)
    return path


DOMAINS = [
    "--bins",
    "age=18,30,45,60,90",
    "--domain",
    "job=clerk,nurse,cook,pilot,judge",
    "--domain",
    "sex=F,M",
]


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_files_hold_sets_of_l_values_and_metadata_that_reconstructs(people: Path, suffix: str) -> None:
    out = people.with_name(f"released.{suffix}")
    report = json.loads(
        veil(
            "materialize",
            "diversity",
            "--input",
            people,
            "--attributes",
            "age,job,sex",
            *DOMAINS,
            "--l",
            "age=3,job=3",
            "--t",
            "sex=0.2",
            "--out",
            out,
            "--seed",
            1,
            "--json",
        )
    )
    by_name = {a["attribute"]: a for a in report["attributes"]}
    assert (by_name["age"]["p"], by_name["age"]["eta"], by_name["job"]["eta"]) == (1.0, 3, 3)
    assert by_name["sex"]["t"] == 0.2 and by_name["sex"]["achieved_emd"] <= 0.2
    released = duckdb.sql(f"SELECT * FROM '{out}'").df()
    sets = released["job"].map(json.loads) if suffix == "csv" else released["job"].map(list)
    assert len(released) == ROWS and sets.map(len).eq(3).all() and sets.map(lambda s: len(set(s))).eq(3).all()
    metadata = Path(report["metadata_file"])
    truth = pd.read_csv(people)["job"].value_counts()
    estimate = json.loads(veil("reconstruct", out, "--metadata", metadata, "--attributes", "job", "--json"))
    counts = {cell["job"]: cell["count"] for cell in estimate["cells"]}
    assert sum(counts.values()) == pytest.approx(ROWS)
    assert max(abs(counts[job] - truth[job]) for job in truth.index) < 0.1 * ROWS  # EM recovers the marginal


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--attributes", "job", "--l", "3"], "no public domain for job"),
        (
            ["--attributes", "job", "--domain", "job=clerk,nurse", "--l", "3"],
            "has 2 values, fewer than l = 3",
        ),
        (
            ["--attributes", "job", "--domain", "job=clerk,nurse,cook,pilot", "--l", "2"],
            "outside the public domain of job",
        ),
        (["--attributes", "job", "--domain", "job=a,b,c", "--l", "age=2"], "not in --attributes"),
        (["--attributes", "age", "--bins", "age=20,40,60", "--l", "2"], "outside the bins"),
        (["--attributes", "job", "--domain", "job=clerk,nurse,cook,pilot,judge"], "give --l, --t or both"),
    ],
)
def test_refusals_say_what_to_do(people: Path, arguments: list[str], message: str) -> None:
    output = veil(
        "materialize",
        "diversity",
        "--input",
        people,
        *arguments,
        "--out",
        people.with_name("x.csv"),
        expect=1,
    )
    assert message in output and "Traceback" not in output
    assert not people.with_name("x.csv").exists()


def test_a_database_release_is_reconstructed_over_the_wire_for_free(tmp_path: Path) -> None:
    demo = build_demo(tmp_path / "demo", people=2000)
    config = ["--config", demo.config]
    veil(
        "materialize",
        "diversity",
        *config,
        "--dataset",
        DATASET,
        "--table",
        "patients",
        "--attributes",
        "sex,region",
        "--l",
        "2",
        "--out",
        "db:patients_l2",
        "--metadata",
        tmp_path / "m.json",
    )  # fmt: skip  (the domains are the policy's public values)
    metadata = json.loads((tmp_path / "m.json").read_text())
    assert [a["domain_source"] for a in metadata["attributes"]] == ["policy", "policy"]
    admin = Admin(demo.config)
    analyst = admin.add_analyst(1.0, prefix="recon")
    with (
        running_server(demo.config, tmp_path / "serve.log") as server,
        psycopg.connect(server.conninfo(analyst), autocommit=True) as connection,
    ):
        cursor = connection.execute("SELECT * FROM veil_reconstruct('patients_l2', 'sex', 'region')")
        rows = cursor.fetchall()
        names = [column.name for column in cursor.description or []]
        with pytest.raises(psycopg.Error) as private:
            connection.execute("SELECT * FROM veil_reconstruct('patients', 'sex')")
        with pytest.raises(psycopg.Error) as missing:
            connection.execute("SELECT * FROM veil_reconstruct('nothing_here', 'sex')")
    assert names == ["sex", "region", "count"]
    assert sum(row[2] for row in rows) == pytest.approx(2000) and len(rows) == len(
        {(r[0], r[1]) for r in rows}
    )
    assert (private.value.sqlstate, missing.value.sqlstate) == ("42501", "42P01")
    assert admin.balance(analyst)["spent_epsilon"] == 0
