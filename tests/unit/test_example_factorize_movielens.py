"""examples/factorize_movielens.py on a small synthetic ratings table (MovieLens not needed), fixed seeds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from tests.unit.example_module import example_module

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "factorize_movielens.py"
SMALL = ["--users", "30", "--items", "40", "--ranks", "3,5", "--iterations", "10", "--json"]


@pytest.fixture(scope="module")
def example() -> Iterator[ModuleType]:
    with example_module(SCRIPT, "factorize_movielens_example") as module:
        yield module


@pytest.fixture(scope="module")
def ratings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 users rating 15–35 of 60 movies each, mostly from one of three taste groups, over 2000–2010."""
    rng = np.random.default_rng(11)
    genres = ["Drama", "Comedy", "Action|Thriller"]
    rows = []
    for user in range(40):
        group = user % 3
        liked = [m for m in range(60) if m % 3 == group]
        count = int(rng.integers(15, 35))
        pool = rng.permutation(liked + list(rng.choice(60, size=10, replace=False)))
        for movie in dict.fromkeys(int(m) for m in pool[:count]):
            rows.append(
                (user + 1, movie + 1, genres[movie % 3], int(rng.integers(946_684_800, 1_262_304_000)))
            )
    path = tmp_path_factory.mktemp("movielens") / "ratings.csv"
    pd.DataFrame(rows, columns=["userId", "movieId", "genres", "timestamp"]).to_csv(path, index=False)
    return path


def test_every_table_of_the_seed_is_regenerated_with_sane_values(
    example: ModuleType, ratings: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert example.main(["--data", str(ratings), *SMALL]) == 0
    result = json.loads(capsys.readouterr().out)
    tables = result["tables"]
    assert result["setup"]["users"] == 30 and result["setup"]["items"] == 40
    expected_rows = {
        "5.2": 1,
        "5.3": 2,
        "5.4": 5,
        "5.5": 5,
        "5.6/5.7": 10,
        "5.8/5.9": 8,
        "5.10": 5,
        "5.11": 5,
    }
    assert {name: len(tables[name]) for name in expected_rows} == expected_rows
    assert len(tables["5.12"]) == len(tables["5.13"]) == len(tables["5.14"]) == 2
    for row in tables["5.4"] + tables["5.6/5.7"]:
        assert row["reidentification"] <= 1 / row["k"] + 1e-12  # 1/k credit of a clustered release
    for row in tables["5.3"]:
        assert row["reidentification"] >= 0.5  # MF alone hides few from the re-identification attack
    for row in tables["5.10"] + tables["5.11"] + tables["5.12"]:
        assert 0 <= row["f"] <= 1 and row["uti"] == pytest.approx(row["f"] / row["f_original"])
    assert len(tables["errors"][0]["t1"]) == 10
    assert tables["claim"][0]["mf_noise_keeps_more_utility"].endswith("of 4")


def test_genres_as_items_and_the_plots(
    example: ModuleType, ratings: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    arguments = ["--data", str(ratings), "--item", "genres", "--items", "3", "--ranks", "1,2"]
    assert example.main([*arguments, "--users", "30", "--iterations", "5", "--plot-dir", str(tmp_path)]) == 0
    assert "Table 5.2" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "factorize_mf_kanon_genres.png",
        "factorize_mf_noise_genres.png",
    ]


def test_a_missing_data_file_says_where_to_get_it(
    example: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert example.main(["--data", str(tmp_path / "absent.csv")]) == 1
    assert "grouplens.org" in capsys.readouterr().err
