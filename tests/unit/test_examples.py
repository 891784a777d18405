"""Smoke tests of examples/movielens_genres.py on a tiny synthetic ratings table (MovieLens not needed)."""

from __future__ import annotations

import csv
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.example_module import example_module

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "movielens_genres.py"
COMBOS = (
    "Drama",
    "Comedy",
    "Comedy|Romance",
    "Drama|Romance",
    "Action|Adventure|Sci-Fi",
    "Crime|Drama|Thriller",
    "Animation|Children|Comedy",
    "Documentary",
    "Action|Thriller",
    "(no genres listed)",
)


@pytest.fixture(scope="module")
def example() -> Iterator[ModuleType]:
    with example_module(SCRIPT, "movielens_genres_example") as module:
        yield module


@pytest.fixture(scope="module")
def ratings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 users with 20 to 158 ratings of 170 movies, first ratings spread over 1997-2015."""
    rng = random.Random(7)
    movies = [(movie, COMBOS[movie % len(COMBOS)]) for movie in range(170)]
    path = tmp_path_factory.mktemp("ratings") / "ratings.csv"
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["userId", "movieId", "genres", "rating", "timestamp"])
        for user in range(24):
            start = 852_076_800 + user * 25_000_000  # 1997-01-01 plus ~0.8 years per user
            for movie, genres in rng.sample(movies, 20 + 6 * user):
                rating = rng.choice([2.0, 3.5, 4.0, 4.5, 5.0])
                writer.writerow([user, movie, genres, rating, start + rng.randrange(10_000_000)])
    return path


def test_comparison_runs_and_scores_the_exact_top_m_perfectly(example: ModuleType, ratings: Path) -> None:
    calls: list[tuple[int, int]] = []
    results = example.compare(
        ratings,
        runs=1,
        seed=3,
        epsilons=(1.0, 0.5),
        experiments=("activity",),
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls == [(1, 2), (2, 2)]  # one progress step per epsilon
    (experiment,) = results.experiments
    assert results.users == 24 and experiment.classes == ("light", "medium", "heavy")
    assert set(experiment.precision) == {"none", "eps=1", "eps=0.5"}
    for per_approach in experiment.precision.values():
        for per_m in per_approach.values():
            for per_class in per_m.values():
                assert all(0.0 <= value <= 1.0 for value in per_class.values())
    for m in (10, 20):
        assert experiment.precision["none"]["exact"][m] == dict.fromkeys(experiment.classes, 1.0)
        assert experiment.weighted("none", "exact", m) == 1.0
    # the classes partition the users: one GROUP BY per table, so Veil's ledger charges eps once each
    charged = experiment.charged["eps=1"]
    assert charged["conventional"] == pytest.approx([1.0]) and charged["proposed"] == pytest.approx([1.0])
    assert charged["topk10"] == pytest.approx([1.0]) and charged["topk20"] == pytest.approx([1.0])
    assert experiment.precision["none"]["topk"][10] == dict.fromkeys(experiment.classes, 1.0)
    assert "exact top-10" in example.format_results(results)


def test_every_run_is_a_fresh_draw_that_the_ledger_charges(example: ModuleType, ratings: Path) -> None:
    """Runs 2… must not be run 1's cached answers (free, and the same noise): each run costs eps."""
    results = example.compare(ratings, runs=3, seed=3, epsilons=(1.0,), experiments=("activity",))
    (experiment,) = results.experiments
    charged = experiment.charged["eps=1"]
    accounts = [a for a in example.PRIVATE_APPROACHES if a != "topk"] + ["topk10", "topk20"]
    assert list(charged) == accounts  # (d) top-k: one query, so one account, per m
    for account in accounts:
        assert charged[account] == pytest.approx([1.0, 1.0, 1.0]), account
    assert "conventional 1, " in example.format_results(results)
    assert "21 in all over 3 runs" in example.format_results(results)


def test_relationship_slots_always_fill_m(example: ModuleType) -> None:
    assert example.allocate_slots({1: 30.0, 2: 50.0, 3: 20.0}, 10) == {1: 3, 2: 5, 3: 2}
    assert sum(example.allocate_slots({1: -4.0, 2: 7.0, 3: 1.0}, 20).values()) == 20
    assert example.allocate_slots({}, 10) == {1: 4, 2: 3, 3: 3}
    picks = example.proposed_top({"Drama": 9.0, "Comedy": 8.0, "War": 1.0}, {1: 1.0, 2: 1.0, 3: 0.0}, 2)
    assert picks == ["Drama", "Comedy|Drama"]


def test_script_skips_politely_without_the_data(tmp_path: Path) -> None:
    missing = tmp_path / "movielens_dslabs.csv"
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(missing)], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith(f"skipped: {missing} not found; get MovieLens ml-latest-small")
