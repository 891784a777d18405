"""``veil import`` into a postgres dataset: DuckDB reads the file, COPY fills the table, one transaction;
the columns keep the width the source declares (or, from a CSV file, the narrowest that holds them), and
Veil answers queries on them."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.postgres import PostgresBackend
from proxy.cli.importer import import_table
from proxy.config import ColumnType, load_config, write_document
from proxy.errors import ConfigError
from proxy.query.service import Principal, QueryService
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.postgres.conftest import in_schema
from tests.service_fixture import serving

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


def column_types(pg: psycopg.Connection[Any], schema: str, table: str) -> list[tuple[str, str]]:
    """What psql's \\d shows: each column's type as PostgreSQL formats it."""
    return pg.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute"
        " WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        (f"{schema}.{table}",),
    ).fetchall()


def test_copies_rows_with_the_narrowest_integers_that_hold_them(
    config_path: Path, csv_source: Path, postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any]
) -> None:
    policy = import_patients(config_path, csv_source, postgres_dsn)
    assert policy.column("sex").values == ("female", "male")
    assert column_types(pg, fresh_schema, "patients") == [
        ("patient_id", "smallint"),
        ("age", "smallint"),
        ("sex", "text"),
        ("income", "double precision"),
        ("smoker", "boolean"),
        ("seen_at", "timestamp without time zone"),
        ("note", "text"),
    ]
    rows = in_schema(pg, fresh_schema, "SELECT * FROM patients ORDER BY seen_at").fetchall()
    assert rows[0] == (
        1,
        34,
        "female",
        42000.5,
        True,
        datetime.datetime(2024, 3, 1, 9, 15),
        'tab\there, "quoted"',
    )
    assert [row[6] for row in rows] == ['tab\there, "quoted"', None, "multi\nline", "ünïcode"]


def test_declares_the_table_in_the_policy(config_path: Path, csv_source: Path, postgres_dsn: str) -> None:
    import_patients(config_path, csv_source, postgres_dsn)
    table = load_config(config_path).dataset("clinic").table("patients")  # type: ignore[union-attr]
    assert table is not None
    assert (table.privacy_unit, table.max_contributions) == ("patient_id", 2)
    assert table.column("seen_at").type is ColumnType.TIMESTAMP  # type: ignore[union-attr]


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


def parquet_file(path: Path, select: str) -> Path:
    """A Parquet file of the rows and the declared types of a DuckDB SELECT."""
    with duckdb.connect() as connection:
        connection.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    return path


def test_csv_integers_get_the_narrowest_type_that_holds_every_value(
    config_path: Path, tmp_path: Path, postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any]
) -> None:
    source = tmp_path / "widths.csv"
    source.write_text("s,i,b,empty\n-32768,-32769,2147483648,\n32767,5,1,\n")
    import_table(
        config_path,
        dataset="clinic",
        table="widths",
        source=source,
        privacy_unit="row",
        environ={"CLINIC_DSN": postgres_dsn},
    )
    assert column_types(pg, fresh_schema, "widths") == [
        ("s", "smallint"),
        ("i", "integer"),
        ("b", "bigint"),
        ("empty", "text"),  # no value at all: DuckDB's sniffer calls it text
    ]
    rows = in_schema(pg, fresh_schema, "SELECT s, i, b FROM widths ORDER BY s").fetchall()
    assert rows == [(-32768, -32769, 2147483648), (32767, 5, 1)]


def test_parquet_columns_keep_their_declared_types(
    config_path: Path, tmp_path: Path, postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any]
) -> None:
    source = parquet_file(
        tmp_path / "typed.parquet",
        "SELECT 7::INTEGER AS i, 7::SMALLINT AS s, 7::TINYINT AS t, 7::BIGINT AS b, 7::UINTEGER AS u,"
        " 1.5::FLOAT AS f, 1.5::DOUBLE AS d, 1234.56::DECIMAL(10, 2) AS money",
    )
    policy = import_table(
        config_path,
        dataset="clinic",
        table="typed",
        source=source,
        privacy_unit="row",
        bounds={"money": (0, 10_000)},
        environ={"CLINIC_DSN": postgres_dsn},
    )
    assert [column.type for column in policy.columns.values()] == [ColumnType.INTEGER] * 5 + [
        ColumnType.REAL
    ] * 3
    assert column_types(pg, fresh_schema, "typed") == [
        ("i", "integer"),
        ("s", "smallint"),
        ("t", "smallint"),
        ("b", "bigint"),
        ("u", "bigint"),
        ("f", "real"),
        ("d", "double precision"),
        ("money", "numeric(10,2)"),
    ]
    row = in_schema(pg, fresh_schema, "SELECT * FROM typed").fetchone()
    assert row == (7, 7, 7, 7, 7, 1.5, 1.5, decimal.Decimal("1234.56"))


def test_imports_a_public_lookup_table_with_its_key(
    config_path: Path, tmp_path: Path, postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any]
) -> None:
    source = tmp_path / "zones.csv"
    source.write_text("code,zone\nnorth,N\nsouth,S\n")
    policy = import_table(
        config_path,
        dataset="clinic",
        table="zones",
        source=source,
        public_table=True,
        key="code",
        environ={"CLINIC_DSN": postgres_dsn},
    )
    assert (policy.public, policy.key, policy.privacy_unit) == (True, "code", None)
    assert in_schema(pg, fresh_schema, "SELECT * FROM zones ORDER BY code").fetchall() == [
        ("north", "N"),
        ("south", "S"),
    ]


@pytest.fixture
def imported_service(config_path: Path, tmp_path: Path, postgres_dsn: str) -> Iterator[QueryService]:
    """Veil's pipeline on a postgres dataset filled by ``veil import``: narrow integers (ages up to 300,
    whose squares a smallint cannot hold), an exact numeric, and a public lookup table."""
    environ = {"CLINIC_DSN": postgres_dsn}
    visits = parquet_file(
        tmp_path / "visits.parquet",
        "SELECT i // 2 AS patient_id, (i % 301)::SMALLINT AS age, (i % 7 + 0.25)::DECIMAL(8, 2) AS cost,"
        " CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END AS region FROM range(4000) t(i)",
    )
    import_table(
        config_path, dataset="clinic", table="visits", source=visits, privacy_unit="patient_id",
        max_contributions=2, public={"region": ["north", "south"]}, bounds={"age": (0, 300), "cost": (0, 10)},
        environ=environ,
    )  # fmt: skip
    zones = tmp_path / "zones.csv"
    zones.write_text("code,zone\nnorth,N\nsouth,S\neast,E\n")
    import_table(
        config_path, dataset="clinic", table="zones", source=zones, public_table=True, key="code",
        environ=environ,
    )  # fmt: skip
    dataset = load_config(config_path).dataset("clinic")
    assert dataset is not None
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "clinic", PrivacyLoss(10.0, 1e-5))
    backend = PostgresBackend(
        dataset.resolve_dsn(environ),
        schema=dataset.schema,
        pool_size=dataset.pool_size,
        statement_timeout_ms=dataset.statement_timeout_ms,
    )
    with serving(dataset, backend, ledger, seed=7) as service:
        yield service


def answer(service: QueryService, sql: str) -> list[tuple[Any, ...]]:
    (tree,) = service.parse(sql)
    settings = SessionSettings()
    settings.set("veil.epsilon", "1")
    outcome = service.run(tree, principal=Principal("alice"), settings=settings)
    assert outcome.table is not None
    return list(outcome.table.rows)


def test_veil_answers_aggregates_over_narrow_and_exact_columns(imported_service: QueryService) -> None:
    ((variance, deviation, total, mean),) = answer(
        imported_service, "SELECT VAR_POP(age), STDDEV_SAMP(cost), SUM(cost), AVG(age) FROM visits"
    )
    # true values: VAR_POP(age) ≈ 7550, STDDEV(cost) = 2, SUM(cost) = 13,000, AVG(age) ≈ 150
    assert 0 < variance < 30_000
    assert 0 <= deviation < 10
    assert abs(float(total) - 13_000) < 1_000
    assert 50 < mean < 250


def test_veil_joins_an_imported_lookup_table_on_its_key(imported_service: QueryService) -> None:
    rows = answer(
        imported_service,
        "SELECT z.zone, COUNT(*) FROM visits v JOIN zones z ON v.region = z.code GROUP BY z.zone ORDER BY z.zone",
    )
    assert [zone for zone, _ in rows] == ["E", "N", "S"]  # every value of the lookup table, even unused
    assert all(
        abs(count - expected) < 200 for (_, count), expected in zip(rows, (0, 2000, 2000), strict=True)
    )
    assert answer(imported_service, "SELECT code, zone FROM zones ORDER BY code") == [
        ("east", "E"),
        ("north", "N"),
        ("south", "S"),
    ]
