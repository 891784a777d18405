"""``veil import`` writing the policy: the new table's section is added, and everything else in the
file — comments, order, layout, mode — stays as the administrator wrote it."""

from __future__ import annotations

import datetime
import stat
import tomllib
from pathlib import Path

import duckdb
import pytest
import tomlkit

from proxy.cli.import_policy import section_text, with_table
from proxy.cli.importer import import_table
from proxy.config import load_config
from proxy.errors import ConfigError

POLICY = """\
# Clinic policy: reviewed by the DPO on 2025-05-01.
[ledger]
path = "ledger.sqlite"  # analysts, grants, spends

[datasets.Clinic]
backend = "duckdb"
path = "clinic.duckdb"   # relative to this file
default_epsilon = 0.1

# One row per patient.
[datasets.Clinic.tables.patients]
privacy_unit = "patient_id"
max_contributions = 1

[datasets.Clinic.tables.patients.columns]
patient_id = { type = "integer" }
[datasets.shop]
path = "shop.duckdb"

[server]
port = 5433 # the demo's
"""

VISITS_SECTION = """\
[datasets.Clinic.tables.visits]
privacy_unit = "patient_id"
max_contributions = 10

[datasets.Clinic.tables.visits.columns]
patient_id = { type = "integer" }
cost = { type = "real", lower = 0.0, upper = 5000.0 }
region = { type = "text", public = true, values = ["north", "south"] }
"""


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "veil.toml"
    path.write_text(POLICY, encoding="utf-8")
    return path


@pytest.fixture
def visits_csv(tmp_path: Path) -> Path:
    path = tmp_path / "visits.csv"
    path.write_text("patient_id,cost,region\n1,10.5,north\n1,20,south\n2,30,north\n", encoding="utf-8")
    return path


def import_visits(config_path: Path, source: Path, dataset: str = "clinic") -> None:
    import_table(
        config_path,
        dataset=dataset,
        table="visits",
        source=source,
        privacy_unit="patient_id",
        max_contributions=10,
        public={"region": ["north", "south"]},
        bounds={"cost": (0, 5000)},
    )


def test_adds_the_section_after_the_datasets_tables_keeping_everything_else(
    config_path: Path, visits_csv: Path
) -> None:
    import_visits(config_path, visits_csv)
    before, after = POLICY.split("[datasets.shop]")
    assert (
        config_path.read_text(encoding="utf-8")
        == before + "\n" + VISITS_SECTION + "\n[datasets.shop]" + after
    )


def test_the_written_policy_declares_the_table(config_path: Path, visits_csv: Path) -> None:
    import_visits(config_path, visits_csv)
    table = load_config(config_path).dataset("clinic").table("visits")  # type: ignore[union-attr]
    assert table is not None
    assert (table.privacy_unit, table.max_contributions) == ("patient_id", 10)
    assert table.columns["region"].values == ("north", "south")


def test_a_first_table_gets_its_dataset_tables(config_path: Path, tmp_path: Path, visits_csv: Path) -> None:
    import_visits(config_path, visits_csv, dataset="shop")
    text = config_path.read_text(encoding="utf-8")
    assert text.startswith(POLICY.split("[server]")[0].rstrip("\n") + "\n\n[datasets.shop.tables.visits]\n")
    assert text.endswith("\n\n[server]\nport = 5433 # the demo's\n")


def test_a_section_added_last_ends_the_file_as_before(tmp_path: Path, visits_csv: Path) -> None:
    path = tmp_path / "veil.toml"
    path.write_text('[datasets.clinic]\npath = "clinic.duckdb"\n', encoding="utf-8")
    import_visits(path, visits_csv)
    text = path.read_text(encoding="utf-8")
    assert text.endswith('values = ["north", "south"] }\n')


def test_keeps_the_files_mode(config_path: Path, visits_csv: Path) -> None:
    config_path.chmod(0o640)
    import_visits(config_path, visits_csv)
    assert stat.S_IMODE(config_path.stat().st_mode) == 0o640


def test_refuses_a_dataset_written_as_an_inline_table_changing_nothing(
    tmp_path: Path, visits_csv: Path
) -> None:
    path = tmp_path / "veil.toml"
    path.write_text('[datasets]\nclinic = { path = "clinic.duckdb" }\n', encoding="utf-8")
    before = path.read_bytes()
    with pytest.raises(ConfigError, match="while keeping the file as it is") as raised:
        import_visits(path, visits_csv)
    assert raised.value.hint is not None and "--dry-run" in raised.value.hint
    assert path.read_bytes() == before
    assert not (tmp_path / "clinic.duckdb").exists()


def test_a_long_value_list_gets_its_own_section_wrapped(tmp_path: Path) -> None:
    codes = [f"diagnosis_{i:02d}" for i in range(20)]
    entry = {"privacy_unit": "row", "columns": {"code": {"type": "text", "public": True, "values": codes}}}
    text = section_text("clinic", "visits", entry)
    assert "[datasets.clinic.tables.visits.columns.code]\n" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    assert tomllib.loads(text)["datasets"]["clinic"]["tables"]["visits"] == entry


def test_values_keep_their_toml_types(tmp_path: Path) -> None:
    entry = {
        "privacy_unit": "row",
        "columns": {
            "seen": {"type": "date", "public": True, "values": [datetime.date(2024, 3, 1)]},
            "smoker": {"type": "boolean", "public": True, "values": [True, False]},
            "income": {"type": "real", "lower": 0.0, "upper": 250000.5},
        },
    }
    text = section_text("clinic", "people", entry)
    assert 'seen = { type = "date", public = true, values = [2024-03-01] }' in text
    assert tomllib.loads(text)["datasets"]["clinic"]["tables"]["people"] == entry


def test_adds_to_a_tables_section_that_is_there_but_empty(tmp_path: Path) -> None:
    original = '[datasets.clinic]\npath = "c.duckdb"\n[datasets.clinic.tables]\n'
    entry = {"privacy_unit": "row", "columns": {"id": {"type": "integer"}}}
    text = with_table(tmp_path / "veil.toml", original, dataset="clinic", table="people", entry=entry)
    assert tomllib.loads(text)["datasets"]["clinic"] == {"path": "c.duckdb", "tables": {"people": entry}}


def test_refuses_an_edit_that_would_change_other_settings(
    config_path: Path, visits_csv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edited text must parse (standard parser) to the old policy plus the table, nothing else."""
    dumps = tomlkit.dumps
    monkeypatch.setattr(tomlkit, "dumps", lambda document: dumps(document).replace("0.1", "0.2"))
    with pytest.raises(ConfigError, match="while keeping the file as it is") as raised:
        import_visits(config_path, visits_csv)
    assert raised.value.detail == "the edit would have changed other settings"
    assert config_path.read_text(encoding="utf-8") == POLICY
    assert not (config_path.parent / "clinic.duckdb").exists()


def test_dataset_names_match_whatever_their_case(config_path: Path, visits_csv: Path) -> None:
    import_visits(config_path, visits_csv, dataset="CLINIC")
    assert "[datasets.Clinic.tables.visits]" in config_path.read_text(encoding="utf-8")
    with duckdb.connect(str(config_path.parent / "clinic.duckdb"), read_only=True) as connection:
        assert connection.execute("SELECT count(*) FROM visits").fetchall() == [(3,)]


def test_a_long_column_keeps_the_column_order_of_the_table() -> None:
    """TOML reads a table's plain keys before its sub-tables: a long column alone in a section of its own
    would move behind the others (clients list columns in the policy's order)."""
    import tomllib

    from proxy.cli.import_policy import section_text

    values = [f"value number {i}" for i in range(20)]
    entry = {
        "privacy_unit": "pid",
        "columns": {"pid": {"type": "integer"}, "long": {"type": "text", "public": True, "values": values},
                    "last": {"type": "real"}},
    }  # fmt: skip
    parsed = tomllib.loads(section_text("d", "t", entry))
    assert list(parsed["datasets"]["d"]["tables"]["t"]["columns"]) == ["pid", "long", "last"]
