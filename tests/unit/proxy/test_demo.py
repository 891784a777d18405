"""The demo dataset: deterministic, shaped as its policy says, and refusing to overwrite itself."""

from __future__ import annotations

import datetime
from pathlib import Path

import duckdb
import pytest

from proxy.cli.demo import DemoLayout, build_demo
from proxy.config import ColumnType, DatasetPolicy, load_config, parse_config
from proxy.errors import ConfigError

PEOPLE = 2_000

STORED_TYPES = {
    ColumnType.INTEGER: {"INTEGER", "BIGINT"},
    ColumnType.REAL: {"DOUBLE"},
    ColumnType.TEXT: {"VARCHAR"},
    ColumnType.DATE: {"DATE"},
    ColumnType.BOOLEAN: {"BOOLEAN"},
}


@pytest.fixture
def demo(tmp_path: Path) -> DemoLayout:
    return build_demo(tmp_path / "demo", people=PEOPLE, seed=7)


@pytest.fixture
def policy(demo: DemoLayout) -> DatasetPolicy:
    dataset = load_config(demo.config_path).dataset(demo.dataset)
    assert dataset is not None
    return dataset


def query(layout: DemoLayout, sql: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(layout.database_path), read_only=True) as connection:
        return connection.execute(sql).fetchall()


def contents(layout: DemoLayout) -> dict[str, list[tuple[object, ...]]]:
    return {table: query(layout, f"SELECT * FROM {table} ORDER BY ALL") for table in layout.tables}


def test_layout_names_the_files_in_the_directory(tmp_path: Path, demo: DemoLayout) -> None:
    directory = tmp_path / "demo"
    assert demo == DemoLayout(
        config_path=directory / "veil.toml",
        database_path=directory / "demo.duckdb",
        ledger_path=directory / "ledger.sqlite",
        dataset="demo",
        tables=("patients", "visits"),
    )
    assert demo.config_path.is_file()
    assert demo.database_path.is_file()


def test_does_not_create_the_ledger(demo: DemoLayout) -> None:
    assert not demo.ledger_path.exists()
    assert sorted(p.name for p in demo.config_path.parent.iterdir()) == ["demo.duckdb", "veil.toml"]


def test_same_seed_gives_identical_tables(tmp_path: Path) -> None:
    first = build_demo(tmp_path / "a", people=PEOPLE, seed=11)
    second = build_demo(tmp_path / "b", people=PEOPLE, seed=11)
    assert contents(first) == contents(second)
    assert first.config_path.read_bytes() == second.config_path.read_bytes()


def test_different_seeds_give_different_rows(tmp_path: Path) -> None:
    first = build_demo(tmp_path / "a", people=PEOPLE, seed=11)
    second = build_demo(tmp_path / "b", people=PEOPLE, seed=12)
    assert contents(first)["visits"] != contents(second)["visits"]


def test_policy_loads_and_points_at_the_files(demo: DemoLayout, policy: DatasetPolicy) -> None:
    config = load_config(demo.config_path)
    assert config.ledger.path == demo.ledger_path
    assert (policy.backend, policy.path) == ("duckdb", demo.database_path)
    assert (policy.default_epsilon, policy.max_epsilon) == (0.1, 1.0)
    assert tuple(policy.tables) == demo.tables


def test_privacy_unit_is_the_patient(policy: DatasetPolicy) -> None:
    units = {name: (table.privacy_unit, table.max_contributions) for name, table in policy.tables.items()}
    assert units == {"patients": ("patient_id", 1), "visits": ("patient_id", 10)}


def test_only_categorical_columns_are_public(policy: DatasetPolicy) -> None:
    public = {
        (table.name, column.name)
        for table in policy.tables.values()
        for column in table.columns.values()
        if column.public
    }
    assert public == {
        ("patients", "sex"),
        ("patients", "region"),
        ("visits", "diagnosis"),
        ("visits", "region"),
    }


@pytest.mark.parametrize("table", ["patients", "visits"])
def test_database_columns_match_the_declared_columns_and_types(
    demo: DemoLayout, policy: DatasetPolicy, table: str
) -> None:
    described = query(
        demo, f"SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '{table}'"
    )
    declared = policy.tables[table].columns
    assert {name for name, _ in described} == set(declared)
    for name, data_type in described:
        assert data_type in STORED_TYPES[declared[str(name)].type], name


def test_one_row_per_patient(demo: DemoLayout) -> None:
    assert query(demo, "SELECT count(*), count(DISTINCT patient_id) FROM patients") == [(PEOPLE, PEOPLE)]


def test_visits_have_several_rows_per_person_and_a_heavy_tail(demo: DemoLayout) -> None:
    [(per_patient, most, beyond_cap)] = query(
        demo,
        """
        WITH counts AS (SELECT patient_id, count(*) AS n FROM visits GROUP BY patient_id)
        SELECT (SELECT count(*) FROM visits) / (SELECT count(*) FROM patients), max(n), count(*) FILTER (n > 10)
        FROM counts
        """,
    )
    assert 2.5 < float(per_patient) < 5  # type: ignore[arg-type]
    assert most == 20
    assert 0 < int(beyond_cap) < 0.1 * PEOPLE  # type: ignore[call-overload]


def test_visits_belong_to_patients_and_copy_their_region(demo: DemoLayout) -> None:
    [(orphans, mismatched)] = query(
        demo,
        """
        SELECT count(*) FILTER (p.patient_id IS NULL), count(*) FILTER (v.region IS DISTINCT FROM p.region)
        FROM visits v LEFT JOIN patients p USING (patient_id)
        """,
    )
    assert (orphans, mismatched) == (0, 0)


def test_visit_ids_are_unique_and_follow_the_calendar(demo: DemoLayout) -> None:
    [(ids, distinct, out_of_order)] = query(
        demo,
        """
        WITH ordered AS (SELECT visit_id, visit_date < lag(visit_date) OVER (ORDER BY visit_id) AS back FROM visits)
        SELECT count(*), count(DISTINCT visit_id), count(*) FILTER (back) FROM ordered
        """,
    )
    assert ids == distinct
    assert out_of_order == 0


def test_numeric_values_stay_inside_declared_bounds(demo: DemoLayout, policy: DatasetPolicy) -> None:
    for table in policy.tables.values():
        for column in table.columns.values():
            if column.has_bounds:
                [(lowest, highest)] = query(
                    demo, f"SELECT min({column.name}), max({column.name}) FROM {table.name}"
                )
                assert column.lower <= lowest and highest <= column.upper, (table.name, column.name)  # type: ignore[operator]


def test_public_columns_hold_only_declared_values(demo: DemoLayout, policy: DatasetPolicy) -> None:
    for table in policy.tables.values():
        for column in table.columns.values():
            if column.public:
                found = {row[0] for row in query(demo, f"SELECT DISTINCT {column.name} FROM {table.name}")}
                assert found <= set(column.values or ()), (table.name, column.name)


def test_regions_differ_in_size(demo: DemoLayout) -> None:
    sizes = [
        n for _, n in query(demo, "SELECT region, count(*) AS n FROM patients GROUP BY region ORDER BY n")
    ]
    assert len(sizes) == 7
    assert sizes[-1] > 3 * sizes[0]  # type: ignore[operator]


def test_visit_dates_cover_2024_and_2025(demo: DemoLayout) -> None:
    [(first, last)] = query(demo, "SELECT min(visit_date), max(visit_date) FROM visits")
    assert datetime.date(2024, 1, 1) <= first <= datetime.date(2024, 1, 31)  # type: ignore[operator]
    assert datetime.date(2025, 12, 1) <= last <= datetime.date(2025, 12, 31)  # type: ignore[operator]


def test_chronic_diagnoses_come_with_age(demo: DemoLayout) -> None:
    ages = dict(
        query(
            demo, "SELECT diagnosis, avg(age) FROM visits JOIN patients USING (patient_id) GROUP BY diagnosis"
        )
    )
    assert ages["hypertension"] > ages["checkup"] + 10  # type: ignore[operator]
    assert ages["otitis"] < 25  # type: ignore[operator]


def test_refuses_to_overwrite_an_existing_demo(demo: DemoLayout) -> None:
    before = demo.config_path.read_bytes()
    with pytest.raises(ConfigError, match=r"already holds a demo \(veil.toml, demo.duckdb\)") as raised:
        build_demo(demo.config_path.parent, people=PEOPLE)
    assert raised.value.hint == "choose another directory, or delete those files to start over"
    assert demo.config_path.read_bytes() == before


def test_refuses_a_directory_with_a_ledger(tmp_path: Path) -> None:
    (tmp_path / "ledger.sqlite").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"already holds a demo \(ledger.sqlite\)"):
        build_demo(tmp_path, people=PEOPLE)


def test_builds_into_a_directory_with_other_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    build_demo(tmp_path, people=PEOPLE)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_rejects_an_empty_population(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least one person"):
        build_demo(tmp_path, people=0)


def test_documented_example_is_the_demo_policy(demo: DemoLayout) -> None:
    text = (Path(__file__).parents[3] / "docs" / "policy.md").read_text(encoding="utf-8")
    example = text.split("## A complete example", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    documented = parse_config(example, path=demo.config_path)
    assert documented.datasets == load_config(demo.config_path).datasets
