"""Utility of a released table: the machine-learning ratio of [D] Def 4.6 and a plain information-loss summary.

Uti(A(D)) = F(A(D), E) / F(D, E) (spec simulated-attack-risk.md §6): F is the F-measure, on a held-out set E,
of a classifier trained on the released table (numerator) or on the original (denominator). E is a random
10 % of the ORIGINAL rows that are never released; both models train on the other 90 % (released or
original). As in [D] §4.3 the model is an SVM with RBF kernel; logistic regression (scikit-learn defaults,
as [D] ch. 5) is the fast option. scikit-learn is the optional ``[eval]`` extra and is imported only here,
only when a model is fitted.

Decisions, documented because the dissertation does not state them:

* Positive class ``>50K`` for Adult; any label can be given.
* Features: numeric columns as numbers (standardized on the training table — the RBF kernel compares
  distances, so an unscaled age would drown every one-hot column); text columns one-hot. A generalized
  numeric column is text in the released table (``28-35``, ``<=27``), so it is one-hot of its label, not its
  midpoint: open-ended labels have no midpoint, and one-hot is exactly what a partner sees.
* The test rows are raw, but a model trained on labels needs labels: the caller passes E twice, raw for the
  original's model and recoded (:func:`anonymizers.combine.recode` — generalizations only, no noise) for
  the released model's, as a partner would recode a new record before scoring it.
* Identical training rows are fitted once with their multiplicity as sample weight. The SVM's and logistic
  regression's objectives are sums over rows, so this is the same optimization problem; it makes an SVM on
  Adult's few distinct quasi-identifier combinations take seconds instead of minutes. The RBF width uses
  scikit-learn's ``gamma="scale"`` rule computed on the full (weighted) table, as it would be without merging.

The other loss metrics are where the recodings are: :mod:`anonymizers.metrics` (ARX's Loss and
1 − granularity, precision, discernibility, average class size, NCP/GCP of a global recoding) and
:mod:`anonymizers.gcp` (GCP of Mondrian's partitions). They need a generalization node or partition;
:func:`information_loss` here needs nothing but the two tables, so it also scores perturbed and sampled
outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from anonymizers.errors import AnonymizationError

Model = Literal["svm", "logistic"]


@dataclass(frozen=True)
class Holdout:
    """Row positions of the training part and of the held-out test set E."""

    train: np.ndarray
    test: np.ndarray


def holdout(rows: int, *, rng: np.random.Generator, test_fraction: float = 0.1) -> Holdout:
    """A random ``test_fraction`` of ``rows`` as E ([D] §4.3: 10 %), the rest for training."""
    if not 0 < test_fraction < 1:
        raise AnonymizationError(f"the test fraction must be in (0, 1), got {test_fraction}")
    test_rows = max(1, round(rows * test_fraction))
    if test_rows >= rows:
        raise AnonymizationError(f"{rows} rows are too few to hold out a test set and still train")
    order = rng.permutation(rows)
    return Holdout(train=np.sort(order[test_rows:]), test=np.sort(order[:test_rows]))


@dataclass(frozen=True)
class Scores:
    """Precision, recall and F-measure of one model on E."""

    precision: float
    recall: float
    f_measure: float


def f_measure(truth: np.ndarray, predicted: np.ndarray) -> Scores:
    """P = TP/(TP+FP), R = TP/(TP+FN), F = 2PR/(P+R); an empty ratio counts as 0."""
    truth, predicted = np.asarray(truth, dtype=bool), np.asarray(predicted, dtype=bool)
    true_positive = int(np.sum(truth & predicted))
    precision = true_positive / max(1, int(predicted.sum()))
    recall = true_positive / max(1, int(truth.sum()))
    harmonic = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Scores(precision=precision, recall=recall, f_measure=harmonic)


@dataclass(frozen=True)
class Utility:
    """The two models' scores and their ratio Uti."""

    released: Scores
    original: Scores
    model: Model

    @property
    def uti(self) -> float:
        return self.released.f_measure / self.original.f_measure

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "uti": self.uti,
            "released": vars(self.released),
            "original": vars(self.original),
        }


def ml_utility(
    *,
    original_train: pd.DataFrame,
    released_train: pd.DataFrame,
    original_test: pd.DataFrame,
    released_test: pd.DataFrame,
    target: str,
    features: Sequence[str],
    positive: str = ">50K",
    model: Model = "svm",
) -> Utility:
    """Uti = F(model on ``released_train``)/F(model on ``original_train``), both scored on E.

    ``original_test`` is E as it is; ``released_test`` is E in the released schema (same rows, same order,
    e.g. :func:`anonymizers.combine.recode`). Labels always come from ``original_test``.
    """
    truth = _labels(original_test, target, positive)
    original = model_scores(original_train, original_test, truth, target, features, positive, model)
    if original.f_measure == 0:
        raise AnonymizationError(
            f"the model trained on the original table never predicts {positive!r} correctly, so Uti is undefined",
            hint="choose a target and positive class the original data can predict, or more features",
        )
    released = model_scores(released_train, released_test, truth, target, features, positive, model)
    return Utility(released=released, original=original, model=model)


def model_scores(
    train: pd.DataFrame,
    test: pd.DataFrame,
    truth: np.ndarray,
    target: str,
    features: Sequence[str],
    positive: str,
    model: Model,
) -> Scores:
    """Fit ``model`` on ``train`` (identical rows merged into weights) and score it against ``truth``."""
    train_x, test_x = encode(train, test, features)
    labels = _labels(train, target, positive)
    if labels.all() or not labels.any():
        raise AnonymizationError(
            f"the training table has only one class of {target!r}, so no classifier can be trained",
            hint=f"check the positive label {positive!r} against the column's values",
        )
    rows, weights = np.unique(np.column_stack([train_x, labels]), axis=0, return_counts=True)
    classifier = make_classifier(model, gamma=_scale_gamma(train_x))
    classifier.fit(rows[:, :-1], rows[:, -1].astype(bool), sample_weight=weights.astype(np.float64))
    return f_measure(truth, classifier.predict(test_x).astype(bool))


def encode(train: pd.DataFrame, test: pd.DataFrame, features: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Numeric features standardized on ``train``; text features one-hot over ``train``'s categories."""
    train_columns: list[np.ndarray] = []
    test_columns: list[np.ndarray] = []
    for feature in features:
        if pd.api.types.is_numeric_dtype(train[feature]):
            values = train[feature].to_numpy(dtype=np.float64)
            center, spread = values.mean(), values.std() or 1.0
            train_columns.append(((values - center) / spread)[:, None])
            test_columns.append(((test[feature].to_numpy(dtype=np.float64) - center) / spread)[:, None])
        else:
            categories = pd.Index(pd.unique(train[feature].astype(str)))
            identity = np.eye(len(categories) + 1)[:, :-1]  # the extra row: a test value never trained on
            train_columns.append(identity[categories.get_indexer(train[feature].astype(str))])
            test_columns.append(identity[categories.get_indexer(test[feature].astype(str))])
    return np.hstack(train_columns), np.hstack(test_columns)


@dataclass(frozen=True)
class ColumnLoss:
    """How much of one column the release changed."""

    attribute: str
    changed_share: float
    mean_absolute_error: float | None


@dataclass(frozen=True)
class InformationLoss:
    """Rows released and, per column, the share of released cells that differ from the original."""

    released_share: float
    columns: tuple[ColumnLoss, ...]

    @property
    def cell_loss(self) -> float:
        """The share of the original table's cells (records × these columns) that the release does not
        carry unchanged: 1 − released share × mean unchanged share. Why this one for ``combine``: it is
        in [0, 1], needs no hierarchy or node, and both of the pipeline's costs move it — a record sampled
        away loses all its cells, a noised or randomized value that moved loses its cell. (A generalized
        column always counts as changed; its level is the user's, not searched.)"""
        if not self.columns:
            return 1.0 - self.released_share
        unchanged = 1.0 - sum(c.changed_share for c in self.columns) / len(self.columns)
        return 1.0 - self.released_share * unchanged

    def to_dict(self) -> dict[str, Any]:
        return {
            "released_share": self.released_share,
            "cell_loss": self.cell_loss,
            "columns": [vars(c) for c in self.columns],
        }


def information_loss(
    original: pd.DataFrame, released: pd.DataFrame, *, row_ids: np.ndarray, columns: Sequence[str]
) -> InformationLoss:
    """Compare each released row with its original (``row_ids``: input position of each released row).

    A cell counts as changed when its text differs (a generalized label always does); where both sides are
    numeric the mean absolute error is given too (what Laplace noise costs).
    """
    if len(released) != len(row_ids):
        raise AnonymizationError("row_ids must give the original position of every released row")
    source = original.iloc[np.asarray(row_ids)].reset_index(drop=True)
    losses = []
    for column in columns:
        before, after = source[column], released[column].reset_index(drop=True)
        numeric = pd.api.types.is_numeric_dtype(before) and pd.api.types.is_numeric_dtype(after)
        if numeric:
            difference = np.abs(after.to_numpy(dtype=np.float64) - before.to_numpy(dtype=np.float64))
            changed, error = difference > 0, float(difference.mean()) if len(difference) else 0.0
        else:
            changed, error = (before.astype(str) != after.astype(str)).to_numpy(), None
        losses.append(ColumnLoss(column, float(changed.mean()) if len(changed) else 0.0, error))
    return InformationLoss(released_share=len(released) / max(1, len(original)), columns=tuple(losses))


def _labels(frame: pd.DataFrame, target: str, positive: str) -> np.ndarray:
    if target not in frame.columns:
        raise AnonymizationError(f"the table has no target column {target!r} for the utility model")
    return (frame[target].astype(str).str.strip() == positive).to_numpy()


def _scale_gamma(train_x: np.ndarray) -> float:
    """scikit-learn's ``gamma="scale"``, 1/(features·Var X), on the unmerged training rows."""
    variance = float(train_x.var())
    return 1.0 / (train_x.shape[1] * variance) if variance > 0 else 1.0


def make_classifier(model: Model, *, gamma: float = 1.0) -> Any:
    """The scikit-learn estimator, imported only now: it is an optional extra."""
    try:
        from sklearn.linear_model import LogisticRegression
        from sklearn.svm import SVC
    except ImportError:
        raise AnonymizationError(
            "the machine-learning utility needs scikit-learn, which is not installed",
            hint="pip install 'veil-sql[eval]'",
        ) from None
    if model == "svm":
        return SVC(kernel="rbf", gamma=gamma)
    if model == "logistic":
        return LogisticRegression(max_iter=1000)
    raise AnonymizationError(f"unknown utility model {model!r}: use 'svm' or 'logistic'")
