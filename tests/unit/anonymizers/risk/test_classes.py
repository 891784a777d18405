"""The class-size shortcut of Algorithm 2 agrees with the general simulator on globally recoded tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from anonymizers.hierarchy import interval_hierarchy, suppression_hierarchy
from anonymizers.risk.attack import simulate_attack
from anonymizers.risk.classes import class_attack
from anonymizers.risk.pipeline import AttributePipeline, Generalize, Pipeline


def test_class_attack_matches_the_generalization_simulator() -> None:
    rng = np.random.default_rng(5)
    original = pd.DataFrame(
        {
            "age": rng.integers(20, 60, 300),
            "sex": rng.choice(["F", "M"], 300),
            "disease": rng.choice(["a", "b", "c"], 300),
        }
    )
    age = interval_hierarchy("age", original["age"], [10, 20])
    sex = suppression_hierarchy("sex", original["sex"])
    released = original.assign(
        age=[age.generalize(str(v), 1) for v in original["age"]], row_id=np.arange(len(original))
    )
    sizes = released.groupby(["age", "sex"]).size()
    kept = released.set_index(["age", "sex"]).index.isin(sizes[sizes >= 12].index)
    pipeline = Pipeline(
        (AttributePipeline("age", (Generalize(age, 1),)), AttributePipeline("sex", (Generalize(sex, 0),)))
    )
    general = simulate_attack(original, released[kept], pipeline, sensitive="disease")

    classes = released[kept].groupby(["age", "sex"])
    matrix = classes["disease"].value_counts().unstack(fill_value=0).to_numpy()
    shortcut = class_attack(classes.size().to_numpy(), int((~kept).sum()), matrix)

    assert shortcut.n_q == general.n_q >= 12
    assert shortcut.histogram == general.histogram
    assert shortcut.records_at_risk_zero == general.records_at_risk_zero == int((~kept).sum())
    assert shortcut.n_s == general.n_s
    assert shortcut.probabilistic_revealing_risk == general.probabilistic_revealing_risk
