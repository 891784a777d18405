"""``veil import`` into a postgres dataset: DuckDB reads the file, COPY fills the table, one transaction."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from proxy.cli.importer import import_table
from proxy.config import ColumnType, load_config, write_document
from proxy.errors import ConfigError
from tests.postgres.conftest import in_schema

pytestmark = pytest.mark.postgres

PATIENTS_CSV = "\n".join(
    [
        "patient_id;Age;sex;income;smoker;seen_at;note",
        '1;34;female;42000.5;true;2024-03-01 09:15:00;"tab\there, ""quoted"""',
        "1;34;female;42000.5;true;2024-04-11 10:00:00;",
        "2;71;male;18000;false;2025-01-20 16:45:00;ünïcode",
        '3;5;female;0;false;2024-12-31 23:59:00;"multi\nline"',
        "",
    ]
)


@pytest.fixture
def config_path(tmp_path: Path, fresh_schema: str) -> Path:
    path = tmp_path / "veil.toml"
    dataset = {"backend": "postgres", "dsn_env": "CLINIC_DSN", "schema": fresh_schema}
    write_document(path, {"datasets": {"clinic": dataset}})
    return path


@pytest.fixture
def csv_source(tmp_path: Path) -> Path:
    path = tmp_path / "patients.csv"
    path.write_text(PATIENTS_CSV, encoding="utf-8")
    return path


def import_patients(config_path: Path, source: Path, dsn: str, **options: Any) -> Any:
    return import_table(
        config_path,
        dataset="clinic",
        table="patients",
        source=source,
        privacy_unit="patient_id",
        max_contributions=2,
        public={"sex": ["female", "male"]},
        bounds={"age": (0, 100)},
        environ={"CLINIC_DSN": dsn},
        **options,
    )


def test_copies_rows_in_canonical_postgres_types(
    config_path: Path, csv_source: Path, postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any]
) -> None:
    policy = import_patients(config_path, csv_source, postgres_dsn)
    assert policy.column("sex").values == ("female", "male")
    types = pg.execute(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = 'patients' ORDER BY ordinal_position",
        (fresh_schema,),
    ).fetchall()
    assert types == [
        ("patient_id", "bigint"),
        ("age", "bigint"),
        ("sex", "text"),
        ("income", "double precision"),
        ("smoker", "boolean"),
        ("seen_at", "date"),
        ("note", "text"),
    ]
    rows = in_schema(pg, fresh_schema, "SELECT * FROM patients ORDER BY seen_at").fetchall()
    assert rows[0] == (1, 34, "female", 42000.5, True, datetime.date(2024, 3, 1), 'tab\there, "quoted"')
    assert [row[6] for row in rows] == ['tab\there, "quoted"', None, "multi\nline", "ünïcode"]


def test_declares_the_table_in_the_policy(config_path: Path, csv_source: Path, postgres_dsn: str) -> None:
    import_patients(config_path, csv_source, postgres_dsn)
    table = load_config(config_path).dataset("clinic").table("patients")  # type: ignore[union-attr]
    assert table is not None
    assert (table.privacy_unit, table.max_contributions) == ("patient_id", 2)
    assert table.column("seen_at").type is ColumnType.DATE  # type: ignore[union-attr]


def test_refuses_a_table_that_exists_in_the_schema(
    config_path: Path, csv_source: Path, postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any]
) -> None:
    in_schema(pg, fresh_schema, "CREATE TABLE patients (x int)")
    before = config_path.read_bytes()
    with pytest.raises(ConfigError, match=f'table "patients" already exists in schema "{fresh_schema}"'):
        import_patients(config_path, csv_source, postgres_dsn)
    assert config_path.read_bytes() == before


def test_refuses_a_missing_schema(tmp_path: Path, csv_source: Path, postgres_dsn: str) -> None:
    path = tmp_path / "veil.toml"
    write_document(
        path,
        {"datasets": {"clinic": {"backend": "postgres", "dsn_env": "CLINIC_DSN", "schema": "veil_nope"}}},
    )
    with pytest.raises(ConfigError, match='schema "veil_nope" does not exist'):
        import_patients(path, csv_source, postgres_dsn)


def test_rolls_the_table_back_when_the_policy_cannot_be_written(
    config_path: Path,
    csv_source: Path,
    postgres_dsn: str,
    fresh_schema: str,
    pg: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("proxy.config.tempfile.mkstemp", disk_full)
    with pytest.raises(ConfigError, match="cannot write the policy file"):
        import_patients(config_path, csv_source, postgres_dsn)
    exists = pg.execute("SELECT to_regclass(%s)", (f"{fresh_schema}.patients",)).fetchone()
    assert exists == (None,)


def test_a_bad_row_leaves_no_table(
    config_path: Path, tmp_path: Path, postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any]
) -> None:
    source = tmp_path / "bad.csv"
    # the sniffer decides from the first rows that age is an integer; a later row says otherwise
    source.write_text("patient_id,age\n" + "".join(f"{i},{i}\n" for i in range(30_000)) + "9,old\n")
    with pytest.raises(ConfigError, match="cannot be read as CSV"):
        import_table(
            config_path,
            dataset="clinic",
            table="patients",
            source=source,
            privacy_unit="row",
            environ={"CLINIC_DSN": postgres_dsn},
        )
    assert pg.execute("SELECT to_regclass(%s)", (f"{fresh_schema}.patients",)).fetchone() == (None,)
