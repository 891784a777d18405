"""Classic measures on a table whose classes are known: sizes 1, 2 and 3."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonymizers.errors import AnonymizationError
from anonymizers.risk.classic import classic_from_sizes, classic_risk

TABLE = pd.DataFrame({"age": ["20-29", "20-29", "30-39", "30-39", "30-39", "40-49"], "sex": ["F"] * 6})


def test_prosecutor_and_marketer_risk_from_class_sizes() -> None:
    risk = classic_risk(TABLE, ["age", "sex"])
    assert (risk.achieved_k, risk.classes, risk.sample_uniques) == (1, 3, 1)
    assert risk.prosecutor_max == 1.0
    assert risk.prosecutor_average == pytest.approx((1 + 2 * 1 / 2 + 3 * 1 / 3) / 6)
    assert risk.marketer == pytest.approx(3 / 6)
    assert risk.journalist_max is None


def test_journalist_risk_uses_population_class_sizes() -> None:
    population = pd.concat([TABLE, TABLE.iloc[[5, 5, 5, 0]]], ignore_index=True)  # 40-49: 4, 20-29: 3
    risk = classic_risk(TABLE, ["age", "sex"], population=population)
    assert risk.journalist_max == pytest.approx(1 / 3)
    assert risk.journalist_average == pytest.approx((2 / 3 + 3 / 3 + 1 / 4) / 6)


def test_journalist_risk_from_a_sampling_fraction() -> None:
    risk = classic_risk(TABLE, ["age"], sampling_fraction=0.5)
    assert risk.journalist_max == pytest.approx(0.5)


def test_rejects_a_population_missing_a_released_class() -> None:
    with pytest.raises(AnonymizationError, match="does not occur in the population"):
        classic_risk(TABLE, ["age"], population=TABLE.iloc[:2])


def test_measures_from_class_sizes_alone_equal_those_of_the_table() -> None:
    """Global recoding knows its class sizes from the frequency set: no table to group."""
    from_table = classic_risk(TABLE, ["age", "sex"], sampling_fraction=0.25)
    assert classic_from_sizes(np.array([2, 3, 1]), sampling_fraction=0.25) == from_table
    with pytest.raises(AnonymizationError, match="empty table"):
        classic_from_sizes(np.array([], dtype=np.int64))
