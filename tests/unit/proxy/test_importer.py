"""``veil import``: a file in, a table and its policy out, or a refusal that leaves both unchanged."""

from __future__ import annotations

import datetime
import gzip
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import duckdb
import pytest

from proxy.cli.importer import import_table, parse_bounds_option, parse_public_option, plan_import
from proxy.config import ColumnType, TablePolicy, load_config, read_document, write_document
from proxy.errors import ConfigError

PATIENTS_CSV = """\
patient_id;Age;sex;income;smoker;seen_at
1;34;female;42000.5;true;2024-03-01 09:15:00
1;34;female;42000.5;true;2024-04-11 10:00:00
2;71;male;18000;false;2025-01-20 16:45:00
3;5;female;0;false;2024-12-31 23:59:00
"""


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "veil.toml"
    write_document(path, {"datasets": {"clinic": {"backend": "duckdb", "path": "clinic.duckdb"}}})
    return path


@pytest.fixture
def csv_source(tmp_path: Path) -> Path:
    path = tmp_path / "patients.csv"
    path.write_text(PATIENTS_CSV, encoding="utf-8")
    return path


@pytest.fixture
def parquet_source(tmp_path: Path, csv_source: Path) -> Path:
    path = tmp_path / "patients.parquet"
    with duckdb.connect() as connection:
        connection.execute(
            "COPY (SELECT * FROM read_csv($1, auto_detect = true)) TO '" + str(path) + "' (FORMAT parquet)",
            [str(csv_source)],
        )
    return path


def rows(config_path: Path, sql: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(config_path.parent / "clinic.duckdb"), read_only=True) as connection:
        return connection.execute(sql).fetchall()


def import_patients(
    config_path: Path,
    source: Path,
    *,
    privacy_unit: str = "patient_id",
    max_contributions: int | None = 2,
    public: Mapping[str, Sequence[str]] = MappingProxyType({}),
    bounds: Mapping[str, tuple[float, float]] = MappingProxyType({}),
) -> TablePolicy:
    return import_table(
        config_path,
        dataset="clinic",
        table="patients",
        source=source,
        privacy_unit=privacy_unit,
        max_contributions=max_contributions,
        public=public,
        bounds=bounds,
    )


def test_imports_semicolon_csv_with_detected_types(config_path: Path, csv_source: Path) -> None:
    policy = import_patients(config_path, csv_source)
    types = {name: column.type for name, column in policy.columns.items()}
    assert types == {
        "patient_id": ColumnType.INTEGER,
        "age": ColumnType.INTEGER,
        "sex": ColumnType.TEXT,
        "income": ColumnType.REAL,
        "smoker": ColumnType.BOOLEAN,
        "seen_at": ColumnType.TIMESTAMP,
    }
    assert rows(config_path, "SELECT count(*), sum(age), sum(income) FROM patients") == [(4, 144, 102001.0)]


def test_stores_columns_in_canonical_types_under_lowercase_names(config_path: Path, csv_source: Path) -> None:
    import_patients(config_path, csv_source)
    described = rows(
        config_path, "SELECT column_name, data_type FROM information_schema.columns ORDER BY ordinal_position"
    )
    assert described == [
        ("patient_id", "BIGINT"),
        ("age", "BIGINT"),
        ("sex", "VARCHAR"),
        ("income", "DOUBLE"),
        ("smoker", "BOOLEAN"),
        ("seen_at", "TIMESTAMP"),
    ]


def test_timestamps_stay_timestamps(config_path: Path, csv_source: Path) -> None:
    import_patients(config_path, csv_source)
    assert rows(config_path, "SELECT max(seen_at) FROM patients") == [
        (datetime.datetime(2025, 1, 20, 16, 45),)
    ]


def test_timestamps_with_a_time_zone_are_stored_in_utc(config_path: Path, tmp_path: Path) -> None:
    source = tmp_path / "zoned.csv"
    source.write_text("pid,seen\n1,2024-03-01 09:15:00+02\n2,2024-03-01 07:15:00+00\n", encoding="utf-8")
    policy = import_table(config_path, dataset="clinic", table="zoned", source=source, privacy_unit="row")
    assert policy.columns["seen"].type is ColumnType.TIMESTAMP
    assert rows(config_path, "SELECT DISTINCT seen FROM zoned") == [(datetime.datetime(2024, 3, 1, 7, 15),)]


def test_a_date_column_stays_a_date(config_path: Path, tmp_path: Path) -> None:
    source = tmp_path / "days.csv"
    source.write_text("pid,day\n1,2024-03-01\n2,2024-03-02\n", encoding="utf-8")
    first, last = datetime.date(2024, 1, 1), datetime.date(2025, 12, 31)
    policy = import_table(
        config_path,
        dataset="clinic",
        table="days",
        source=source,
        privacy_unit="row",
        bounds={"day": (first, last)},
    )
    assert policy.columns["day"].type is ColumnType.DATE
    assert (policy.columns["day"].lower, policy.columns["day"].upper) == (first, last)


def test_imports_parquet(config_path: Path, parquet_source: Path) -> None:
    policy = import_patients(config_path, parquet_source)
    assert policy.columns["seen_at"].type is ColumnType.TIMESTAMP
    assert rows(config_path, "SELECT count(DISTINCT patient_id) FROM patients") == [(3,)]


def test_declares_the_table_in_the_policy_file(config_path: Path, csv_source: Path) -> None:
    import_patients(config_path, csv_source, public={"sex": ["female", "male"]}, bounds={"age": (0, 100)})
    table = load_config(config_path).dataset("clinic").table("patients")  # type: ignore[union-attr]
    assert table is not None
    assert (table.privacy_unit, table.max_contributions) == ("patient_id", 2)
    assert read_document(config_path)["datasets"]["clinic"]["tables"]["patients"]["columns"] == {
        "patient_id": {"type": "integer"},
        "age": {"type": "integer", "lower": 0, "upper": 100},
        "sex": {"type": "text", "public": True, "values": ["female", "male"]},
        "income": {"type": "real"},
        "smoker": {"type": "boolean"},
        "seen_at": {"type": "timestamp"},
    }


def test_public_values_take_the_column_type(config_path: Path, csv_source: Path) -> None:
    policy = import_patients(
        config_path,
        csv_source,
        public={"Age": ["5", "34", "71"], "smoker": ["true", "False"], "seen_at": ["2024-03-01"]},
    )
    columns = policy.columns
    assert columns["age"].values == (5, 34, 71)
    assert columns["smoker"].values == (True, False)
    assert columns["seen_at"].values == (datetime.datetime(2024, 3, 1),)


def test_real_bounds_are_kept_as_numbers(config_path: Path, csv_source: Path) -> None:
    policy = import_patients(config_path, csv_source, bounds={"income": (0.0, 250_000.5)})
    income = policy.columns["income"]
    assert (income.lower, income.upper, income.public) == (0.0, 250_000.5, False)


def test_row_privacy_unit_needs_no_max_contributions(config_path: Path, csv_source: Path) -> None:
    policy = import_table(
        config_path, dataset="clinic", table="patients", source=csv_source, privacy_unit="row"
    )
    assert (policy.privacy_unit, policy.max_contributions) == (None, 1)
    assert read_document(config_path)["datasets"]["clinic"]["tables"]["patients"]["privacy_unit"] == "row"


def test_row_privacy_unit_refuses_more_than_one_contribution(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape('must be 1 (or absent) when the privacy unit is "row"')):
        import_patients(config_path, csv_source, privacy_unit="row", max_contributions=3)


def test_column_privacy_unit_requires_max_contributions(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(ConfigError, match="--max-contributions is required") as raised:
        import_patients(config_path, csv_source, max_contributions=None)
    assert raised.value.hint is not None
    assert "--max-contributions N" in raised.value.hint


def test_rejects_nonpositive_max_contributions(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(ConfigError, match="must be a positive integer"):
        import_patients(config_path, csv_source, max_contributions=0)


def test_rejects_unknown_privacy_unit_listing_columns(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(
        ConfigError, match=re.escape('--privacy-unit: column "person" is not in patients.csv')
    ) as raised:
        import_patients(config_path, csv_source, privacy_unit="person")
    assert raised.value.detail == "its columns are: patient_id, age, sex, income, smoker, seen_at"


def test_rejects_unknown_public_column_listing_columns(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(
        ConfigError, match=re.escape('--public: column "gender" is not in patients.csv')
    ) as raised:
        import_patients(config_path, csv_source, public={"gender": ["f"]})
    assert raised.value.detail is not None
    assert "sex" in raised.value.detail


def test_rejects_unknown_bounds_column(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape('--bounds: column "salary" is not in patients.csv')):
        import_patients(config_path, csv_source, bounds={"salary": (0, 1)})


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        pytest.param((100, 0), "upper must be greater than lower", id="reversed"),
        pytest.param((5, 5), "upper must be greater than lower", id="empty"),
        pytest.param((0, float("inf")), "must be finite numbers", id="infinite"),
    ],
)
def test_rejects_bad_bounds(
    config_path: Path, csv_source: Path, bounds: tuple[float, float], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        import_patients(config_path, csv_source, bounds={"age": bounds})


def test_a_timestamp_column_takes_whole_days_as_bounds(config_path: Path, csv_source: Path) -> None:
    """--bounds seen_at=2024-01-01:2025-12-31: from the first day's midnight to the last day's last second."""
    first, last = datetime.date(2024, 1, 1), datetime.date(2025, 12, 31)
    policy = import_patients(config_path, csv_source, bounds={"seen_at": (first, last)})
    assert (policy.columns["seen_at"].lower, policy.columns["seen_at"].upper) == (
        datetime.datetime(2024, 1, 1),
        datetime.datetime(2025, 12, 31, 23, 59, 59),
    )


@pytest.mark.parametrize(
    ("column", "bounds", "message"),
    [
        pytest.param(
            "seen_at", (0.0, 1.0), 'column "seen_at" is a timestamp; its bounds are dates', id="numbers"
        ),
        pytest.param(
            "seen_at",
            (datetime.date(2025, 1, 1), datetime.date(2024, 1, 1)),
            "upper must be greater than lower",
            id="reversed",
        ),
        pytest.param(
            "age",
            (datetime.date(2024, 1, 1), datetime.date(2025, 1, 1)),
            'column "age" is integer; its bounds are numbers',
            id="dates-on-a-number",
        ),
    ],
)
def test_rejects_bad_date_bounds(
    config_path: Path, csv_source: Path, column: str, bounds: tuple[object, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        import_patients(config_path, csv_source, bounds={column: bounds})  # type: ignore[dict-item]


def test_rejects_bounds_on_text_column(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(ConfigError, match="bounds apply only to integer, real, date and timestamp columns"):
        import_patients(config_path, csv_source, bounds={"sex": (0, 1)})


def test_rejects_public_value_not_of_column_type(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(ConfigError, match="value 'old' is not a valid integer for column \"age\""):
        import_patients(config_path, csv_source, public={"age": ["old"]})


def test_rejects_duplicate_public_values(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(ConfigError, match="lists a value twice"):
        import_patients(config_path, csv_source, public={"age": ["5", "05"]})


def test_rejects_public_privacy_unit(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be public"):
        import_patients(config_path, csv_source, public={"patient_id": ["1"]})


def test_refusal_leaves_database_and_policy_untouched(config_path: Path, csv_source: Path) -> None:
    before = config_path.read_bytes()
    with pytest.raises(ConfigError):
        import_patients(config_path, csv_source, bounds={"salary": (0, 1)})
    assert config_path.read_bytes() == before
    assert not (config_path.parent / "clinic.duckdb").exists()


def test_refuses_table_already_declared(config_path: Path, csv_source: Path) -> None:
    import_patients(config_path, csv_source)
    with pytest.raises(ConfigError, match='table "patients" is already declared in dataset "clinic"'):
        import_patients(config_path, csv_source)


def test_refuses_table_already_in_the_database(config_path: Path, csv_source: Path) -> None:
    with duckdb.connect(str(config_path.parent / "clinic.duckdb")) as connection:
        connection.execute("CREATE TABLE Patients (x INTEGER)")
    with pytest.raises(ConfigError, match='table "patients" already exists in') as raised:
        import_patients(config_path, csv_source)
    assert raised.value.hint == "choose another table name, or drop the table first"


def test_refuses_table_name_that_is_not_an_identifier(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(ConfigError, match='"patients; DROP TABLE x" is not a valid table name'):
        import_table(
            config_path,
            dataset="clinic",
            table="patients; DROP TABLE x",
            source=csv_source,
            privacy_unit="row",
        )


def test_refuses_column_name_that_is_not_an_identifier(config_path: Path, tmp_path: Path) -> None:
    source = tmp_path / "odd.csv"
    source.write_text('id,"first name"\n1,ann\n', encoding="utf-8")
    with pytest.raises(ConfigError, match='column "first name" is not a valid column name'):
        import_table(config_path, dataset="clinic", table="odd", source=source, privacy_unit="row")


def test_refuses_unknown_dataset(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(ConfigError, match='dataset "shop" is not declared') as raised:
        import_table(config_path, dataset="shop", table="t", source=csv_source, privacy_unit="row")
    assert raised.value.detail == "declared datasets: clinic"


def test_refuses_unknown_file_extension(config_path: Path, tmp_path: Path) -> None:
    source = tmp_path / "patients.xlsx"
    source.write_bytes(b"")
    with pytest.raises(ConfigError, match="cannot tell the file format") as raised:
        import_table(config_path, dataset="clinic", table="t", source=source, privacy_unit="row")
    assert raised.value.hint is not None
    assert ".parquet" in raised.value.hint


def test_refuses_missing_file(config_path: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        import_table(
            config_path, dataset="clinic", table="t", source=tmp_path / "nope.csv", privacy_unit="row"
        )


def test_reports_unreadable_parquet(config_path: Path, tmp_path: Path) -> None:
    source = tmp_path / "broken.parquet"
    source.write_text("not parquet", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot be read as Parquet"):
        import_table(config_path, dataset="clinic", table="t", source=source, privacy_unit="row")


def test_drops_the_table_when_the_policy_cannot_be_written(
    config_path: Path, csv_source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("proxy.config.tempfile.mkstemp", disk_full)
    with pytest.raises(ConfigError, match="cannot write the policy file"):
        import_patients(config_path, csv_source)
    assert rows(config_path, "SELECT count(*) FROM information_schema.tables") == [(0,)]
    assert "patients" not in (load_config(config_path).dataset("clinic").tables)  # type: ignore[union-attr]


@pytest.fixture
def database_held_by_another_process(config_path: Path) -> Iterator[None]:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); sys.stdin.read()",
            str(config_path.parent / "clinic.duckdb"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "ready"
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()


@pytest.mark.usefixtures("database_held_by_another_process")
def test_reports_database_in_use_by_another_process(config_path: Path, csv_source: Path) -> None:
    with pytest.raises(
        ConfigError, match=re.escape("is in use by another process (is `veil serve` running?)")
    ) as raised:
        import_patients(config_path, csv_source)
    assert raised.value.hint == "stop the server, import, then start it again"


def test_parses_public_option() -> None:
    assert parse_public_option("sex = female, male") == ("sex", ["female", "male"])


@pytest.mark.parametrize("text", ["sex", "=a,b", "sex=a,,b", "sex="])
def test_rejects_malformed_public_option(text: str) -> None:
    with pytest.raises(ConfigError, match="expected COLUMN=VALUE1,VALUE2"):
        parse_public_option(text)


def test_parses_bounds_option() -> None:
    assert parse_bounds_option("age=0:100") == ("age", (0.0, 100.0))
    assert parse_bounds_option("delta=-1.5:2.5e3") == ("delta", (-1.5, 2500.0))
    assert parse_bounds_option("day=2024-01-01:2025-12-31") == (
        "day",
        (datetime.date(2024, 1, 1), datetime.date(2025, 12, 31)),
    )


@pytest.mark.parametrize("text", ["age", "age=0-100", "age=:100", "=0:1", "age=a:b", "day=2024-01-01:5"])
def test_rejects_malformed_bounds_option(text: str) -> None:
    with pytest.raises(ConfigError, match="expected COLUMN=LOWER:UPPER"):
        parse_bounds_option(text)


def test_imports_gzipped_csv(config_path: Path, tmp_path: Path) -> None:
    source = tmp_path / "patients.csv.gz"
    source.write_bytes(gzip.compress(PATIENTS_CSV.encode()))
    policy = import_patients(config_path, source)
    assert policy.columns["income"].type is ColumnType.REAL
    assert rows(config_path, "SELECT count(*) FROM patients") == [(4,)]


def postgres_config(tmp_path: Path, **dataset: str) -> Path:
    path = tmp_path / "pg.toml"
    write_document(path, {"datasets": {"clinic": {"backend": "postgres", **dataset}}})
    return path


def test_postgres_dataset_needs_the_variable_its_dsn_env_names(tmp_path: Path, csv_source: Path) -> None:
    path = postgres_config(tmp_path, dsn_env="CLINIC_DSN")
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=r"datasets\.clinic\.dsn_env: the environment variable CLINIC_DSN"):
        import_table(path, dataset="clinic", table="t", source=csv_source, privacy_unit="row", environ={})
    assert path.read_bytes() == before


def test_postgres_dataset_unreachable_names_the_server_without_password(
    tmp_path: Path, csv_source: Path
) -> None:
    path = postgres_config(tmp_path, dsn_env="CLINIC_DSN")
    before = path.read_bytes()
    dsn = f"host={tmp_path} port=5999 dbname=clinic user=veil password=hunter2 connect_timeout=2"
    with pytest.raises(ConfigError, match="cannot connect to PostgreSQL at") as raised:
        import_table(
            path,
            dataset="clinic",
            table="t",
            source=csv_source,
            privacy_unit="row",
            environ={"CLINIC_DSN": dsn},
        )
    assert f"host={tmp_path} port=5999 dbname=clinic user=veil" in raised.value.message
    assert "No such file or directory" in raised.value.message  # libpq's reason
    assert "hunter2" not in raised.value.message + str(raised.value.detail)
    assert path.read_bytes() == before


# --- types and widths ---------------------------------------------------------------------------------------


def parquet_file(path: Path, select: str) -> Path:
    """A Parquet file of the rows and the declared types of a DuckDB SELECT."""
    with duckdb.connect() as connection:
        connection.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    return path


TYPED = (
    "SELECT 7::INTEGER AS i, 7::SMALLINT AS s, 7::TINYINT AS t, 7::BIGINT AS b, 7::UINTEGER AS u,"
    " 1.5::FLOAT AS f, 1.5::DOUBLE AS d, 1234.56::DECIMAL(10, 2) AS money"
)


def planned_storage(config_path: Path, source: Path) -> dict[str, str]:
    plan = plan_import(config_path, dataset="clinic", table="t", source=source, privacy_unit="row")
    return {column.name: column.storage.name for column in plan.columns}


def test_a_duckdb_dataset_stores_declared_types_canonically(config_path: Path, tmp_path: Path) -> None:
    """DuckDB computes integer arithmetic in the column's type: VAR's SUM(x * x) would overflow a SMALLINT."""
    source = parquet_file(tmp_path / "typed.parquet", TYPED)
    import_table(config_path, dataset="clinic", table="typed", source=source, privacy_unit="row")
    described = rows(
        config_path, "SELECT data_type FROM information_schema.columns ORDER BY ordinal_position"
    )
    assert [t for (t,) in described] == ["BIGINT"] * 5 + ["DOUBLE"] * 3
    assert rows(config_path, "SELECT money FROM typed") == [(1234.56,)]


def test_a_postgres_dataset_keeps_a_parquet_files_declared_types(tmp_path: Path) -> None:
    source = parquet_file(tmp_path / "typed.parquet", TYPED)
    assert planned_storage(postgres_config(tmp_path, dsn_env="CLINIC_DSN"), source) == {
        "i": "integer",
        "s": "smallint",
        "t": "smallint",
        "b": "bigint",
        "u": "bigint",
        "f": "real",
        "d": "double precision",
        "money": "numeric(10,2)",
    }


@pytest.mark.parametrize(
    ("values", "width"),
    [
        pytest.param("-32768,32767", "smallint", id="smallint"),
        pytest.param("-32769,0", "integer", id="below smallint"),
        pytest.param("0,2147483647", "integer", id="integer"),
        pytest.param("0,2147483648", "bigint", id="above integer"),
    ],
)
def test_a_postgres_dataset_gets_the_narrowest_integer_holding_a_csv_column(
    tmp_path: Path, values: str, width: str
) -> None:
    source = tmp_path / "widths.csv"
    source.write_text("n\n" + values.replace(",", "\n") + "\n", encoding="utf-8")
    assert planned_storage(postgres_config(tmp_path, dsn_env="CLINIC_DSN"), source) == {"n": width}


@pytest.mark.parametrize("backend", ["duckdb", "postgres"])
def test_refuses_integers_beyond_64_bits(config_path: Path, tmp_path: Path, backend: str) -> None:
    source = parquet_file(tmp_path / "huge.parquet", "SELECT 9223372036854775808::UBIGINT AS n")
    path = config_path if backend == "duckdb" else postgres_config(tmp_path, dsn_env="CLINIC_DSN")
    with pytest.raises(ConfigError, match='column "n" holds integers beyond the 64-bit range'):
        plan_import(path, dataset="clinic", table="t", source=source, privacy_unit="row")


def test_wide_integer_types_within_64_bits_are_imported(config_path: Path, tmp_path: Path) -> None:
    source = parquet_file(tmp_path / "wide.parquet", "SELECT 5::HUGEINT AS h, 6::UBIGINT AS u")
    import_table(config_path, dataset="clinic", table="wide", source=source, privacy_unit="row")
    assert rows(config_path, "SELECT h, u FROM wide") == [(5, 6)]


# --- public lookup tables -------------------------------------------------------------------------------------

ZONES_CSV = (
    "code,zone,opened\nnorth,N,2020-01-01 08:00:00\nsouth,S,2020-01-01 09:00:00\neast,E,2021-06-01 10:00:00\n"
)


@pytest.fixture
def zones_source(tmp_path: Path) -> Path:
    path = tmp_path / "zones.csv"
    path.write_text(ZONES_CSV, encoding="utf-8")
    return path


def import_zones(config_path: Path, source: Path, **options: Any) -> TablePolicy:
    return import_table(
        config_path, dataset="clinic", table="zones", source=source, public_table=True, **options
    )


def test_imports_a_public_lookup_table_with_its_key(config_path: Path, zones_source: Path) -> None:
    policy = import_zones(config_path, zones_source, key="CODE")
    assert (policy.public, policy.key, policy.privacy_unit) == (True, "code", None)
    assert read_document(config_path)["datasets"]["clinic"]["tables"]["zones"] == {
        "public": True,
        "key": "code",
        "columns": {"code": {"type": "text"}, "zone": {"type": "text"}, "opened": {"type": "timestamp"}},
    }
    assert rows(config_path, "SELECT code, zone FROM zones ORDER BY code") == [
        ("east", "E"),
        ("north", "N"),
        ("south", "S"),
    ]


def test_a_public_table_without_a_key_is_readable_not_joinable(config_path: Path, zones_source: Path) -> None:
    policy = import_zones(config_path, zones_source)
    assert (policy.public, policy.key) == (True, None)


def test_refuses_a_key_that_repeats_a_value(config_path: Path, zones_source: Path) -> None:
    zones_source.write_text(ZONES_CSV + "north,N2,2022-01-01 00:00:00\n", encoding="utf-8")
    before = config_path.read_bytes()
    with pytest.raises(
        ConfigError, match=re.escape('--key: column "code" is not unique in zones.csv')
    ) as raised:
        import_zones(config_path, zones_source, key="code")
    assert raised.value.detail == "repeated values: north (2 rows)"
    assert config_path.read_bytes() == before
    assert not (config_path.parent / "clinic.duckdb").exists()


def test_a_key_must_be_unique_as_stored(config_path: Path, zones_source: Path) -> None:
    """Two timestamps with a time zone that are one instant are one UTC timestamp once imported: a join
    would meet both rows."""
    zones_source.write_text(
        "code,opened\nnorth,2020-01-01 08:00:00+01\nsouth,2020-01-01 07:00:00+00\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match='column "opened" is not unique') as raised:
        import_zones(config_path, zones_source, key="opened")
    assert raised.value.detail == "repeated values: 2020-01-01 07:00:00 (2 rows)"


def test_refuses_a_key_that_is_not_a_column(config_path: Path, zones_source: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape('--key: column "id" is not in zones.csv')) as raised:
        import_zones(config_path, zones_source, key="id")
    assert raised.value.detail == "its columns are: code, zone, opened"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"public_table": True, "privacy_unit": "row"}, "--public-table takes no --privacy-unit", id="unit"
        ),
        pytest.param(
            {"public_table": True, "max_contributions": 2},
            "--public-table takes no --max-contributions",
            id="L",
        ),
        pytest.param(
            {"public_table": True, "public": {"zone": ["N"]}},
            "every column of a public table is public",
            id="public",
        ),
        pytest.param(
            {"privacy_unit": "row", "key": "code"}, "--key is only used with --public-table", id="key"
        ),
        pytest.param({}, "--privacy-unit is required", id="neither"),
    ],
)
def test_refuses_options_that_do_not_go_together(
    config_path: Path, zones_source: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        import_table(config_path, dataset="clinic", table="zones", source=zones_source, **options)


# --- dry run ----------------------------------------------------------------------------------------------------


def test_a_plan_changes_nothing(config_path: Path, csv_source: Path) -> None:
    before = config_path.read_bytes()
    plan = plan_import(
        config_path,
        dataset="clinic",
        table="patients",
        source=csv_source,
        privacy_unit="patient_id",
        max_contributions=2,
        public={"sex": ["female", "male"]},
    )
    assert config_path.read_bytes() == before
    assert not (config_path.parent / "clinic.duckdb").exists()
    assert plan.rows == 4
    assert [(c.name, c.source_type, c.type.value, c.storage.name) for c in plan.columns][:3] == [
        ("patient_id", "BIGINT", "integer", "BIGINT"),
        ("age", "BIGINT", "integer", "BIGINT"),
        ("sex", "VARCHAR", "text", "VARCHAR"),
    ]


def test_a_plan_shows_the_section_the_import_writes(config_path: Path, csv_source: Path) -> None:
    options: dict[str, Any] = {
        "privacy_unit": "patient_id",
        "max_contributions": 2,
        "bounds": {"age": (0, 100)},
    }
    plan = plan_import(config_path, dataset="clinic", table="patients", source=csv_source, **options)
    import_table(config_path, dataset="clinic", table="patients", source=csv_source, **options)
    assert config_path.read_text(encoding="utf-8").endswith(plan.section())


def test_a_plan_for_a_postgres_dataset_needs_no_server_nor_its_dsn(tmp_path: Path, csv_source: Path) -> None:
    path = postgres_config(tmp_path, dsn_env="CLINIC_DSN")
    plan = plan_import(path, dataset="clinic", table="patients", source=csv_source, privacy_unit="row")
    assert plan.dsn is None
    assert plan.columns[1].storage.name == "smallint"  # ages 5 to 71


def test_a_parquet_directory_becomes_a_spark_table_read_where_it_is(
    tmp_path: Path, parquet_source: Path
) -> None:
    """A Spark dataset stores nothing: the policy gets the table and, in sources, the directory's path
    (relative to the policy file); the files are read by DuckDB only to learn the columns."""
    directory = tmp_path / "lake" / "patients"
    directory.mkdir(parents=True)
    with duckdb.connect() as connection:
        for part, condition in (("a", "patient_id < 2"), ("b", "patient_id >= 2")):
            target = directory / f"part-{part}.parquet"
            connection.execute(
                f"COPY (SELECT * FROM '{parquet_source}' WHERE {condition}) TO '{target}' (FORMAT parquet)"
            )
    config_path = tmp_path / "veil.toml"
    write_document(config_path, {"datasets": {"lake": {"backend": "spark"}}})
    table = import_table(
        config_path, dataset="lake", table="patients", source=directory, privacy_unit="patient_id",
        max_contributions=2, bounds={"age": (0.0, 120.0)},
    )  # fmt: skip
    assert table.column("age") is not None and table.column("age").type is ColumnType.INTEGER
    dataset = load_config(config_path).dataset("lake")
    assert dataset is not None and set(dataset.tables) == {"patients"}
    assert dataset.sources["patients"].location == str(directory.resolve())
    assert dataset.sources["patients"].format == "parquet"
    assert 'patients = "lake/patients"' in config_path.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "lake",
        "patients.csv",
        "patients.parquet",
        "veil.toml",
    ]


def test_a_directory_without_parquet_files_is_refused(tmp_path: Path) -> None:
    config_path = tmp_path / "veil.toml"
    write_document(config_path, {"datasets": {"lake": {"backend": "spark"}}})
    (tmp_path / "empty").mkdir()
    before = config_path.read_text()
    with pytest.raises(ConfigError, match=r"holds no \.parquet file"):
        import_table(config_path, dataset="lake", table="t", source=tmp_path / "empty", privacy_unit="row")
    assert config_path.read_text() == before
