"""Machine-learning utility of a released user × item matrix ([D] §5.3, [J] §5; spec
``matrix-factorization.md`` §6).

The sources train a logistic regression (scikit-learn defaults) on the de-identified matrix and score it on
the same users' evaluation data: "an item is chosen as objective variable, the rest are explanatory;
repeated for fifty attributes, averaged", Uti = F(de-identified) / F(original). Unstated details, decided
here and recorded in every report:

* Users are split at random, 80 % to train and 20 % to test (the spec's decision).
* Target columns are drawn at random among the 2 × ``columns`` items with the most positive training users
  that also have a positive test user (fewer if fewer qualify). On sparse data (MovieLens: most movies
  rated by a few percent of users) a rare item's F-measure is noise on a test set of forty users; the
  sources' web domains were dense (F = 0.763 on the original).
* Training labels of the release are its target column thresholded at 0.5 (a real-valued X has no 0/1
  labels of its own); its features are the release's other columns as published. Test features and
  labels are always the *original* matrix's test users — what the model will meet.
* A training column with one class only yields a constant model (scikit-learn cannot fit one): it
  predicts that class.
* Uti is the ratio of the mean F-measures (the sources' F/0.763), precision and recall are averaged too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from anonymizers.errors import AnonymizationError
from anonymizers.utility import Scores, f_measure, make_classifier

TEST_FRACTION = 0.2
LABEL_THRESHOLD = 0.5


@dataclass(frozen=True)
class MatrixUtility:
    """Mean scores of the released and of the original matrix's models over ``columns``."""

    released: Scores
    original: Scores
    columns: list[int]

    @property
    def uti(self) -> float:
        return self.released.f_measure / self.original.f_measure if self.original.f_measure else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": "logistic",
            "uti": self.uti,
            "released": vars(self.released),
            "original": vars(self.original),
            "columns": len(self.columns),
            "test_fraction": TEST_FRACTION,
        }


def matrix_utility(
    original: np.ndarray, released: np.ndarray, *, columns: int = 50, rng: np.random.Generator
) -> MatrixUtility:
    """Uti of ``released`` against ``original`` (same users in the same rows) over ``columns`` random
    target items (see the module docstring)."""
    if original.shape != released.shape:
        raise AnonymizationError(f"the matrices have shapes {original.shape} and {released.shape}")
    n = original.shape[0]
    test_rows = max(1, round(n * TEST_FRACTION))
    if n - test_rows < 2:
        raise AnonymizationError(f"{n} users are too few to train and test a model")
    order = rng.permutation(n)
    test, train = np.sort(order[:test_rows]), np.sort(order[test_rows:])
    truth = original > LABEL_THRESHOLD
    positives = truth[train].sum(axis=0)
    scorable = np.flatnonzero((positives >= 2) & (truth[test].sum(axis=0) >= 1))
    eligible = scorable[np.argsort(-positives[scorable], kind="stable")[: 2 * columns]]
    if eligible.size == 0:
        raise AnonymizationError(
            "no item has enough positive users to train and test a model on",
            hint="use more users or fewer, more popular items (--top-items)",
        )
    chosen = sorted(rng.choice(eligible, size=min(columns, eligible.size), replace=False).tolist())
    scored = [
        (
            _scores(released[train], released[train, j] > LABEL_THRESHOLD, original[test], truth[test, j], j),
            _scores(original[train], truth[train, j], original[test], truth[test, j], j),
        )
        for j in chosen
    ]
    return MatrixUtility(_mean([s[0] for s in scored]), _mean([s[1] for s in scored]), chosen)


def _scores(
    train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray, target: int
) -> Scores:
    features = np.ones(train_x.shape[1], dtype=bool)
    features[target] = False
    if train_y.all() or not train_y.any():
        predicted = np.full(test_y.shape, bool(train_y.any()))
    else:
        model = make_classifier("logistic")
        model.fit(train_x[:, features], train_y)
        predicted = model.predict(test_x[:, features]).astype(bool)
    return f_measure(test_y, predicted)


def _mean(scores: list[Scores]) -> Scores:
    return Scores(
        precision=float(np.mean([s.precision for s in scores])),
        recall=float(np.mean([s.recall for s in scores])),
        f_measure=float(np.mean([s.f_measure for s in scores])),
    )
