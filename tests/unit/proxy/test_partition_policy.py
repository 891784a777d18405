"""``partition = true`` in the policy: which columns may partition a table's people, and which may not."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config import VeilConfig, parse_config
from proxy.errors import ConfigError

TABLE = """
[datasets.clinic]
path = "clinic.duckdb"

[datasets.clinic.tables.patients]
privacy_unit = "patient_id"
max_contributions = 1

[datasets.clinic.tables.patients.columns]
patient_id = {{ type = "integer" }}
{column}
"""


def parse(column: str, tmp_path: Path) -> VeilConfig:
    return parse_config(TABLE.format(column=column), path=tmp_path / "veil.toml")


def test_a_public_text_column_with_values_may_partition(tmp_path: Path) -> None:
    config = parse(
        'region = { type = "text", public = true, values = ["north", "south"], partition = true }', tmp_path
    )
    dataset = config.dataset("clinic")
    assert dataset is not None
    table = dataset.tables["patients"]
    assert table.columns["region"].partition and table.partition_column == "region"


def test_a_public_integer_range_may_partition(tmp_path: Path) -> None:
    config = parse(
        'year = { type = "integer", public = true, range = [1950, 1960, 1], partition = true }', tmp_path
    )
    dataset = config.dataset("clinic")
    assert dataset is not None and dataset.tables["patients"].partition_column == "year"


def test_partition_false_is_the_default(tmp_path: Path) -> None:
    config = parse(
        'region = { type = "text", public = true, values = ["north"], partition = false }', tmp_path
    )
    dataset = config.dataset("clinic")
    assert dataset is not None and dataset.tables["patients"].partition_column is None


@pytest.mark.parametrize(
    ("column", "problem"),
    [
        ('region = { type = "text", partition = true }', "only a public column with declared values"),
        ('cost = { type = "real", public = true, values = [1.5, 2.5], partition = true }', "text or integer"),
        (
            'day = { type = "date", public = true, values = [2020-01-01], partition = true }',
            "text or integer",
        ),
        (
            'flag = { type = "boolean", public = true, values = [true, false], partition = true }',
            "text or integer",
        ),
        ('region = { type = "text", public = true, values = ["north"], partition = "yes" }', "true or false"),
    ],
)
def test_a_column_that_cannot_partition_is_refused(column: str, problem: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"datasets.clinic.tables.patients.columns.*partition: .*{problem}"):
        parse(column, tmp_path)


@pytest.mark.parametrize(
    ("values", "clash"),
    [
        ('["north", "North"]', "'north' and 'North'"),
        ('["north", "north "]', "'north' and 'north '"),
        ('["north", " north"]', "'north' and ' north'"),
        ('["Zürich", "Zurich"]', "'Zürich' and 'Zurich'"),
        ('["a  b", "a b"]', "'a  b' and 'a b'"),
        ('["ﬁle", "file"]', "'ﬁle' and 'file'"),
    ],
)
def test_values_an_engine_collation_could_confuse_are_refused(
    values: str, clash: str, tmp_path: Path
) -> None:
    """A case-, accent- or space-insensitive collation (or char(n) padding) would let two declared values
    select the same people: two partitions, one person, twice the budget."""
    column = f'region = {{ type = "text", public = true, values = {values}, partition = true }}'
    with pytest.raises(ConfigError, match=f"partition: {clash} could be the same value"):
        parse(column, tmp_path)


def test_one_partition_column_per_table(tmp_path: Path) -> None:
    columns = (
        'region = { type = "text", public = true, values = ["north"], partition = true }\n'
        'sex = { type = "text", public = true, values = ["female"], partition = true }'
    )
    with pytest.raises(ConfigError, match=r"tables\.patients: only one column may partition a table"):
        parse(columns, tmp_path)


def test_a_public_lookup_table_has_no_partitions(tmp_path: Path) -> None:
    text = """
[datasets.clinic]
path = "clinic.duckdb"

[datasets.clinic.tables.zones]
public = true

[datasets.clinic.tables.zones.columns]
zone = { type = "text", public = true, values = ["a"], partition = true }
"""
    with pytest.raises(ConfigError, match=r"partition: .*a public table has no people to partition"):
        parse_config(text, path=tmp_path / "veil.toml")
