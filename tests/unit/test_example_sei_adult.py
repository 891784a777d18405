"""examples/sei_adult.py on a small synthetic adult.data (UCI Adult not needed), fixed seeds."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.unit.example_module import example_module

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "sei_adult.py"
SMALL = "age,workclass,relationship,race,sex,income"  # queries over at most 9 × 8 × 6 × 5 cells: fast


@pytest.fixture(scope="module")
def example() -> Iterator[ModuleType]:
    with example_module(SCRIPT, "sei_adult_example") as module:
        yield module


def synthetic_adult(path: Path, example: ModuleType, rows: int = 1_500, unknown: int = 0) -> None:
    """adult.data's layout (header line, 15 comma+space fields); every attribute depends on a latent group
    of three, so the cross-tabulations are far from flat; the first ``unknown`` rows have a "?"."""
    rng = np.random.default_rng(5)
    domains = example.DOMAINS
    groups = rng.integers(0, 3, size=rows)
    lines = [", ".join(example.COLUMNS)]
    for i, group in enumerate(groups):

        def pick(name: str, g: int = int(group)) -> str:
            values = domains[name]
            favourite = (3 * g) % len(values)
            return values[favourite] if rng.random() < 0.7 else values[int(rng.integers(len(values)))]

        age = 20 + 15 * int(group) + int(rng.integers(0, 15))
        fields = [
            age, pick("workclass"), int(rng.integers(20_000, 400_000)), pick("education"),
            int(rng.integers(1, 17)), pick("marital-status"), pick("occupation"), pick("relationship"),
            pick("race"), pick("sex"), 5_000 * int(rng.random() < 0.1), 0, 20 + 10 * int(group),
            pick("native-country"), pick("income"),
        ]  # fmt: skip
        if i < unknown:
            fields[1] = "?"
        lines.append(", ".join(str(field) for field in fields))
    path.write_text("\n".join(lines) + "\n")


def test_missing_data_prints_the_download_hint(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(tmp_path / "absent.data")], capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "archive.ics.uci.edu" in result.stderr and "--data" in result.stderr


def test_rows_with_unknown_values_are_dropped_and_bins_are_as_declared(
    example: ModuleType, tmp_path: Path
) -> None:
    data = tmp_path / "adult.data"
    synthetic_adult(data, example, rows=200, unknown=7)
    frame = example.load_adult(data)
    assert len(frame) == 193
    frame.loc[0, ["age", "hours-per-week", "capital-gain"]] = ["17", "1", "0"]
    frame.loc[1, ["age", "hours-per-week", "capital-gain"]] = ["90", "99", "99999"]
    codes = example.categorize(frame)
    column = {name: codes[:, j] for j, name in enumerate(example.ATTRIBUTES)}
    assert example.DOMAINS["age"][column["age"][0]] == "10-19"
    assert example.DOMAINS["age"][column["age"][1]] == "90-99"
    assert example.DOMAINS["hours-per-week"][column["hours-per-week"][0]] == "0-9"
    assert example.DOMAINS["hours-per-week"][column["hours-per-week"][1]] == "90-99"
    assert column["capital-gain"][:2].tolist() == [0, 1]
    deciles = np.bincount(column["fnlwgt"], minlength=10)
    assert deciles.sum() == 193 and deciles.min() >= 18 and deciles.max() <= 21


def test_a_value_outside_the_public_domain_is_refused(example: ModuleType, tmp_path: Path) -> None:
    data = tmp_path / "adult.data"
    synthetic_adult(data, example, rows=20)
    frame = example.load_adult(data)
    frame.loc[3, "occupation"] = "Astronaut"
    with pytest.raises(example.AnonymizationError, match="Astronaut"):
        example.categorize(frame)


def test_l_is_lowered_to_d_minus_one_on_small_domains(example: ModuleType, tmp_path: Path) -> None:
    data = tmp_path / "adult.data"
    synthetic_adult(data, example, rows=300)
    codes = example.categorize(example.load_adult(data))
    releases = {r.attribute: r for r in example.plan(codes, example.Setting("l", 6))}
    assert (releases["sex"].eta, releases["race"].eta, releases["relationship"].eta) == (1, 4, 5)
    assert (releases["age"].eta, releases["native-country"].eta) == (6, 6)
    assert all(r.p == 1.0 for r in releases.values())
    closeness = example.plan(codes, example.Setting("t", 0.2))
    assert all(r.t == 0.2 and r.achieved_emd <= 0.2 + 1e-12 for r in closeness)


def test_proposed_beats_value_adding_on_a_synthetic_table(
    example: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "adult.data"
    synthetic_adult(data, example)
    arguments = ["--data", str(data), "--ls", "3", "--ts", "0.3", "--subsets", "2", "--workers", "1",
                 "--attributes", SMALL, "--seed", "4", "--json"]  # fmt: skip
    assert example.main(arguments) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["rows"] == 1_500
    assert [s["setting"] for s in document["settings"]] == [
        {"model": "l", "value": 3},
        {"model": "t", "value": 0.3},
    ]
    for setting in document["settings"]:
        assert set(setting["means"]) == {"1", "2", "3", "4"}
        for q, means in setting["means"].items():
            for metric in ("L1", "L2", "Hellinger"):
                assert means["em"][metric] < means["value_adding"][metric], (setting["setting"], q, metric)
                assert means["restart"][metric] <= means["em"][metric] + 1e-9
        queries = [query for qs in setting["queries"].values() for query in qs]
        assert all(set(query["attributes"]) <= set(SMALL.split(",")) for query in queries)
    claims = {claim["name"]: claim["holds"] for claim in document["claims"]}
    assert claims["EM (default rule) < ValueAdding (means, every setting, q', metric)"]
    histogram = document["histogram"]["distances"]
    assert histogram["em"]["L1"] < histogram["value_adding"]["L1"] < histogram["random"]["L1"]


def test_tables_and_plots(example: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    data = tmp_path / "adult.data"
    synthetic_adult(data, example, rows=600)
    arguments = ["--data", str(data), "--ls", "5", "--ts", "0.5", "--subsets", "1", "--workers", "1",
                 "--attributes", "age,sex,race", "--plot-dir", str(tmp_path / "images")]  # fmt: skip
    assert example.main(arguments) == 0
    out = capsys.readouterr().out
    assert "q' = 3 (1 attribute subsets)" in out and "q' = 4" not in out
    assert "| l = 5 |" in out and "| t = 0.5 |" in out and "The paper's claims" in out
    for name in ("sei_diversity.png", "sei_closeness.png", "sei_age_occupation.png"):
        assert (tmp_path / "images" / name).read_bytes()[:4] == b"\x89PNG"


def test_a_claim_fails_when_the_proposed_method_loses(example: ModuleType) -> None:
    def query(em: float, value_adding: float) -> object:
        distances = {
            "em": dict.fromkeys(example.METRICS, em),
            "value_adding": dict.fromkeys(example.METRICS, value_adding),
            "random": dict.fromkeys(example.METRICS, 2 * value_adding),
        }
        return example.Query(("age",), 9, 5, None, distances)

    results = [
        example.SettingResult(example.Setting("l", 2), [], 0.0, {1: [query(1.0, 4.0)]}),
        example.SettingResult(example.Setting("l", 3), [], 0.0, {1: [query(5.0, 4.0)]}),
    ]
    claims = {claim.name: claim for claim in example.check_claims(results, None)}
    first = claims["EM (default rule) < ValueAdding (means, every setting, q', metric)"]
    assert not first.holds and "l = 3 q'=1 L1" in first.detail
    assert claims["ValueAdding ≈ 50 % below Random in L1/L2 when l is small (2) or t large (0.5)"].holds


def test_the_restart_runs_only_when_the_default_rule_stops_after_one_step(example: ModuleType) -> None:
    rng = np.random.default_rng(0)
    codes = np.stack([rng.choice(len(domain), size=3_000) for domain in example.DOMAINS.values()], axis=1)
    codes = codes.astype(np.uint8)
    codes[:, 0] = np.minimum(codes[:, 0], 3)  # age far from flat: here the restart helps (not on flat data)
    flat = example.plan(codes, example.Setting("l", 10))  # η = d − 1 on most attributes: tiny EM steps
    published = example.randomize(codes, flat, rng)
    subset = [example.ATTRIBUTES.index(name) for name in ("age", "workclass", "fnlwgt", "occupation")]
    query, estimates = example.reconstruct(codes, published, flat, subset, rng=rng, restart_tol=1e-9)
    assert query.iterations == 1 and query.restart_iterations is not None and query.restart_iterations > 1
    assert query.distances["restart"]["L1"] < query.distances["em"]["L1"]
    sharp = example.plan(codes, example.Setting("l", 2))
    published = example.randomize(codes, sharp, rng)
    query, estimates = example.reconstruct(codes, published, sharp, subset, rng=rng, restart_tol=1e-9)
    assert query.iterations > 1 and query.restart_iterations is None
    assert np.array_equal(estimates["restart"], estimates["em"])
