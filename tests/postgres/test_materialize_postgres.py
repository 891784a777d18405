"""``veil materialize`` and ``veil risk`` on a PostgreSQL dataset: the original is read in place, the
released table goes back into the dataset's schema (or to a file)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import psycopg
import pytest
import tomli_w
from click.testing import CliRunner
from psycopg import sql

from proxy.cli.main import main as veil_main
from tests.conftest import DATASET, Admin, running_server, schema_in
from tests.integration.test_materialize_cli import QIS, ROWS, people

pytestmark = pytest.mark.postgres


@pytest.fixture
def dataset(postgres_dsn: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The generated ``people`` table in a fresh schema, and a policy whose dataset ``d`` points at it."""
    frame = people()
    with schema_in(postgres_dsn) as schema, psycopg.connect(postgres_dsn, autocommit=True) as connection:
        table = sql.Identifier(schema, "people")
        connection.execute(
            sql.SQL(
                "CREATE TABLE {} (id int, age int, sex text, zip text, disease text, income text)"
            ).format(table)
        )
        with connection.cursor() as cursor:
            insert = sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s, %s)").format(table)
            cursor.executemany(insert, [tuple(row) for row in frame.itertuples(index=False)])
        config = tmp_path / "veil.toml"
        policy = {"datasets": {"d": {"backend": "postgres", "dsn": postgres_dsn, "schema": schema}}}
        config.write_text(tomli_w.dumps(policy))
        yield {"config": config, "schema": schema, "connection": connection, "dir": tmp_path}


def veil(*arguments: object) -> str:
    result = CliRunner().invoke(veil_main, [str(a) for a in arguments])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_kanon_writes_a_released_table_into_the_schema_and_risk_scores_it(dataset: dict[str, Any]) -> None:
    source = ["--config", dataset["config"], "--dataset", "d", "--table", "people"]
    report = json.loads(
        veil(
            "materialize",
            "kanon",
            *source,
            "--qi",
            ",".join(QIS),
            "--k",
            5,
            "--sensitive",
            "disease",
            "--hierarchy",
            "age=interval:5,10,20,40",
            "--out",
            "db:released",
            "--json",
        )
    )
    query = sql.SQL("SELECT * FROM {}").format(sql.Identifier(dataset["schema"], "released"))
    cursor = dataset["connection"].execute(query)
    released = pd.DataFrame(cursor.fetchall(), columns=[c.name for c in cursor.description])
    assert len(released) == report["rows_out"] and released.groupby(QIS).size().min() >= 5
    scored = json.loads(
        veil(
            "risk",
            *source,
            "--released",
            "db:released",
            "--qi",
            ",".join(QIS),
            "--link",
            "id",
            "--hierarchy",
            "age=interval:5,10,20,40",
            "--json",
        )
    )
    assert scored["simulated_attack"]["n_q"] == report["risk"]["simulated_attack"]["n_q"] >= 5


def test_mondrian_and_combine_read_postgres_and_write_files(dataset: dict[str, Any]) -> None:
    source = ["--config", dataset["config"], "--dataset", "d", "--table", "people"]
    mondrian = dataset["dir"] / "m.csv"
    veil(
        "materialize", "kanon", *source, "--algorithm", "mondrian", "--qi", "age", "--k", 7, "--out", mondrian
    )
    assert pd.read_csv(mondrian).groupby("age").size().min() >= 7
    combined = dataset["dir"] / "c.csv"
    veil("materialize", "combine", *source, "--qi", "age,sex", "--step", "age=laplace:epsilon=1,lower=18,upper=79",
         "--seed", 5, "--out", combined)  # fmt: skip
    released = pd.read_csv(combined)
    assert len(released) == ROWS and released["age"].between(18, 79).all()


def test_max_risk_search_writes_into_the_schema_or_nothing(dataset: dict[str, Any]) -> None:
    source = ["--config", dataset["config"], "--dataset", "d", "--table", "people"]
    search = ["materialize", "kanon", *source, "--qi", ",".join(QIS), "--hierarchy", "age=interval:5,10,20,40",
              "--suppression-limit", 0.02, "--json"]  # fmt: skip
    report = json.loads(veil(*search, "--max-risk", 0.1, "--out", "db:searched"))
    chosen = next(c for c in report["search"]["candidates"] if c["chosen"])
    query = sql.SQL("SELECT * FROM {}").format(sql.Identifier(dataset["schema"], "searched"))
    cursor = dataset["connection"].execute(query)
    released = pd.DataFrame(cursor.fetchall(), columns=[c.name for c in cursor.description])
    assert 1 / released.groupby(QIS).size().min() == chosen["risk"] <= 0.1
    assert len(released) == report["rows_out"] >= ROWS * 0.98
    refused = CliRunner().invoke(
        veil_main, [str(a) for a in [*search, "--max-risk", 0.0001, "--out", "db:nothing"]]
    )
    assert refused.exit_code == 1 and "no release meets --max-risk 0.0001" in refused.output
    exists = dataset["connection"].execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s AND table_name LIKE 'nothing%%'",
        (dataset["schema"],),
    )
    assert exists.fetchone() == (0,)


def test_mondrian_on_engine_codes_releases_what_the_dataframe_path_releases(dataset: dict[str, Any]) -> None:
    """A Parquet file goes through the engine-code path (mondrian_source/write_release), the PostgreSQL
    table through the DataFrame path: the same rows must give the same report and the same release."""
    parquet = dataset["dir"] / "people.parquet"
    duckdb.from_df(people()).write_parquet(str(parquet))
    common = ["materialize", "kanon", "--algorithm", "mondrian", "--qi", ",".join(QIS), "--sensitive",
              "disease", "--l", 2, "--k", 6, "--recoding", "range", "--json"]  # fmt: skip
    postgres = ["--config", dataset["config"], "--dataset", "d", "--table", "people"]
    on_codes = json.loads(veil(*common, "--input", parquet, "--out", dataset["dir"] / "codes.csv"))
    on_frame = json.loads(veil(*common, *postgres, "--out", dataset["dir"] / "frame.csv"))
    for section in ("transformation", "risk", "utility"):
        assert on_codes[section] == on_frame[section], section
    assert on_codes["transformation"]["achieved"]["distinct_l"] >= 2
    released = [
        pd.read_csv(dataset["dir"] / name, dtype=str).sort_values("id").reset_index(drop=True)
        for name in ("codes.csv", "frame.csv")
    ]
    pd.testing.assert_frame_equal(released[0], released[1])
    assert released[0].groupby(QIS).size().min() >= 6


def test_a_diversity_release_in_postgresql_is_reconstructed_by_cli_and_over_the_wire(
    dataset: dict[str, Any], postgres_dsn: str
) -> None:
    source = ["--config", dataset["config"], "--dataset", "d", "--table", "people"]
    veil("materialize", "diversity", *source, "--attributes", "sex,disease", "--domain", "sex=F,M",
         "--domain", "disease=asthma,diabetes,flu,none", "--l", "2", "--out", "db:people_l2",
         "--metadata", dataset["dir"] / "m.json")  # fmt: skip
    query = sql.SQL("SELECT pg_typeof(disease)::text, cardinality(disease) FROM {} LIMIT 1").format(
        sql.Identifier(dataset["schema"], "people_l2")
    )
    assert dataset["connection"].execute(query).fetchone() == ("text[]", 2)
    estimate = json.loads(
        veil(
            "reconstruct",
            "db:people_l2",
            "--config",
            dataset["config"],
            "--dataset",
            "d",
            "--metadata",
            dataset["dir"] / "m.json",
            "--attributes",
            "disease",
            "--json",
        )
    )
    assert sum(cell["count"] for cell in estimate["cells"]) == pytest.approx(ROWS)
    served = dataset["dir"] / "served.toml"
    document = {
        "ledger": {"path": "ledger.sqlite"},
        "datasets": {DATASET: {"backend": "postgres", "dsn": postgres_dsn, "schema": dataset["schema"]}},
    }
    served.write_text(tomli_w.dumps(document))
    analyst = Admin(served).add_analyst(1.0, prefix="pgrecon")
    with (
        running_server(served, dataset["dir"] / "serve.log") as server,
        psycopg.connect(server.conninfo(analyst), autocommit=True) as connection,
    ):
        rows = connection.execute("SELECT * FROM veil_reconstruct('people_l2', 'sex', 'disease')").fetchall()
    assert len(rows) == 8 and sum(row[2] for row in rows) == pytest.approx(ROWS)
