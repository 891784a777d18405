"""Which statements are charged to a partition (parallel composition across statements): only those whose
WHERE pins the table's partition column to declared values with ``=`` or ``IN``, ANDed with anything.
Everything else — OR, NOT, NULL, casts, functions, other spellings of a value, values outside the
declared domain — is charged as an ordinary statement, so no trick opens a fresh partition.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot

from proxy.analysis.partitions import PartitionPin, partition_pin
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import DatasetPolicy, parse_config

POLICY = """
[datasets.clinic]
path = "clinic.duckdb"

[datasets.clinic.tables.patients]
privacy_unit = "patient_id"
max_contributions = 1

[datasets.clinic.tables.patients.columns]
patient_id = { type = "integer" }
age = { type = "integer", lower = 0, upper = 100 }
region = { type = "text", public = true, values = ["north", "south", "east", "O'Brien"], partition = true }
sex = { type = "text", public = true, values = ["female", "male"] }

[datasets.clinic.tables.visits]
privacy_unit = "patient_id"
max_contributions = 5

[datasets.clinic.tables.visits.columns]
patient_id = { type = "integer" }
region = { type = "text", public = true, values = ["north", "south", "east"] }
cost = { type = "real", lower = 0, upper = 100 }

[datasets.clinic.tables.households]
privacy_unit = "row"

[datasets.clinic.tables.households.columns]
year = { type = "integer", public = true, range = [1950, 2000, 1], partition = true }
size = { type = "integer", lower = 1, upper = 10 }
"""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> DatasetPolicy:
    config = parse_config(POLICY, path=tmp_path_factory.mktemp("pins") / "veil.toml")
    policy = config.dataset("clinic")
    assert policy is not None
    return policy


def pin(dataset: DatasetPolicy, sql: str) -> PartitionPin | None:
    """The partition a statement is charged to, found as the proxy finds it (classify → QueryShape)."""
    statement = classify(sqlglot.parse_one(sql, dialect="postgres"), dataset)
    assert isinstance(statement, PrivateQuery)
    return statement.shape.partition


def where(dataset: DatasetPolicy, table: str, condition: str) -> PartitionPin | None:
    """The pin of a bare condition (for spellings the query checks would refuse before pricing)."""
    policy = dataset.table(table)
    assert policy is not None
    return partition_pin(policy, sqlglot.parse_one(condition, dialect="postgres"))


NORTH = PartitionPin("patients", "region", ("north",))


# -- pinned ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "condition",
    [
        "region = 'north'",
        "'north' = region",
        "region IN ('north')",
        "region IN ('north', 'north', 'north')",
        "region = 'north' AND age > 30",
        "age > 30 AND (sex = 'female' AND (region = 'north'))",
        "(region = 'north') AND (age > 30 OR age < 10)",
        "region IN ('north', 'south') AND region = 'north'",
        "region = 'north' AND region = 'north'",
        "patients.region = 'north'",
        "REGION = 'north'",
        "region = 'north' AND (region = 'south' OR age > 3)",  # the OR only narrows the rows further
        "region = 'north' AND region IS NULL",  # selects nobody; still only people of the north
    ],
)
def test_an_equality_or_in_list_anded_with_anything_pins_the_partition(
    dataset: DatasetPolicy, condition: str
) -> None:
    assert pin(dataset, f"SELECT COUNT(*) FROM patients WHERE {condition}") == NORTH


def test_an_in_list_pins_every_value_it_names_once(dataset: DatasetPolicy) -> None:
    found = pin(dataset, "SELECT AVG(age) FROM patients WHERE region IN ('south', 'north', 'south')")
    assert found == PartitionPin("patients", "region", ("north", "south"))
    assert found is not None and found.label == "patients.region IN ('north', 'south')"


def test_a_quote_in_a_declared_value_is_matched_as_sql_reads_it(dataset: DatasetPolicy) -> None:
    found = pin(dataset, "SELECT COUNT(*) FROM patients WHERE region = 'O''Brien'")
    assert found == PartitionPin("patients", "region", ("O'Brien",))
    assert found is not None and found.label == "patients.region = 'O''Brien'"


def test_group_by_and_other_aggregates_do_not_matter(dataset: DatasetPolicy) -> None:
    sql = (
        "SELECT sex, COUNT(*), AVG(age) FROM patients WHERE region = 'north' GROUP BY sex ORDER BY 2 LIMIT 1"
    )
    assert pin(dataset, sql) == NORTH


@pytest.mark.parametrize(
    ("condition", "year"),
    [("year = 1980", 1980), ("year = 1980.0", 1980), ("year = 19.8e2", 1980), ("1999 = year", 1999)],
)
def test_an_integer_partition_is_pinned_by_number_literals_of_its_values(
    dataset: DatasetPolicy, condition: str, year: int
) -> None:
    assert pin(dataset, f"SELECT COUNT(*) FROM households WHERE {condition}") == PartitionPin(
        "households", "year", (year,)
    )


def test_an_integer_in_list_is_sorted_by_value(dataset: DatasetPolicy) -> None:
    found = pin(dataset, "SELECT SUM(size) FROM households WHERE year IN (1990, 1951, 1990.0)")
    assert found == PartitionPin("households", "year", (1951, 1990))
    assert found is not None and found.label == "households.year IN (1951, 1990)"


# -- not pinned: charged as ordinary statements -----------------------------------------------------


@pytest.mark.parametrize(
    "condition",
    [
        # OR and NOT
        "region = 'north' OR region = 'south'",
        "region = 'north' OR age > 30",
        "NOT region = 'north'",
        "region <> 'north'",
        "NOT (region <> 'north')",
        "region NOT IN ('south', 'east')",
        # NULL
        "region IN ('north', NULL)",
        "region = NULL",
        "region IS NULL",
        "(region = 'north') IS NOT FALSE",
        "COALESCE(region, 'north') = 'north'",
        "region IS NOT DISTINCT FROM 'north'",
        # other spellings of a value: case, whitespace, casts, functions
        "region = 'North'",
        "region = 'NORTH'",
        "region = 'north '",
        "region = ' north'",
        "LOWER(region) = 'north'",
        "UPPER(region) = 'NORTH'",
        "TRIM(region) = 'north'",
        "region = CAST('north' AS TEXT)",
        "CAST(region AS TEXT) = 'north'",
        "region || '' = 'north'",
        "region LIKE 'north'",
        "region >= 'north' AND region <= 'north'",
        "region BETWEEN 'north' AND 'north'",
        # values outside the declared domain
        "region = 'atlantis'",
        "region IN ('north', 'atlantis')",
        "region = ''",
        # contradictory pins select nobody: charged as ordinary, never to nothing
        "region = 'north' AND region = 'south'",
        "region IN ('north') AND region IN ('south')",
        # another column, public but not the partition column
        "sex = 'female'",
        # no WHERE at all
        "TRUE",
    ],
)
def test_anything_else_is_an_ordinary_statement(dataset: DatasetPolicy, condition: str) -> None:
    assert where(dataset, "patients", condition) is None


@pytest.mark.parametrize(
    "condition",
    [
        "year = '1980'",  # a string: the engine's cast might accept ' 1980' and more
        "year = 1980.5",
        "year = 1949",  # outside range = [1950, 2000, 1]
        "year = -1980",
        "year IN (1980, 2001)",
        "year = 1980 + 0",
        "year = TRUE",
        "year = 0x7BC",
    ],
)
def test_an_integer_partition_needs_a_number_literal_of_a_declared_value(
    dataset: DatasetPolicy, condition: str
) -> None:
    assert where(dataset, "households", condition) is None


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM patients",
        "SELECT region, COUNT(*) FROM patients GROUP BY region",
        "SELECT region, COUNT(*) FROM patients GROUP BY region HAVING region = 'north'",
        "SELECT COUNT(*) FROM visits WHERE region = 'north'",  # visits declares no partition column
        "SELECT COUNT(*) FROM patients p JOIN visits v ON p.patient_id = v.patient_id WHERE p.region = 'north'",
        "SELECT COUNT(*) FROM (SELECT patient_id, COUNT(*) AS n FROM patients WHERE region = 'north'"
        " GROUP BY patient_id) AS per_person",
    ],
)
def test_statements_without_a_pin_on_a_plain_partitioned_table_are_ordinary(
    dataset: DatasetPolicy, sql: str
) -> None:
    assert pin(dataset, sql) is None


def test_a_pin_is_found_again_after_auto_contribution_bounds(tmp_path: Path) -> None:
    """The pin lives on the shape, so replacing the table's bound (max_contributions = "auto") keeps it."""
    policy = POLICY.replace(
        'privacy_unit = "patient_id"\nmax_contributions = 1',
        'privacy_unit = "patient_id"\nmax_contributions = "auto"',
    )
    config = parse_config(policy, path=tmp_path / "veil.toml")
    dataset = config.dataset("clinic")
    assert dataset is not None and dataset.tables["patients"].auto_contributions
    statement = classify(sqlglot.parse_one("SELECT COUNT(*) FROM patients WHERE region = 'south'"), dataset)
    assert isinstance(statement, PrivateQuery) and statement.shape.partition is not None
