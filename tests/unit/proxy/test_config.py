"""The policy file: one valid document, and a table of invalid ones with the key path each error names."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from proxy.config import (
    ColumnType,
    LedgerSettings,
    load_config,
    parse_config,
    read_document,
    write_document,
)
from proxy.errors import ConfigError

Document = dict[str, Any]


def valid_document() -> Document:
    return {
        "ledger": {"path": "ledger.sqlite"},
        "server": {"host": "127.0.0.1", "port": 5433},
        "datasets": {
            "demo": {
                "backend": "duckdb",
                "path": "demo.duckdb",
                "default_epsilon": 0.1,
                "max_epsilon": 1.0,
                "tables": {
                    "visits": {
                        "privacy_unit": "patient_id",
                        "max_contributions": 10,
                        "columns": {
                            "patient_id": {"type": "integer"},
                            "age": {"type": "integer", "lower": 0, "upper": 100},
                            "cost": {"type": "real", "lower": 0, "upper": 5000.5},
                            "visit_date": {"type": "date"},
                            "sex": {"type": "text", "public": True, "values": ["female", "male"]},
                        },
                    },
                    "people": {"privacy_unit": "row", "columns": {"smoker": {"type": "boolean"}}},
                },
            }
        },
    }


def parse(document: Document, directory: Path) -> Any:
    return parse_config(tomli_w.dumps(document), path=directory / "veil.toml")


def _visits(document: Document) -> Document:
    table: Document = document["datasets"]["demo"]["tables"]["visits"]
    return table


def _columns(document: Document) -> Document:
    columns: Document = _visits(document)["columns"]
    return columns


def _set(path: str, value: Any) -> Callable[[Document], None]:
    """A mutation that sets the dotted key ``path`` (relative to the document root) to ``value``."""

    def mutate(document: Document) -> None:
        *parents, last = path.split(".")
        node = document
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return mutate


def _auto_with(**keys: Any) -> Callable[[Document], None]:
    """visits with max_contributions = "auto" and the given keys."""

    def mutate(document: Document) -> None:
        _visits(document).update(max_contributions="auto", **keys)

    return mutate


def _spark(keys: dict[str, Any]) -> Callable[[Document], None]:
    """The demo dataset on Spark: no DuckDB path; ``keys`` added (sources of its tables, by default)."""

    def mutate(document: Document) -> None:
        dataset = document["datasets"]["demo"]
        dataset["backend"] = "spark"
        del dataset["path"]
        dataset.update(keys)

    return mutate


def _delete(path: str) -> Callable[[Document], None]:
    def mutate(document: Document) -> None:
        *parents, last = path.split(".")
        node = document
        for key in parents:
            node = node[key]
        del node[last]

    return mutate


def _rename_column(old: str, new: str) -> Callable[[Document], None]:
    def mutate(document: Document) -> None:
        _columns(document)[new] = _columns(document).pop(old)

    return mutate


VISITS = "datasets.demo.tables.visits"
AGE = f"{VISITS}.columns.age"
SEX = f"{VISITS}.columns.sex"

INVALID_DOCUMENTS: list[tuple[str, Callable[[Document], None], str]] = [
    ("bounds reversed", _set(f"{AGE}.upper", 0), f"{AGE}.upper: upper must be greater than lower"),
    ("bounds equal", _set(f"{AGE}.lower", 100), f"{AGE}.upper: upper must be greater than lower"),
    ("only a lower bound", _delete(f"{AGE}.upper"), f"{AGE}.upper: give both lower and upper, or neither"),
    ("only an upper bound", _delete(f"{AGE}.lower"), f"{AGE}.lower: give both lower and upper, or neither"),
    ("infinite bound", _set(f"{AGE}.upper", float("inf")), f"{AGE}.lower: bounds must be finite numbers"),
    ("bound is text", _set(f"{AGE}.upper", "100"), f"{AGE}.upper: must be an integer or a number, got '100'"),
    ("one bound on text", _set(f"{SEX}.lower", 0), f"{SEX}.upper: give both lower and upper"),
    (
        "both bounds on text",
        lambda d: _columns(d)["sex"].update(lower=0, upper=1),
        f"{SEX}.lower: bounds are only allowed on integer, real, date and timestamp columns",
    ),
    (
        "number bounds on a date",
        lambda d: _columns(d)["visit_date"].update(lower=0, upper=1),
        f"{VISITS}.columns.visit_date.lower: must be a date such as 2024-01-01, got 0",
    ),
    (
        "date bounds with a time",
        lambda d: _columns(d)["visit_date"].update(
            lower=datetime.datetime(2024, 1, 1, 12), upper=datetime.date(2025, 1, 1)
        ),
        f"{VISITS}.columns.visit_date.lower: a date column's bounds are dates without a time",
    ),
    (
        "date bounds reversed",
        lambda d: _columns(d)["visit_date"].update(
            lower=datetime.date(2025, 1, 1), upper=datetime.date(2024, 1, 1)
        ),
        f"{VISITS}.columns.visit_date.upper: upper must be greater than lower",
    ),
    (
        "date bounds on a number",
        lambda d: _columns(d)["age"].update(lower=datetime.date(2024, 1, 1)),
        f"{AGE}.lower: must be an integer or a number, got datetime.date(2024, 1, 1)",
    ),
    ("unknown type", _set(f"{AGE}.type", "interval"), f"{AGE}.type: must be one of integer, real, text"),
    (
        "a number as a timestamp bound",
        _set(f"{AGE}.type", "timestamp"),
        f"{AGE}.lower: must be a timestamp such as 2024-01-01T00:00:00, got 0",
    ),
    ("missing type", _delete(f"{AGE}.type"), f"{AGE}.type: is required"),
    (
        "public without values",
        _delete(f"{SEX}.values"),
        f"{SEX}.values: a public column must list its public values",
    ),
    ("public with empty values", _set(f"{SEX}.values", []), f"{SEX}.values: a public column must list"),
    (
        "values on a private column",
        _set(f"{SEX}.public", False),
        f"{SEX}.values: values are only used on public columns",
    ),
    (
        "public is not boolean",
        _set(f"{SEX}.public", "yes"),
        f"{SEX}.public: must be true or false, got 'yes'",
    ),
    ("values is not a list", _set(f"{SEX}.values", "female"), f"{SEX}.values: must be a list, got 'female'"),
    ("unknown column key", _set(f"{AGE}.colour", "red"), f"{AGE}.colour: unknown key; allowed keys are"),
    ("column is not a table", _set(f"{AGE}", 3), f"{AGE}: must be a table ([section])"),
    ("no columns", _set(f"{VISITS}.columns", {}), f"{VISITS}.columns: declare at least one column"),
    ("missing privacy unit", _delete(f"{VISITS}.privacy_unit"), f"{VISITS}.privacy_unit: is required"),
    (
        "undeclared privacy unit",
        _set(f"{VISITS}.privacy_unit", "person"),
        f'{VISITS}.privacy_unit: names no declared column; declare columns.person or use "row"',
    ),
    (
        "public privacy unit",
        _set(f"{VISITS}.privacy_unit", "sex"),
        f"{VISITS}.privacy_unit: the privacy unit column cannot be public",
    ),
    (
        "missing max_contributions",
        _delete(f"{VISITS}.max_contributions"),
        f"{VISITS}.max_contributions: is required",
    ),
    (
        "zero max_contributions",
        _set(f"{VISITS}.max_contributions", 0),
        f"{VISITS}.max_contributions: must be a positive integer",
    ),
    (
        "fractional max_contributions",
        _set(f"{VISITS}.max_contributions", 2.5),
        f'{VISITS}.max_contributions: must be a positive integer (rows kept per privacy unit) or "auto"',
    ),
    (
        "row unit with max_contributions",
        _set("datasets.demo.tables.people.max_contributions", 3),
        'datasets.demo.tables.people.max_contributions: must be 1 (or absent) when privacy_unit = "row"',
    ),
    (
        "hint with a fixed bound",
        _set(f"{VISITS}.contribution_hint", 5),
        f'{VISITS}.contribution_hint: is only used with max_contributions = "auto"',
    ),
    (
        "hint above the cap",
        _auto_with(contribution_cap=50, contribution_hint=51),
        f"{VISITS}.contribution_hint: must be an integer between 1 and contribution_cap (50)",
    ),
    (
        "fractional hint",
        _auto_with(contribution_hint=2.5),
        f"{VISITS}.contribution_hint: must be an integer, got 2.5",
    ),
    (
        "remember_bounds not boolean",
        _set("datasets.demo.remember_bounds", "no"),
        "datasets.demo.remember_bounds: must be true or false, got 'no'",
    ),
    ("unknown table key", _set(f"{VISITS}.owner", "x"), f"{VISITS}.owner: unknown key"),
    (
        "other backend",
        _set("datasets.demo.backend", "mysql"),
        'datasets.demo.backend: must be "duckdb", "postgres" or "spark"',
    ),
    (
        "spark without sources",
        _spark({}),
        "datasets.demo.sources: table people has no source; a local Spark session reads every table from files",
    ),
    (
        "spark with a path",
        _spark({"path": "demo.duckdb"}),
        'datasets.demo.path: is not used with backend = "spark"',
    ),
    (
        "spark master and remote",
        _spark({"spark_master": "local[*]", "spark_remote": "sc://h:15002"}),
        "datasets.demo.spark_remote: give spark_master (a session in this process) or spark_remote, not both",
    ),
    (
        "bad spark master",
        _spark({"spark_master": "localhost"}),
        'datasets.demo.spark_master: must be a Spark master URL such as "local[*]"',
    ),
    (
        "bad spark remote",
        _spark({"spark_remote": "http://h:15002"}),
        'datasets.demo.spark_remote: must be a Spark Connect URL such as "sc://host:15002"',
    ),
    (
        "bad source format",
        _spark({"sources": {"people": {"path": "p.txt", "format": "orc"}}}),
        'datasets.demo.sources.people.format: must be "parquet" or "csv"',
    ),
    (
        "spark master on a duckdb dataset",
        _set("datasets.demo.spark_master", "local[*]"),
        'datasets.demo.spark_master: is only used with backend = "spark"',
    ),
    (
        "dsn on a duckdb dataset",
        _set("datasets.demo.dsn", "dbname=test"),
        'datasets.demo.dsn: is only used with backend = "postgres"',
    ),
    (
        "schema on a duckdb dataset",
        _set("datasets.demo.schema", "public"),
        'datasets.demo.schema: is only used with backend = "postgres"',
    ),
    ("missing dataset path", _delete("datasets.demo.path"), "datasets.demo.path: is required"),
    (
        "default above max epsilon",
        _set("datasets.demo.default_epsilon", 2.0),
        "datasets.demo.default_epsilon: must not exceed max_epsilon",
    ),
    (
        "negative epsilon",
        _set("datasets.demo.max_epsilon", -1.0),
        "datasets.demo.max_epsilon: must be a finite number greater than 0",
    ),
    (
        "nan epsilon",
        _set("datasets.demo.max_epsilon", float("nan")),
        "datasets.demo.max_epsilon: must be a finite",
    ),
    (
        "boolean epsilon",
        _set("datasets.demo.max_epsilon", True),
        "datasets.demo.max_epsilon: must be an integer or a number, not a boolean",
    ),
    ("unknown dataset key", _set("datasets.demo.owner", "x"), "datasets.demo.owner: unknown key"),
    ("port out of range", _set("server.port", 70000), "server.port: must be between 0 and 65535"),
    ("unknown server key", _set("server.colour", "red"), "server.colour: unknown key"),
    ("unknown ledger key", _set("ledger.colour", "red"), "ledger.colour: unknown key"),
    (
        "ledger path and dsn",
        _set("ledger.dsn", "dbname=veil"),
        "ledger.dsn: give one of path (an SQLite file on this host) and dsn or dsn_env",
    ),
    (
        "ledger dsn and dsn_env",
        lambda d: d.update(ledger={"dsn": "dbname=veil", "dsn_env": "LEDGER_DSN"}),
        "ledger.dsn_env: give one of path",
    ),
    (
        "ledger schema with a path",
        _set("ledger.schema", "veil"),
        "ledger.schema: is only used with a PostgreSQL",
    ),
    ("empty ledger path", _set("ledger.path", " "), "ledger.path: must not be empty"),
    (
        "ledger path is a dsn",
        _set("ledger.path", "postgresql://db/veil"),
        "ledger.path: looks like a connection",
    ),
    (
        "ledger dsn without a database",
        lambda d: d.update(ledger={"dsn": "host=db user=veil"}),
        "ledger.dsn: must name the ledger's database",
    ),
    (
        "ledger dsn with a password",
        lambda d: d.update(ledger={"dsn": "postgresql://veil:hunter2@db/veil"}),
        "ledger.dsn: must not contain a password",
    ),
    (
        "ledger dsn_env not a variable",
        lambda d: d.update(ledger={"dsn_env": "LEDGER-DSN"}),
        "ledger.dsn_env: must be the name of an environment variable",
    ),
    (
        "ledger schema not a name",
        lambda d: d.update(ledger={"dsn_env": "LEDGER_DSN", "schema": "veil ledger"}),
        "ledger.schema: must be a schema name",
    ),
    (
        "unknown accountant",
        _set("datasets.demo.accountant", "renyi"),
        'datasets.demo.accountant: must be one of "basic", "advanced", "zcdp"',
    ),
    (
        "answer_cache not boolean",
        _set("datasets.demo.answer_cache", "yes"),
        "datasets.demo.answer_cache: must be true or false, got 'yes'",
    ),
    ("ledger is not a table", _set("ledger", "ledger.sqlite"), "ledger: must be a table ([section])"),
    (
        "unknown top-level key",
        _set("colour", "red"),
        "colour: unknown key; allowed keys are datasets, federations, ledger, server",
    ),
    (
        "column name not an identifier",
        _rename_column("age", "age-years"),
        "age-years: column names must be SQL identifiers",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [pytest.param(mutate, message, id=name) for name, mutate, message in INVALID_DOCUMENTS],
)
def test_rejects_invalid_document_naming_the_key_path(
    tmp_path: Path, mutate: Callable[[Document], None], message: str
) -> None:
    document = copy.deepcopy(valid_document())
    mutate(document)
    with pytest.raises(ConfigError) as raised:
        parse(document, tmp_path)
    assert message in raised.value.message
    assert raised.value.message.startswith(f"{tmp_path / 'veil.toml'}: ")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(
            _rename_column("age", "age-years"),
            f"{VISITS}.columns.age-years: column names must be SQL identifiers",
            id="column",
        ),
        pytest.param(
            lambda d: d["datasets"]["demo"]["tables"].update(
                {"2024": d["datasets"]["demo"]["tables"].pop("visits")}
            ),
            "datasets.demo.tables.2024: table names must be SQL identifiers",
            id="table",
        ),
        pytest.param(
            lambda d: d["datasets"].update({"my-data": d["datasets"].pop("demo")}),
            "datasets.my-data: dataset names must be SQL identifiers",
            id="dataset",
        ),
    ],
)
def test_identifier_errors_name_the_full_key_path(
    tmp_path: Path, mutate: Callable[[Document], None], message: str
) -> None:
    document = copy.deepcopy(valid_document())
    mutate(document)
    with pytest.raises(ConfigError) as raised:
        parse(document, tmp_path)
    assert message in raised.value.message


def test_rejects_public_values_of_the_wrong_type(tmp_path: Path) -> None:
    document = valid_document()
    _columns(document)["age"] = {"type": "integer", "public": True, "values": ["young", "old"]}
    with pytest.raises(ConfigError, match=f"{AGE}.values"):
        parse(document, tmp_path)


def test_rejects_text_that_is_not_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        parse_config("[datasets\n", path=tmp_path / "veil.toml")


def test_parses_valid_document(tmp_path: Path) -> None:
    config = parse(valid_document(), tmp_path)
    assert config.ledger == LedgerSettings(path=tmp_path / "ledger.sqlite")
    assert (config.server.host, config.server.port) == ("127.0.0.1", 5433)
    demo = config.dataset("demo")
    assert demo is not None
    assert (demo.backend, demo.path) == ("duckdb", tmp_path / "demo.duckdb")
    assert (demo.default_epsilon, demo.max_epsilon) == (0.1, 1.0)
    visits = demo.table("VISITS")
    assert visits is not None
    assert (visits.privacy_unit, visits.max_contributions) == ("patient_id", 10)
    age = visits.column("age")
    assert age is not None
    assert (age.type, age.lower, age.upper, age.public) == (ColumnType.INTEGER, 0, 100, False)
    sex = visits.column("sex")
    assert sex is not None
    assert (sex.public, sex.values) == (True, ("female", "male"))


def test_a_date_column_takes_dates_as_bounds(tmp_path: Path) -> None:
    document = valid_document()
    _columns(document)["visit_date"].update(
        lower=datetime.date(2024, 1, 1), upper=datetime.date(2025, 12, 31)
    )
    visits = parse(document, tmp_path).dataset("demo").table("visits")
    column = visits.column("visit_date")
    assert (column.type, column.lower, column.upper) == (
        ColumnType.DATE,
        datetime.date(2024, 1, 1),
        datetime.date(2025, 12, 31),
    )


def test_row_privacy_unit_means_one_row_per_person(tmp_path: Path) -> None:
    demo = parse(valid_document(), tmp_path).dataset("demo")
    people = demo.table("people")
    assert (people.privacy_unit, people.max_contributions) == (None, 1)


def test_defaults_apply_to_a_minimal_document(tmp_path: Path) -> None:
    config = parse({"datasets": {"d": {"path": "d.duckdb"}}}, tmp_path)
    assert config.ledger == LedgerSettings(path=tmp_path / "ledger.sqlite")
    assert not config.ledger.shared
    assert (config.server.host, config.server.port) == ("127.0.0.1", 5433)
    dataset = config.dataset("d")
    assert (dataset.backend, dataset.default_epsilon, dataset.max_epsilon) == ("duckdb", 0.1, 1.0)
    assert (dataset.accountant, dataset.answer_cache) == ("basic", True)
    assert dict(dataset.tables) == {}


def test_names_are_case_insensitive(tmp_path: Path) -> None:
    document = valid_document()
    _columns(document)["Cost"] = _columns(document).pop("cost")
    table = parse(document, tmp_path).dataset("demo").table("Visits")
    assert table.column("COST") is not None


def test_missing_file_says_how_to_create_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such policy file") as raised:
        load_config(tmp_path / "missing.toml")
    assert raised.value.hint is not None
    assert "veil init-demo" in raised.value.hint


def test_load_config_reads_a_written_document(tmp_path: Path) -> None:
    path = tmp_path / "veil.toml"
    write_document(path, valid_document())
    assert load_config(path).dataset("demo") is not None
    assert read_document(path) == valid_document()


def test_write_document_leaves_the_file_unchanged_when_invalid(tmp_path: Path) -> None:
    path = tmp_path / "veil.toml"
    write_document(path, valid_document())
    before = path.read_bytes()
    broken = valid_document()
    _columns(broken)["age"]["upper"] = -1
    with pytest.raises(ConfigError, match="upper must be greater than lower"):
        write_document(path, broken)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["veil.toml"]


POLICY_DOC = Path(__file__).parents[3] / "docs" / "policy.md"

# Where to put an unknown key so that the error lists the keys allowed at that level.
LEVELS: dict[str, Callable[[Document], Document]] = {
    "top": lambda d: d,
    "ledger": lambda d: d["ledger"],
    "server": lambda d: d["server"],
    "dataset": lambda d: d["datasets"]["demo"],
    "table": _visits,
    "column": lambda d: _columns(d)["age"],
}


def _allowed_keys(tmp_path: Path, level: str) -> list[str]:
    document = valid_document()
    LEVELS[level](document)["zz_unknown"] = 1
    with pytest.raises(ConfigError, match="unknown key; allowed keys are ") as raised:
        parse(document, tmp_path)
    return raised.value.message.split("allowed keys are ")[1].split(", ")


@pytest.mark.parametrize("level", list(LEVELS))
def test_every_policy_key_is_documented(tmp_path: Path, level: str) -> None:
    text = POLICY_DOC.read_text(encoding="utf-8")
    for key in _allowed_keys(tmp_path, level):
        documented = f"`[{key}" if level == "top" else f"| `{key}` |"
        assert documented in text, f"docs/policy.md does not document {level} key {key!r}"


def test_rejects_duplicate_public_values(tmp_path: Path) -> None:
    """A repeated value would release one group twice with fresh noise for a single charge."""
    document = valid_document()
    _columns(document)["age"] = {"type": "integer", "public": True, "values": [1, 2, 1]}
    with pytest.raises(ConfigError, match="only once"):
        parse(document, tmp_path)


def test_rejects_names_that_differ_only_in_case(tmp_path: Path) -> None:
    document = valid_document()
    _columns(document)["AGE"] = {"type": "text"}
    with pytest.raises(ConfigError, match="case-insensitive"):
        parse(document, tmp_path)


def test_rejects_datetimes_as_date_values(tmp_path: Path) -> None:
    document = valid_document()
    _columns(document)["day"] = {
        "type": "date",
        "public": True,
        "values": [datetime.datetime(2024, 1, 1, 10, 0)],
    }
    with pytest.raises(ConfigError, match="is not a date value"):
        parse(document, tmp_path)


def test_rejects_non_positive_max_connections(tmp_path: Path) -> None:
    document = valid_document()
    document["server"] = {"max_connections": 0}
    with pytest.raises(ConfigError, match=r"server\.max_connections"):
        parse(document, tmp_path)


def test_dataset_lookup_ignores_case(tmp_path: Path) -> None:
    assert parse(valid_document(), tmp_path).dataset("DEMO") is not None


# --- backend = "postgres" ---------------------------------------------------------------------------


def postgres_document(**dataset: Any) -> Document:
    """The valid document with its dataset moved to PostgreSQL (no path; a DSN instead)."""
    document = valid_document()
    demo = document["datasets"]["demo"]
    del demo["path"]
    demo.update(backend="postgres", dsn="host=db.internal port=5432 dbname=clinic user=veil_reader")
    demo.update(dataset)
    for key in [key for key, value in dataset.items() if value is None]:
        del demo[key]
    return document


def _postgres(**dataset: Any) -> Callable[[Document], None]:
    """A mutation that turns the document into ``postgres_document(**dataset)`` (None removes a key)."""

    def mutate(document: Document) -> None:
        document.clear()
        document.update(postgres_document(**dataset))

    return mutate


DEMO = "datasets.demo"
INVALID_POSTGRES_DATASETS: list[tuple[str, Callable[[Document], None], str]] = [
    (
        "path on a postgres dataset",
        _postgres(path="demo.duckdb"),
        f'{DEMO}.path: is only used with backend = "duckdb"; name the server with dsn or dsn_env',
    ),
    ("neither dsn nor dsn_env", _postgres(dsn=None), f"{DEMO}.dsn: give exactly one of dsn"),
    ("both dsn and dsn_env", _postgres(dsn_env="VEIL_DSN"), f"{DEMO}.dsn: give exactly one of dsn"),
    ("empty dsn", _postgres(dsn="  "), f"{DEMO}.dsn: must not be empty"),
    ("dsn is not text", _postgres(dsn=5432), f"{DEMO}.dsn: must be a string, got 5432"),
    (
        "unparsable dsn",
        _postgres(dsn="host=db port"),
        f"{DEMO}.dsn: is not a valid libpq connection string or postgresql:// URL",
    ),
    (
        "dsn_env not a variable name",
        _postgres(dsn=None, dsn_env="MY-DSN"),
        f"{DEMO}.dsn_env: must be the name of an environment variable",
    ),
    ("schema not a name", _postgres(schema="my schema"), f"{DEMO}.schema: must be a schema name"),
    ("zero pool", _postgres(pool_size=0), f"{DEMO}.pool_size: must be a positive integer"),
    (
        "zero timeout",
        _postgres(statement_timeout_ms=0),
        f"{DEMO}.statement_timeout_ms: must be a positive integer (milliseconds)",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [pytest.param(mutate, message, id=name) for name, mutate, message in INVALID_POSTGRES_DATASETS],
)
def test_rejects_invalid_postgres_dataset_naming_the_key_path(
    tmp_path: Path, mutate: Callable[[Document], None], message: str
) -> None:
    document = valid_document()
    mutate(document)
    with pytest.raises(ConfigError) as raised:
        parse(document, tmp_path)
    assert message in raised.value.message


def test_parses_postgres_dataset(tmp_path: Path) -> None:
    demo = parse(
        postgres_document(schema="Clinic_2024", pool_size=8, statement_timeout_ms=30000), tmp_path
    ).dataset("demo")
    assert (demo.backend, demo.path) == ("postgres", None)
    assert demo.dsn == "host=db.internal port=5432 dbname=clinic user=veil_reader"
    assert (demo.dsn_env, demo.schema, demo.pool_size, demo.statement_timeout_ms) == (
        None,
        "clinic_2024",
        8,
        30000,
    )
    assert demo.table("visits") is not None


def test_postgres_dataset_defaults(tmp_path: Path) -> None:
    demo = parse(postgres_document(dsn="postgresql://veil@db/clinic"), tmp_path).dataset("demo")
    assert (demo.schema, demo.pool_size, demo.statement_timeout_ms) == ("public", 4, 30_000)


def test_dsn_env_is_stored_and_resolved_only_from_the_mapping_given(tmp_path: Path) -> None:
    demo = parse(postgres_document(dsn=None, dsn_env="CLINIC_DSN"), tmp_path).dataset("demo")
    assert (demo.dsn, demo.dsn_env) == (None, "CLINIC_DSN")
    assert (
        demo.resolve_dsn({"CLINIC_DSN": "postgresql://u:secret@db/clinic"})
        == "postgresql://u:secret@db/clinic"
    )


@pytest.mark.parametrize("environ", [{}, {"CLINIC_DSN": ""}], ids=["unset", "empty"])
def test_unset_dsn_env_names_the_variable_and_key(tmp_path: Path, environ: dict[str, str]) -> None:
    demo = parse(postgres_document(dsn=None, dsn_env="CLINIC_DSN"), tmp_path).dataset("demo")
    with pytest.raises(
        ConfigError, match=r"datasets\.demo\.dsn_env: the environment variable CLINIC_DSN is not set"
    ):
        demo.resolve_dsn(environ)


@pytest.mark.parametrize(
    "dsn",
    ["host=db dbname=clinic user=veil password=hunter2", "postgresql://veil:hunter2@db:5432/clinic"],
    ids=["keywords", "url"],
)
def test_refuses_a_password_in_the_policy_file_without_quoting_it(tmp_path: Path, dsn: str) -> None:
    with pytest.raises(ConfigError, match=r"datasets\.demo\.dsn: must not contain a password") as raised:
        parse(postgres_document(dsn=dsn), tmp_path)
    assert raised.value.hint is not None and "dsn_env" in raised.value.hint
    assert "hunter2" not in raised.value.message + raised.value.hint


def test_unparsable_dsn_is_not_quoted(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a valid libpq") as raised:
        parse(postgres_document(dsn="host=db password=hunter2 port"), tmp_path)
    assert "hunter2" not in raised.value.message


def test_range_declares_a_numeric_public_domain(tmp_path: Path) -> None:
    document = valid_document()
    _columns(document)["age"] = {"type": "integer", "public": True, "range": [0, 100, 10]}
    config = parse(document, tmp_path)
    age = config.dataset("demo").table("visits").column("age")  # type: ignore[union-attr]
    assert age.values == tuple(range(0, 101, 10))


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ({"type": "integer", "public": True, "range": [0, 10, 0]}, "step > 0"),
        ({"type": "integer", "public": True, "range": [0, 10]}, r"\[start, stop, step\]"),
        ({"type": "text", "public": True, "range": [0, 10, 1]}, "integer or real column"),
        ({"type": "integer", "public": True, "range": [0, 1, 0.5]}, "whole-number"),
        ({"type": "integer", "public": True, "range": [0, 100000, 1]}, "at most 10000"),
        ({"type": "integer", "public": True, "range": [0, 10, 1], "values": [1]}, "not both"),
    ],
)
def test_rejects_bad_ranges(tmp_path: Path, column: dict[str, Any], message: str) -> None:
    document = valid_document()
    _columns(document)["age"] = column
    with pytest.raises(ConfigError, match=message):
        parse(document, tmp_path)


# --- [ledger] and the accounting keys -----------------------------------------------------------------


def test_sqlite_ledger_path_is_relative_to_the_policy_file(tmp_path: Path) -> None:
    document = valid_document()
    document["ledger"] = {"path": "state/budget.sqlite"}
    ledger = parse(document, tmp_path).ledger
    assert ledger.path == tmp_path / "state" / "budget.sqlite"
    assert ledger.resolve_location({}) == tmp_path / "state" / "budget.sqlite"


def test_postgres_ledger_from_a_dsn_with_its_schema(tmp_path: Path) -> None:
    document = valid_document()
    document["ledger"] = {"dsn": "host=db.internal dbname=veil user=veil", "schema": "Budgets"}
    ledger = parse(document, tmp_path).ledger
    assert ledger == LedgerSettings(dsn="host=db.internal dbname=veil user=veil", schema="budgets")
    assert ledger.shared
    assert ledger.resolve_location({}) == "host=db.internal dbname=veil user=veil"


def test_postgres_ledger_dsn_env_is_resolved_only_from_the_mapping_given(tmp_path: Path) -> None:
    document = valid_document()
    document["ledger"] = {"dsn_env": "LEDGER_DSN"}
    ledger = parse(document, tmp_path).ledger
    assert (ledger.path, ledger.dsn, ledger.dsn_env, ledger.schema) == (
        None,
        None,
        "LEDGER_DSN",
        "veil_ledger",
    )
    assert ledger.resolve_location({"LEDGER_DSN": "postgresql://v:pw@db/veil"}) == "postgresql://v:pw@db/veil"
    with pytest.raises(ConfigError, match=r"ledger\.dsn_env: the environment variable LEDGER_DSN is not set"):
        ledger.resolve_location({"LEDGER_DSN": " "})


@pytest.mark.parametrize("accountant", ["basic", "advanced", "zcdp"])
def test_accountant_and_answer_cache_are_per_dataset(tmp_path: Path, accountant: str) -> None:
    document = valid_document()
    document["datasets"]["demo"].update(accountant=accountant, answer_cache=False)
    demo = parse(document, tmp_path).dataset("demo")
    assert (demo.accountant, demo.answer_cache) == (accountant, False)


def test_postgres_datasets_take_the_accounting_keys_too(tmp_path: Path) -> None:
    demo = parse(postgres_document(accountant="zcdp", answer_cache=False), tmp_path).dataset("demo")
    assert (demo.backend, demo.accountant, demo.answer_cache) == ("postgres", "zcdp", False)


def test_auto_contributions_read_the_hint_and_datasets_remember_bounds_by_default(tmp_path: Path) -> None:
    document = valid_document()
    _visits(document).update(max_contributions="auto", contribution_cap=500, contribution_hint=40)
    demo = parse(document, tmp_path).dataset("demo")
    visits = demo.tables["visits"]
    assert (visits.auto_contributions, visits.max_contributions, visits.contribution_hint) == (True, 500, 40)
    assert demo.remember_bounds is True
    document["datasets"]["demo"]["remember_bounds"] = False
    assert parse(document, tmp_path).dataset("demo").remember_bounds is False


def test_a_spark_dataset_reads_each_table_from_its_source(tmp_path: Path) -> None:
    document = copy.deepcopy(valid_document())
    tables = list(document["datasets"]["demo"]["tables"])
    sources: dict[str, Any] = {name: f"lake/{name}/" for name in tables}
    sources[tables[0]] = {"path": f"{tables[0]}.csv"}
    _spark({"sources": sources})(document)
    dataset = parse(document, tmp_path).dataset("demo")
    assert dataset is not None and dataset.backend == "spark" and dataset.path is None
    assert dataset.spark_master == "local[*]" and dataset.spark_remote is None and dataset.schema == "default"
    assert dataset.sources[tables[0]].format == "csv"
    assert dataset.sources[tables[-1]].location == str((tmp_path / "lake" / tables[-1]).resolve())
    assert dataset.sources[tables[-1]].format == "parquet"


def test_spark_connect_reads_tables_without_a_source_from_its_catalog(tmp_path: Path) -> None:
    document = copy.deepcopy(valid_document())
    _spark({"spark_remote": "sc://spark.internal:15002", "schema": "Clinic"})(document)
    dataset = parse(document, tmp_path).dataset("demo")
    assert dataset is not None and dataset.spark_remote == "sc://spark.internal:15002"
    assert dataset.spark_master is None and dict(dataset.sources) == {} and dataset.schema == "clinic"
