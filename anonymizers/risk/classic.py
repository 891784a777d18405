"""Classic re-identification measures of a released table, from its equivalence classes.

A class is a set of released rows with identical quasi-identifiers (El Emam & Dankar 2008; ARX's risk
models):

* achieved k = the smallest class;
* prosecutor risk (the attacker knows the target is in the table): max and average of 1/|class| per record;
* marketer risk (expected fraction re-identified when every record is attacked, prosecutor model):
  #classes / n;
* sample uniques: records alone in their class;
* journalist risk (the attacker does not know the target is in the table): 1/F_j with F_j the size of the
  record's class in the *population*. We take F_j from a population table when one is given (recoded the
  same way as the release), else estimate F_j = f_j/λ from the sampling fraction λ; without either the
  journalist risk is not reported (a sample alone cannot tell F_j).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from anonymizers.errors import AnonymizationError


@dataclass(frozen=True)
class ClassicRisk:
    records: int
    classes: int
    achieved_k: int
    prosecutor_max: float
    prosecutor_average: float
    marketer: float
    sample_uniques: int
    journalist_max: float | None
    journalist_average: float | None


def class_sizes(table: pd.DataFrame, quasi_identifiers: Sequence[str]) -> pd.Series:
    """Size of every equivalence class, indexed by its quasi-identifier values (``NULL`` is a value)."""
    missing = [q for q in quasi_identifiers if q not in table.columns]
    if missing:
        raise AnonymizationError(f"the table lacks quasi-identifier {missing[0]!r}")
    return table.groupby(list(quasi_identifiers), dropna=False, sort=False, observed=True).size()


def classic_risk(
    table: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    *,
    population: pd.DataFrame | None = None,
    sampling_fraction: float | None = None,
) -> ClassicRisk:
    """The measures of the module docstring for ``table``, whose rows are the released records."""
    if len(table) == 0:
        raise AnonymizationError("cannot measure the risk of an empty table")
    sizes = class_sizes(table, quasi_identifiers)
    journalist = _journalist(sizes, quasi_identifiers, population, sampling_fraction)
    return _measures(sizes.to_numpy(dtype=float), journalist)


def classic_from_sizes(sizes: np.ndarray, *, sampling_fraction: float | None = None) -> ClassicRisk:
    """The same measures from the released class sizes alone: global recoding knows them from its
    frequency set, so a search can score every candidate without grouping (or reading) the rows."""
    if len(sizes) == 0:
        raise AnonymizationError("cannot measure the risk of an empty table")
    counts = np.asarray(sizes, dtype=float)
    return _measures(counts, _estimated_journalist(counts, sampling_fraction))


def _measures(sizes: np.ndarray, journalist: np.ndarray | None) -> ClassicRisk:
    """The measures from one size per class (and 1/F_j per class, when known)."""
    n = int(sizes.sum())
    return ClassicRisk(
        records=n,
        classes=len(sizes),
        achieved_k=int(sizes.min()),
        prosecutor_max=float(1.0 / sizes.min()),
        prosecutor_average=float(len(sizes) / n),  # Σ_records 1/f_j = #classes
        marketer=float(len(sizes) / n),
        sample_uniques=int((sizes == 1).sum()),
        journalist_max=None if journalist is None else float(journalist.max()),
        journalist_average=None if journalist is None else float(np.average(journalist, weights=sizes)),
    )


def _journalist(
    sizes: pd.Series,
    quasi_identifiers: Sequence[str],
    population: pd.DataFrame | None,
    sampling_fraction: float | None,
) -> np.ndarray | None:
    """1/F_j per sample class, from a population table or F_j = f_j/λ."""
    if population is not None:
        frequency = class_sizes(population, quasi_identifiers).reindex(sizes.index)
        if frequency.isna().any():
            raise AnonymizationError(
                "a released class does not occur in the population table",
                hint="the population must contain the sample and be recoded with the same hierarchies",
            )
        return 1.0 / np.maximum(frequency.to_numpy(dtype=float), sizes.to_numpy(dtype=float))
    return _estimated_journalist(sizes.to_numpy(dtype=float), sampling_fraction)


def _estimated_journalist(sizes: np.ndarray, sampling_fraction: float | None) -> np.ndarray | None:
    """1/F_j with F_j = f_j/λ; None without λ (a sample alone cannot tell F_j)."""
    if sampling_fraction is None:
        return None
    if not 0 < sampling_fraction <= 1:
        raise AnonymizationError(f"the sampling fraction must be in (0, 1], got {sampling_fraction}")
    return sampling_fraction / sizes
