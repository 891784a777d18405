"""The small languages of ``veil materialize``: --qi, --hierarchy and --step specs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import Hierarchy, hierarchy_from_spec
from anonymizers.risk.pipeline import Generalize, Laplace, Randomize
from proxy.cli.anonymize_options import hierarchy_specs, pipeline_from_steps, split_columns

VALUES: dict[str, list[object]] = {"age": list(range(18, 80)), "job": ["a", "b", "c"]}


def hierarchy_for(column: str, grid: Sequence[object] | None) -> Hierarchy:
    spec = "interval:5,10" if column == "age" else None
    return hierarchy_from_spec(column, spec, list(grid) if grid is not None else VALUES[column])


def test_columns_are_split_and_checked() -> None:
    assert split_columns("age, job", "--qi") == ["age", "job"]
    with pytest.raises(AnonymizationError, match="names 'age' twice"):
        split_columns("age,age", "--qi")
    with pytest.raises(AnonymizationError, match="comma-separated"):
        split_columns("age,,job", "--qi")


def test_hierarchy_specs_must_name_a_quasi_identifier_once() -> None:
    assert hierarchy_specs(["age=interval:5"], ["age"]) == {"age": "interval:5"}
    with pytest.raises(AnonymizationError, match="not a quasi-identifier"):
        hierarchy_specs(["zip=z.csv"], ["age"])
    with pytest.raises(AnonymizationError, match="twice"):
        hierarchy_specs(["age=interval:5", "age=interval:10"], ["age"])
    with pytest.raises(AnonymizationError, match="cannot read --hierarchy 'age'") as caught:
        hierarchy_specs(["age"], ["age"])
    assert "COLUMN=SPEC" in (caught.value.hint or "")


def test_steps_run_in_the_order_given_per_column() -> None:
    pipeline = pipeline_from_steps(
        [
            "age=laplace:epsilon=0.5,lower=17,upper=90",
            "age=generalize:1",
            "job=randomize:epsilon=1,sensitivity=1",
        ],
        ["age", "job"],
        hierarchy_for,
        sample_rate=0.8,
    )
    age, job = pipeline.attributes
    noise, generalize = age.steps
    assert isinstance(noise, Laplace) and (noise.epsilon, noise.lower, noise.upper, noise.unit) == (
        0.5,
        17,
        90,
        1,
    )
    assert isinstance(generalize, Generalize) and generalize.level == 1
    assert len(generalize.hierarchy.leaves) == 74  # the noise grid 17..90, not only the ages in the data
    assert isinstance(job.steps[0], Randomize) and job.steps[0].score_sensitivity == 1
    assert pipeline.sample is not None and pipeline.sample.rate == 0.8


def test_randomizing_after_generalizing_happens_among_the_generalized_cells() -> None:
    pipeline = pipeline_from_steps(
        ["age=generalize:1", "age=randomize:epsilon=1"], ["age"], hierarchy_for, sample_rate=None
    )
    randomize = pipeline.attributes[0].steps[1]
    assert isinstance(randomize, Randomize)
    assert randomize.hierarchy.leaves[:2] == ("15-19", "20-24")


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("age=laplace:epsilon=1", "needs lower, upper"),
        ("age=laplace:epsilon=1,lower=1,upper=9,scale=2", "cannot read the laplace step"),
        ("age=laplace:epsilon=x,lower=1,upper=9", "epsilon of age must be a number"),
        ("age=generalize:one", "generalize needs a level"),
        ("age=shuffle:1", "unknown step 'shuffle'"),
        ("zip=generalize:1", "not a quasi-identifier"),
    ],
)
def test_bad_steps_say_what_to_write(step: str, message: str) -> None:
    with pytest.raises(AnonymizationError, match=message):
        pipeline_from_steps([step], ["age"], hierarchy_for, sample_rate=None)
