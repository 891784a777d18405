"""ARX's metrics: hand-checked on the Incognito example, validated against ARX's own numbers on Adult
(when the data file is present), and the lower bounds the search relies on."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from anonymizers.frequency import ClassTable, FrequencySet
from anonymizers.global_recoding import PrivacyModel
from anonymizers.hierarchy import Hierarchy, interval_hierarchy, load_arx_hierarchy, suppression_hierarchy
from anonymizers.lattice import Lattice
from anonymizers.metrics import all_metrics, lower_bounds, metric_value

SEX = ["M", "M", "M", "M", "F", "F"]
AGE = ["25", "29", "38", "31", "25", "28"]
ZIP = ["354-0025", "354-0025", "354-0038", "354-0019", "354-0045", "354-0031"]


def incognito() -> FrequencySet:
    zips = tuple(sorted(set(ZIP)))
    tree = (
        suppression_hierarchy("sex", SEX),
        interval_hierarchy("age", [int(a) for a in AGE], [10]),
        Hierarchy("zip", (zips, tuple(z[:3] for z in zips), ("*",) * len(zips))),
    )
    codes = np.stack([h.leaf_codes(v) for h, v in zip(tree, (SEX, AGE, ZIP), strict=True)], axis=1)
    return FrequencySet(tree, (0, 0, 0), codes, np.ones(6, dtype=np.int64))


def test_metrics_of_the_incognito_node_by_hand() -> None:
    frequency = incognito()
    table = frequency.rollup((0, 1, 1))
    metrics = all_metrics(table, np.zeros(table.classes, bool), frequency.hierarchies, 6)
    # per QI v_d: sex 0 (leaves); age: 4 records in [20-29] (3 of 5 leaves), 2 in [30-39] (2 of 5):
    # S = 4·3/5 + 2·2/5 = 3.2, (3.2 − 6/5)/(6 − 6/5) = 5/12; zip: all at 354 → 1
    assert metrics["loss"] == pytest.approx((1 * (1 + 5 / 12) * 2) ** (1 / 3) - 1)
    # shares per QI 3/6, 3.2/6, 6/6; mean of minimums (1/2 + 1/5 + 1/5)/3 = 0.3
    assert metrics["granularity_loss"] == pytest.approx(((0.5 + 3.2 / 6 + 1) / 3 - 0.3) / 0.7)
    # NCP: age (3−1)/4 for 4 records, (2−1)/4 for 2; zip 1
    assert metrics["gcp"] == pytest.approx((0 + (4 * 0.5 + 2 * 0.25) / 6 + 1) / 3)
    assert metrics["precision"] == pytest.approx((0 + 1 / 2 + 1 / 2) / 3)
    assert metrics["discernibility"] == 3 * 2**2
    assert metrics["aecs"] == 2


def test_suppressed_records_cost_one_and_n() -> None:
    frequency = incognito()
    table = frequency.rollup((0, 1, 0))  # (M, 20-29, 354-0025)×2 and four singletons
    suppressed = table.counts < 2
    metrics = all_metrics(table, suppressed, frequency.hierarchies, 6)
    assert metrics["discernibility"] == 2**2 + 6 * 4
    assert metrics["aecs"] == 2
    # precision sums per QI: kept 2 records at level/height (0, 1/2, 0), each suppressed record 1
    assert metrics["precision"] == pytest.approx((4 + 5 + 4) / 18)
    # loss: S_sex = 2·(1/2) + 4 = 5; S_age = 2·(3/5) + 4 = 5.2; S_zip = 2·(1/5) + 4 = 4.4
    sex, age, zip_ = (5 - 3) / 3, (5.2 - 1.2) / 4.8, (4.4 - 1.2) / 4.8
    assert metrics["loss"] == pytest.approx(((1 + sex) * (1 + age) * (1 + zip_)) ** (1 / 3) - 1)


@pytest.mark.parametrize("metric", ["loss", "gcp", "precision", "discernibility"])
def test_lower_bounds_never_exceed_the_value_with_suppression(metric: str) -> None:
    rng = np.random.default_rng(5)
    rows = 300
    ages = rng.integers(20, 60, rows)
    sexes = rng.choice(["F", "M"], rows)
    tree = (interval_hierarchy("age", ages.tolist(), [5, 10]), suppression_hierarchy("sex", sexes))
    frame = pd.DataFrame({"age": ages.astype(str), "sex": sexes}).value_counts().reset_index()
    codes = np.stack([tree[0].leaf_codes(frame["age"]), tree[1].leaf_codes(frame["sex"])], axis=1)
    frequency = FrequencySet(tree, (0, 0), codes, frame["count"].to_numpy(np.int64))
    lattice = Lattice([h.height for h in tree])
    bounds = lower_bounds(metric, lattice.nodes, tree, [frequency.marginal(0), frequency.marginal(1)])
    for node, bound in zip(lattice.nodes, bounds, strict=True):
        table = frequency.rollup(node)
        for k in (1, 3, 8):
            suppressed, _ = PrivacyModel(k=k).outliers(table, None)
            assert bound <= metric_value(metric, table, suppressed, tree, rows) * (1 + 1e-12)
        if metric != "discernibility":  # the separable bounds are exact without suppression
            unsuppressed = np.zeros(table.classes, bool)
            assert bound == pytest.approx(metric_value(metric, table, unsuppressed, tree, rows))


ADULT_QI = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


ARX_ADULT = Path(__file__).parent / "arx_adult"
ARX_K5_LEVELS = (0, 4, 0, 2, 3, 2, 2, 1)


def test_loss_matches_arx_on_adult() -> None:
    """ARX 3.9 on adult.csv, k=5, 0 %: node sex0 age4 race0 marital2 edu3 country2 workclass2
    occupation1 has 30 classes, Loss 0.592 and 1 − granularity 0.714 (the classes: arx_adult/README.md)."""
    tree = [load_arx_hierarchy(ARX_ADULT / f"adult_hierarchy_{q}.csv", q) for q in ADULT_QI]
    with (ARX_ADULT / "classes_k5.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter=";"))
    labels = np.array(
        [
            [
                tree[d].label_names[level].index(row[q])
                for d, (q, level) in enumerate(zip(ADULT_QI, ARX_K5_LEVELS, strict=True))
            ]
            for row in rows
        ]
    )
    counts = np.array([int(row["count"]) for row in rows])
    table = ClassTable(ARX_K5_LEVELS, labels, counts)
    metrics = all_metrics(table, np.zeros(table.classes, bool), tree, int(counts.sum()))
    assert table.classes == 30 and counts.sum() == 30162
    assert metrics["loss"] == pytest.approx(0.592, abs=0.001)
    assert metrics["granularity_loss"] == pytest.approx(0.714, abs=0.001)


def test_every_node_of_a_small_lattice_has_loss_between_zero_and_one() -> None:
    frequency = incognito()
    for levels in itertools.product(range(2), range(3), range(3)):
        table = frequency.rollup(levels)
        loss = metric_value("loss", table, np.zeros(table.classes, bool), frequency.hierarchies, 6)
        assert 0.0 <= loss <= 1.0
    top = frequency.rollup((1, 2, 2))
    assert metric_value("loss", top, np.zeros(1, bool), frequency.hierarchies, 6) == pytest.approx(1.0)
