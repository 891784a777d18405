"""A release that keeps its suppressed records as all-``*`` rows (ARX's convention) scores like its classes.

Regression for issue 12: every ``*`` row was counted as a candidate for every record, so ARX's k = 5,
5 %-suppression release of Adult scored n_q = 1,458 (the number of ``*`` rows) while its smallest class
held 5 records, and n_s was inflated the same way.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from anonymizers.combine import recode
from anonymizers.global_recoding import PrivacyModel, anonymize
from anonymizers.hierarchy import ROOT, Hierarchy, interval_hierarchy, suppression_hierarchy
from anonymizers.risk.attack import simulate_attack, suppressed_rows
from anonymizers.risk.classes import class_attack
from anonymizers.risk.classic import class_sizes, classic_risk
from anonymizers.risk.pipeline import AttributePipeline, Generalize, Pipeline
from anonymizers.source import TableSource

QIS = ["age", "sex", "zip"]
ZIPS = ("10115", "10117", "10119", "20095", "20097")
ZIP = Hierarchy("zip", (ZIPS, tuple(z[:3] + "xx" for z in ZIPS), (ROOT,) * len(ZIPS)))
K = 5


def people(rows: int = 400, seed: int = 3) -> pd.DataFrame:
    """Ages 18..79 and a few very old people, who end up in classes too small to publish."""
    rng = np.random.default_rng(seed)
    age = np.concatenate([rng.integers(18, 80, rows - 9), rng.integers(95, 100, 9)])
    return pd.DataFrame(
        {
            "age": age,
            "sex": rng.choice(["F", "M"], rows),
            "zip": rng.choice(ZIPS, rows),
            "disease": rng.choice(["flu", "asthma", "diabetes", "none"], rows),
        }
    )


def arx_release(tmp_path: Path, original: pd.DataFrame) -> tuple[pd.DataFrame, Pipeline, int]:
    """k-anonymize ``original`` with suppression through Veil's own search and write it as ARX does: every
    row in input order, a suppressed record's quasi-identifiers all ``*``. Also the pipeline an attacker
    infers and the number of suppressed records the search reported."""
    path = tmp_path / "people.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.register("frame", original)
        connection.execute("CREATE TABLE people AS SELECT * FROM frame")
    hierarchies = [
        interval_hierarchy("age", original["age"].tolist(), [5, 10, 20, 40]),
        suppression_hierarchy("sex", original["sex"]),
        ZIP,
    ]
    with TableSource.duckdb_file(path, "people") as source:
        result = anonymize(source, QIS, hierarchies, PrivacyModel(k=K), suppression_limit=0.05)
    pipeline = Pipeline(
        tuple(
            AttributePipeline(q, (Generalize(h, level),))
            for q, h, level in zip(QIS, hierarchies, result.levels, strict=True)
        )
    )
    released = recode(original.astype({q: str for q in QIS}), pipeline)
    too_small = released.groupby(QIS)["disease"].transform("size").to_numpy() < K
    released.loc[too_small, QIS] = ROOT
    return released.assign(row_id=np.arange(len(released))), pipeline, result.suppressed_records


@pytest.fixture
def case(tmp_path: Path) -> tuple[pd.DataFrame, pd.DataFrame, Pipeline, int]:
    original = people()
    released, pipeline, suppressed = arx_release(tmp_path, original)
    assert suppressed_rows(released, QIS).sum() == suppressed >= K  # the release the search described
    return original, released, pipeline, suppressed


def test_star_rows_are_candidates_only_for_the_suppressed_records(
    case: tuple[pd.DataFrame, pd.DataFrame, Pipeline, int],
) -> None:
    original, released, pipeline, suppressed = case
    result = simulate_attack(original, released, pipeline, sensitive="disease")
    classic = classic_risk(released, QIS)
    own_class = released.groupby(QIS)["row_id"].transform("size").to_numpy()
    assert (result.sizes[released["row_id"]] == own_class).all()  # |C_i| = the record's class, `*` rows too
    assert result.n_q == classic.achieved_k == K and result.risk == pytest.approx(1 / K)
    assert result.records_at_risk_zero == 0
    assert dict(result.histogram)[float(suppressed)] == suppressed


def test_revealing_risk_of_a_star_release_is_its_least_diverse_class(
    case: tuple[pd.DataFrame, pd.DataFrame, Pipeline, int],
) -> None:
    original, released, pipeline, _ = case
    result = simulate_attack(original, released, pipeline, sensitive="disease")
    distinct = released.groupby(QIS)["disease"].nunique()
    assert result.n_s == distinct.min()
    star = released[suppressed_rows(released, QIS)]
    assert result.n_s <= star["disease"].nunique()


def test_class_attack_agrees_when_the_star_rows_are_one_more_class(
    case: tuple[pd.DataFrame, pd.DataFrame, Pipeline, int],
) -> None:
    """The class form for global recoding: the `*` rows are one class, the records that were suppressed."""
    original, released, pipeline, _ = case
    general = simulate_attack(original, released, pipeline, sensitive="disease")
    classes = released.groupby(QIS)
    matrix = classes["disease"].value_counts().unstack(fill_value=0).to_numpy()
    shortcut = class_attack(class_sizes(released, QIS).to_numpy(), 0, matrix)
    assert shortcut.histogram == general.histogram
    assert shortcut.n_s == general.n_s
    assert shortcut.probabilistic_revealing_risk == pytest.approx(general.probabilistic_revealing_risk)


def test_fewer_star_rows_than_k_are_a_class_smaller_than_k(
    case: tuple[pd.DataFrame, pd.DataFrame, Pipeline, int],
) -> None:
    """Suppressed records are told apart from everyone else, so three of them are a class of three."""
    original, released, pipeline, _ = case
    star = np.flatnonzero(suppressed_rows(released, QIS))
    trimmed = released.drop(index=star[3:])
    result = simulate_attack(original, trimmed, pipeline)
    assert result.n_q == classic_risk(trimmed, QIS).achieved_k == 3
    assert result.records_at_risk_zero == len(star) - 3
