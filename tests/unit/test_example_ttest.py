"""examples/ttest.py (the DP t-test of dissertation 000, ch. 7) on small synthetic data: UCI Adult not needed."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from mechanisms import ttest
from tests.unit.example_module import example_module

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "ttest.py"


@pytest.fixture(scope="module")
def example() -> Iterator[ModuleType]:
    with example_module(SCRIPT, "ttest_example") as module:
        yield module


def binomial_tolerance(rate: float, trials: int) -> float:
    """Four binomial standard errors: a correct rate lands outside with probability < 1e-4."""
    return 4 * math.sqrt(rate * (1 - rate) / trials)


def test_table_7_1_gives_positive_scales_with_sound_at_least_paper(example: ModuleType) -> None:
    calls: list[tuple[int, int]] = []
    cells = example.table_7_1(
        seeds=2, seed=3, ns=(40, 200), variances=(20.0, 2000.0), progress=lambda d, t: calls.append((d, t))
    )
    assert calls == [(d, 8) for d in range(1, 9)]
    assert [(c.n, c.variance) for c in cells] == [(40, 20.0), (40, 2000.0), (200, 20.0), (200, 2000.0)]
    for cell in cells:
        assert len(cell.paper) == len(cell.sound) == 2
        assert all(math.isfinite(v) and v > 0 for v in cell.paper + cell.sound)
        assert all(s >= p for p, s in zip(cell.paper, cell.sound, strict=True))
    # a larger variance gives a smaller noise s.d. (spec §8 (a)) — a factor of about 6 here
    by_key = {(c.n, c.variance): c for c in cells}
    assert by_key[200, 20.0].paper_mean > 2 * by_key[200, 2000.0].paper_mean
    # the number reported is S/alpha of the first dataset of the cell, recomputed here
    a, b = example.sample_groups(np.random.default_rng((3, 40, 20, 0)), 40, 20.0)
    alpha, beta = ttest.noise_parameters(epsilon=5.0, delta=0.01)
    expected = ttest.smooth_sensitivity(a, b, m=200.0, dummies=(90.0, 110.0), beta=beta, mode="paper") / alpha
    assert cells[0].paper[0] == pytest.approx(expected, rel=1e-12)


def test_sampled_groups_are_clipped_and_split_equally(example: ModuleType) -> None:
    a, b = example.sample_groups(np.random.default_rng(0), 1001, 2000.0)
    assert (a.size, b.size) == (500, 501)
    values = np.concatenate((a, b))
    assert values.min() == 0.0 and values.max() == 200.0  # s = 45: the clip binds at both ends
    assert abs(values.mean() - 100.0) < 5


def _cell(example: ModuleType, n: int, variance: float, paper: float, sound: float | None = None) -> object:
    return example.Cell(n, variance, [paper, paper], [sound if sound is not None else paper + 1] * 2)


def _acceptable_grid(example: ModuleType, **changes: float) -> list[object]:
    """Table 7.1 means that satisfy (a)-(c); ``changes`` overrides a paper mean, keyed 'n_variance'."""
    means = {(100, 20.0): 60.0, (100, 200.0): 25.0, (100, 2000.0): 10.0,
             (1000, 20.0): 24.0, (1000, 200.0): 11.0, (1000, 2000.0): 6.0,
             (10000, 20.0): 10.0, (10000, 200.0): 6.5, (10000, 2000.0): 5.7}  # fmt: skip
    for key, value in changes.items():
        n, variance = key.split("_")
        means[int(n), float(variance)] = value
    return [_cell(example, n, v, mean) for (n, v), mean in means.items()]


def test_acceptance_holds_on_a_grid_that_meets_the_spec(example: ModuleType) -> None:
    checks = example.acceptance(_acceptable_grid(example))
    assert [c.name[:3] for c in checks] == ["(a)", "(b)", "(c)"]
    assert all(c.holds for c in checks), checks


@pytest.mark.parametrize(
    ("changes", "failing"),
    [
        ({"10000_2000": 7.0}, "(a)"),  # the last row rises from s² = 200 to 2,000
        ({"1000_200": 5.0}, "(a)"),  # the s² = 200 column rises from n = 1,000 to 10,000
        ({"100_2000": 14.5}, "(b)"),  # outside [7, 14]
        ({"10000_200": 2.9, "10000_2000": 2.8}, "(b)"),  # below 3
    ],
)
def test_acceptance_reports_each_violation(
    example: ModuleType, changes: dict[str, float], failing: str
) -> None:
    checks = {c.name[:3]: c for c in example.acceptance(_acceptable_grid(example, **changes))}
    assert not checks[failing].holds
    assert all(c.holds for name, c in checks.items() if name != failing)


def test_acceptance_c_fails_when_sound_is_below_paper_on_one_dataset(example: ModuleType) -> None:
    cells = _acceptable_grid(example)
    cells[4] = example.Cell(1000, 200.0, [11.0, 11.0], [12.0, 10.5])
    checks = {c.name[:3]: c for c in example.acceptance(cells)}
    assert not checks["(c)"].holds and "seed 1" in checks["(c)"].detail


def test_acceptance_rates_count_the_five_seed_groups_that_pass(example: ModuleType) -> None:
    good, bad = _acceptable_grid(example), _acceptable_grid(example, **{"100_2000": 14.5})
    cells = [
        example.Cell(g.n, g.variance, [g.paper[0]] * 5 + [b.paper[0]] * 5 + [g.paper[0]] * 3, [99.0] * 13)
        for g, b in zip(good, bad, strict=True)
    ]
    rates = {name[:3]: rate for name, rate in example.acceptance_rates(cells).items()}
    assert rates == {"(a)": 1.0, "(b)": 0.5, "(c)": 1.0}  # two whole groups; the last 3 seeds are left out


def test_walking_the_paper_path_once_matches_smooth_sensitivity(example: ModuleType) -> None:
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0, 50, 30), rng.uniform(10, 50, 23)
    betas = [ttest.noise_parameters(epsilon=e, delta=d)[1] for e in (0.5, 5.0, 500.0) for d in (1e-6, 0.01)]
    walked = example.smooth_sensitivities(a, b, m=50.0, dummies=(24.0, 26.0), betas=betas, mode="paper")
    for beta, value in zip(betas, walked, strict=True):
        public = ttest.smooth_sensitivity(a, b, m=50.0, dummies=(24.0, 26.0), beta=beta, mode="paper")
        assert value == pytest.approx(public, rel=1e-12)
    assert len(set(walked.tolist())) > 1  # S really depends on beta


def test_type_one_error_is_nominal_without_noise_and_inflated_with_it(example: ModuleType) -> None:
    trials = 400
    result = example.type_one_error(trials=trials, seed=11, n=200, variance=200.0, epsilons=(1.0, 1e5))
    tolerance = binomial_tolerance(0.05, trials)
    for mode in ("paper", "sound"):
        rates = result.naive[mode] + result.aware[mode]
        assert all(0.0 <= r <= 1.0 for r in rates)
        noisy, almost_exact = result.naive[mode]
        assert abs(almost_exact - 0.05) <= tolerance, (mode, almost_exact)  # ε′ = 1e5: noise s.d. ≈ 0.002
        assert result.noise_sd[mode][1] < 0.01
        assert noisy > 0.5, (mode, noisy)  # ε′ = 1: noise s.d. in the tens swamps |t| ≈ 1
        assert result.aware[mode][0] <= 0.05 + tolerance  # the noise-aware rule keeps the level
    assert abs(result.exact_naive - 0.05) <= tolerance
    assert result.noise_sd["sound"][0] >= result.noise_sd["paper"][0]


def test_type_one_error_does_not_depend_on_the_number_of_workers(example: ModuleType) -> None:
    arguments = {"trials": 60, "seed": 2, "n": 120, "variance": 200.0, "epsilons": (2.0, 50.0)}
    calls: list[tuple[int, int]] = []
    one = example.type_one_error(**arguments, progress=lambda d, t: calls.append((d, t)))
    two = example.type_one_error(**arguments, workers=2)
    assert calls == [(25, 60), (50, 60), (60, 60)]  # chunks of 25 trials
    assert one == two


def _comparisons(example: ModuleType) -> list[object]:
    rng = np.random.default_rng(8)
    a, b = np.clip(rng.normal(55, 10, 300), 0, 100), np.clip(rng.normal(40, 10, 200), 0, 100)
    return [example.Comparison("effect", a, b), example.Comparison("shuffled", a, b, shuffled=True)]


def test_power_rejects_a_large_effect_only_when_the_noise_is_small(example: ModuleType) -> None:
    trials = 100
    groups = _comparisons(example)
    rows = example.power(groups, trials=trials, seed=4, epsilons=(0.5, 1e6), deltas=(0.01,))
    by_key = {(r.comparison, r.epsilon): r for r in rows}
    assert len(rows) == 4 and all(0.0 <= r.naive <= 1.0 and 0.0 <= r.aware <= 1.0 for r in rows)
    effect, null = by_key["effect", 1e6], by_key["shuffled", 1e6]
    assert effect.t == pytest.approx(example.augmented_t(groups[0].a, groups[0].b, (45.0, 55.0)))
    assert effect.t > 15 and effect.naive == effect.aware == 1.0
    assert null.naive <= 0.05 + binomial_tolerance(0.05, trials)  # shuffled labels: H0 holds
    assert null.t < 3  # the mean |t| of the shuffles
    # at ε′ = 0.5 the noise s.d. is hundreds of times |t|: the aware rule cannot see the effect
    low = by_key["effect", 0.5]
    assert low.noise_sd > 100 * effect.t and low.aware <= 0.05 + binomial_tolerance(0.05, trials)


def synthetic_adult(path: Path, rows: int = 400, *, header: bool = True) -> None:
    """adult.data's layout; men work longer hours, and some hours exceed the public bound 100."""
    rng = np.random.default_rng(6)
    lines = ["age, workclass, fnlwgt, education, education-num, marital-status, occupation, relationship, "
             "race, sex, capital-gain, capital-loss, hours-per-week, native-country, Salary"] if header else []  # fmt: skip
    for i in range(rows):
        sex, race = ("Male", "Female")[i % 2], ("White", "Black", "Asian-Pac-Islander")[i % 3]
        hours = 120 if i == 0 else int(np.clip(rng.normal(44 if sex == "Male" else 36, 10), 1, 99))
        fields = [30, "Private", 1000, "HS-grad", 9, "Never-married", "Sales", "Husband", race, sex, 0, 0, hours,
                  "United-States", "<=50K"]  # fmt: skip
        lines.append(", ".join(str(f) for f in fields))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("header", [True, False])
def test_adult_comparisons_clamp_hours_to_the_public_bounds(
    example: ModuleType, tmp_path: Path, header: bool
) -> None:
    data = tmp_path / "adult.data"
    synthetic_adult(data, header=header)
    frame = example.load_adult(data)
    assert len(frame) == 400
    sex, race, shuffled = example.comparisons(frame)
    assert (sex.a.size, sex.b.size) == (200, 200) and sex.a.max() == 100.0  # 120 hours clamped
    assert (race.a.size, race.b.size) == (134, 133) and shuffled.shuffled and not sex.shuffled


def test_main_prints_table_7_1_and_the_acceptance_without_data(
    example: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        example.main(["--tables", "7.1", "--seeds", "1", "--data", str(tmp_path / "absent"), "--json"]) == 0
    )
    document = json.loads(capsys.readouterr().out)
    assert len(document["table_7_1"]) == 9
    assert [c["name"][:3] for c in document["acceptance"]] == ["(a)", "(b)", "(c)"]
    assert all(c["paper_mean"] > 0 for c in document["table_7_1"])


def test_main_runs_the_power_part_on_a_small_adult(
    example: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "adult.data"
    synthetic_adult(data, rows=200)
    assert example.main(["--tables", "power", "--trials", "10", "--workers", "1", "--data", str(data)]) == 0
    out = capsys.readouterr().out
    for text in ("sex (Male − Female)", "race (White − Black)", "labels shuffled (H0 true)", "δ′ = 1e-06"):
        assert text in out


def test_script_without_adult_says_where_to_get_it(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(tmp_path / "absent.data")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "archive.ics.uci.edu" in result.stderr and "--tables 7.1,fig7.1" in result.stderr
    assert result.stdout == ""  # it stops before any work


def test_plots_are_png_files(example: ModuleType, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    result = example.type_one_error(trials=5, seed=1, n=60, epsilons=(1.0, 10.0))
    rows = example.power(_comparisons(example), trials=5, seed=1, epsilons=(1.0, 10.0), deltas=(0.01,))
    example.plot_type_one(result, tmp_path / "type1.png")
    example.plot_power(rows, tmp_path / "power.png", trials=5)
    for name in ("type1.png", "power.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
