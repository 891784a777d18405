"""``--plot``: PNG files on the Agg canvas, and one line naming the extra when matplotlib is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anonymizers.errors import AnonymizationError
from anonymizers.plots import plot_candidate_counts, plot_curves, plot_frontier, require_matplotlib
from anonymizers.release_search import Candidate, Frontier, Target
from tests.unit.test_example_adult_ch4 import SCRIPT, synthetic_adult

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def matplotlib() -> None:
    pytest.importorskip("matplotlib", reason="the [plot] extra (matplotlib) is not installed")


def frontier() -> Frontier:
    candidates = (
        Candidate({"k": 2, "suppression_limit": 0.0}, 0.5, 0.2),
        Candidate({"k": 5, "suppression_limit": 0.0}, 0.1, 0.35),
        Candidate({"k": 10, "suppression_limit": 0.0}, None, None, "infeasible"),
        Candidate({"k": 2, "suppression_limit": 0.05}, 0.25, 0.15),
        Candidate({"k": 5, "suppression_limit": 0.05}, 0.2, 0.25),
    )
    return Frontier(Target(0.2), "loss", "monotone search", candidates)


def test_frontier_plot_writes_a_png(tmp_path: Path, matplotlib: None) -> None:
    path = tmp_path / "frontier.png"
    plot_frontier(frontier(), path)
    data = path.read_bytes()
    assert data.startswith(PNG) and 0 < len(data) < 100_000


def test_candidate_count_plot_writes_a_png_with_records_at_risk_zero(
    tmp_path: Path, matplotlib: None
) -> None:
    path = tmp_path / "risk.png"
    sizes = np.concatenate([np.repeat([3.0, 7.5, 40.0, 1200.0], [3, 15, 80, 1200]), [np.nan] * 9])
    plot_candidate_counts(sizes, path, title="simulated attack", what="candidates |C_i|")
    data = path.read_bytes()
    assert data.startswith(PNG) and 0 < len(data) < 100_000


def test_candidate_count_plot_of_records_all_at_risk_zero_still_draws(
    tmp_path: Path, matplotlib: None
) -> None:
    path = tmp_path / "empty.png"
    plot_candidate_counts(np.full(4, np.nan), path, title="simulated attack", what="candidates |C_i|")
    assert path.read_bytes().startswith(PNG)


def test_missing_matplotlib_fails_in_one_line_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    with pytest.raises(
        AnonymizationError, match=r"needs matplotlib.*pip install 'veil-sql\[plot\]'"
    ) as error:
        require_matplotlib()
    assert "\n" not in error.value.message
    with pytest.raises(AnonymizationError, match="veil-sql"):
        plot_frontier(frontier(), tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()


def test_curves_plot_writes_a_png(tmp_path: Path, matplotlib: None) -> None:
    path = tmp_path / "curves.png"
    curves = {"dataset 2": [(4.0, 0.86, "ε=0.5"), (12.0, 0.61, "ε=0.2")], "paper": [(4.0, 0.63, "2")]}
    plot_curves(curves, path, title="sweep", x="n_q", y="Uti", unjoined=("paper",))
    assert path.read_bytes().startswith(PNG) and path.stat().st_size < 100_000


def test_adult_example_draws_its_utility_lines(tmp_path: Path, matplotlib: None) -> None:
    """examples/adult_ch4.py --plot on the synthetic adult.data of its smoke test."""
    data, plot = tmp_path / "adult.data", tmp_path / "sweep.png"
    synthetic_adult(data)
    arguments = [
        "--data",
        data,
        "--reps",
        1,
        "--model",
        "logistic",
        "--tables",
        "4.7",
        "--seed",
        1,
        "--plot",
        plot,
    ]
    result = subprocess.run(
        [sys.executable, SCRIPT, *map(str, arguments)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert f"plot: {plot}" in result.stdout and plot.read_bytes().startswith(PNG)
