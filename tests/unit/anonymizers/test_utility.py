"""Machine-learning utility (Uti, [D] Def 4.6) and the plain information-loss summary."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from anonymizers.errors import AnonymizationError
from anonymizers.utility import encode, f_measure, holdout, information_loss, ml_utility, model_scores


def separable(rows: int = 120, seed: int = 0) -> pd.DataFrame:
    """Income is ``>50K`` exactly when hours > 45; the city carries no signal."""
    rng = np.random.default_rng(seed)
    hours = rng.integers(20, 71, rows)
    return pd.DataFrame(
        {
            "hours": hours,
            "city": rng.choice(["north", "south", "east"], rows),
            "income": np.where(hours > 45, ">50K", "<=50K"),
        }
    )


def test_f_measure_follows_precision_and_recall() -> None:
    scores = f_measure(np.array([1, 1, 0, 0, 1]), np.array([1, 0, 1, 0, 1]))
    assert (scores.precision, scores.recall) == pytest.approx((2 / 3, 2 / 3))
    assert scores.f_measure == pytest.approx(2 / 3)


def test_f_measure_is_zero_without_predicted_positives() -> None:
    assert f_measure(np.array([1, 0]), np.array([0, 0])).f_measure == 0.0


def test_holdout_splits_a_tenth_disjointly_and_reproducibly() -> None:
    split = holdout(1000, rng=np.random.default_rng(3))
    assert len(split.test) == 100 and len(split.train) == 900
    assert np.array_equal(np.sort(np.concatenate([split.train, split.test])), np.arange(1000))
    assert np.array_equal(split.test, holdout(1000, rng=np.random.default_rng(3)).test)


@pytest.mark.parametrize("model", ["svm", "logistic"])
def test_uti_is_one_when_the_release_is_the_original(model: str) -> None:
    frame = separable()
    train, test = frame.iloc[:100], frame.iloc[100:]
    utility = ml_utility(
        original_train=train,
        released_train=train,
        original_test=test,
        released_test=test,
        target="income",
        features=["hours", "city"],
        model=model,  # type: ignore[arg-type]
    )
    assert utility.original.f_measure > 0.9
    assert utility.uti == 1.0


def test_a_release_without_signal_has_no_utility() -> None:
    frame = separable()
    train, test = frame.iloc[:100], frame.iloc[100:]
    suppressed = train.assign(hours="*")
    utility = ml_utility(
        original_train=train,
        released_train=suppressed,
        original_test=test,
        released_test=test.assign(hours="*"),
        target="income",
        features=["hours"],
        model="logistic",
    )
    assert utility.released.f_measure < utility.original.f_measure and utility.uti < 0.8


def test_merging_identical_rows_predicts_like_the_unmerged_fit() -> None:
    from sklearn.svm import SVC

    frame = pd.concat([separable(60, seed=1)] * 4, ignore_index=True)  # every row four times
    test = separable(200, seed=2)
    train_x, test_x = encode(frame, test, ["hours", "city"])
    direct = SVC(kernel="rbf", gamma="scale").fit(train_x, frame["income"] == ">50K").predict(test_x)
    truth = (test["income"] == ">50K").to_numpy()
    merged = model_scores(frame, test, truth, "income", ["hours", "city"], ">50K", "svm")
    assert merged == f_measure(truth, direct)


def test_encoding_standardizes_numbers_and_one_hots_text() -> None:
    train = pd.DataFrame({"x": [1.0, 3.0], "c": ["a", "b"]})
    test = pd.DataFrame({"x": [2.0], "c": ["z"]})
    train_x, test_x = encode(train, test, ["x", "c"])
    assert train_x.tolist() == [[-1.0, 1.0, 0.0], [1.0, 0.0, 1.0]]
    assert test_x.tolist() == [[0.0, 0.0, 0.0]]  # an unseen category is no category


def test_missing_scikit_learn_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("sklearn", "sklearn.svm", "sklearn.linear_model"):
        monkeypatch.setitem(sys.modules, module, None)
    frame = separable()
    with pytest.raises(AnonymizationError, match="needs scikit-learn") as error:
        ml_utility(
            original_train=frame,
            released_train=frame,
            original_test=frame,
            released_test=frame,
            target="income",
            features=["hours"],
        )
    assert error.value.hint == "pip install 'veil-sql[eval]'"


def test_a_single_class_cannot_be_learned() -> None:
    frame = separable().assign(income="<=50K")
    with pytest.raises(AnonymizationError, match="only one class"):
        model_scores(frame, frame, np.zeros(len(frame), bool), "income", ["hours"], ">50K", "logistic")


def test_an_unknown_target_is_named() -> None:
    frame = separable()
    with pytest.raises(AnonymizationError, match="no target column 'salary'"):
        ml_utility(
            original_train=frame,
            released_train=frame,
            original_test=frame,
            released_test=frame,
            target="salary",
            features=["hours"],
        )


def test_information_loss_compares_each_released_row_with_its_original() -> None:
    original = pd.DataFrame({"age": [30, 40, 50, 60], "city": ["a", "b", "c", "d"]})
    released = pd.DataFrame({"age": [41, 50], "city": ["b", "*"]})
    loss = information_loss(original, released, row_ids=np.array([1, 2]), columns=["age", "city"])
    assert loss.released_share == 0.5
    age, city = loss.columns
    assert (age.changed_share, age.mean_absolute_error) == (0.5, 0.5)
    assert (city.changed_share, city.mean_absolute_error) == (0.5, None)
    assert loss.to_dict()["columns"][1] == {
        "attribute": "city",
        "changed_share": 0.5,
        "mean_absolute_error": None,
    }


def test_information_loss_needs_an_id_per_released_row() -> None:
    frame = pd.DataFrame({"a": [1, 2]})
    with pytest.raises(AnonymizationError, match="row_ids"):
        information_loss(frame, frame, row_ids=np.array([0]), columns=["a"])


def test_cell_loss_counts_the_cells_not_released_unchanged() -> None:
    """Half the records released (the other half's cells lost), and of theirs one age and one city moved."""
    original = pd.DataFrame({"age": [30, 40, 50, 60], "city": ["a", "b", "c", "d"]})
    released = pd.DataFrame({"age": [41, 50], "city": ["b", "*"]})
    loss = information_loss(original, released, row_ids=np.array([1, 2]), columns=["age", "city"])
    assert loss.cell_loss == pytest.approx(1 - 0.5 * (1 - 0.5)) == 6 / 8
    assert loss.to_dict()["cell_loss"] == loss.cell_loss
    unchanged = information_loss(original, original, row_ids=np.arange(4), columns=["age", "city"])
    assert unchanged.cell_loss == 0
