"""The range Veil derives for an aggregate's input expression, rule by rule (analysis/intervals.py), and
which expressions it types as integers. The range is the input's bounds, and the bounds set the
sensitivity: a range too narrow is clamped values (a wrong answer), one too wide is noise for nothing,
and a rule that fails on some input is a query refused with an internal error instead of a hint."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.intervals import UNBOUNDED, Interval, interval, is_integer
from proxy.config import TablePolicy
from proxy.errors import PolicyViolationError
from tests.unit.proxy.policy_fixture import clinic_policy
from tests.unit.proxy.test_mutants_an_joins import classified


def visits() -> TablePolicy:
    """age in [0, 100] (integer), cost in [-50, 500.5] (real), patient_id and note without bounds."""
    table = clinic_policy().table("visits")
    assert table is not None
    return table


def bounds(sql: str) -> Interval:
    return interval(sqlglot.parse_one(sql, dialect="postgres"), table=visits())


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("age", (0.0, 100.0)),
        ("3.5", (3.5, 3.5)),
        ("'3'", UNBOUNDED),  # a string is not a number the analysis can bound
        ("nothing", UNBOUNDED),  # no such column: nothing bounds it (the query is refused elsewhere)
        ("note", UNBOUNDED),  # a text column has no numeric range
        ("-cost", (-500.5, 50.0)),
        ("age + cost", (-50.0, 600.5)),
        ("age - cost", (-500.5, 150.0)),
        ("cost * age", (-5000.0, 50050.0)),
        ("age * cost", (-5000.0, 50050.0)),
        ("age % 7", (-7.0, 7.0)),
        ("cost % -9", (-9.0, 9.0)),
    ],
)
def test_each_operator_gives_the_range_of_its_operands_values(sql: str, expected: Interval) -> None:
    assert bounds(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("ABS(age)", (0.0, 100.0)),  # already non-negative
        ("ABS(age - 200)", (100.0, 200.0)),  # never positive: mirrored
        # straddles zero: from 0 to the larger magnitude, which here is the lower end's
        ("ABS(-cost)", (0.0, 500.5)),
        ("ABS(cost)", (0.0, 500.5)),
    ],
)
def test_an_absolute_value_is_bounded_by_the_larger_magnitude(sql: str, expected: Interval) -> None:
    assert bounds(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # cost / 2 lies in [-25, 250.25]; widened by one each way for integer division's truncation
        ("cost / 2", (-26.0, 251.25)),
        ("age / 4", (-1.0, 26.0)),
        ("cost / -2", (-251.25, 26.0)),
        ("cost / age", UNBOUNDED),  # the divisor can be 0
        ("cost / GREATEST(patient_id, 1)", UNBOUNDED),  # the divisor has no upper end
        ("cost / LEAST(patient_id, -1)", UNBOUNDED),  # the divisor has no lower end
    ],
)
def test_a_quotient_is_bounded_only_by_a_divisor_that_stays_away_from_zero(
    sql: str, expected: Interval
) -> None:
    assert bounds(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("GREATEST(age, 10)", (10.0, 100.0)),
        ("GREATEST(age, cost, 10)", (10.0, 500.5)),
        ("LEAST(age, 10)", (0.0, 10.0)),
        ("LEAST(age, cost, 10)", (-50.0, 10.0)),
        ("COALESCE(age, cost)", (-50.0, 500.5)),
        ("CASE WHEN age > 1 THEN age END", (0.0, 100.0)),  # no ELSE: NULL, which aggregates skip
        ("CASE WHEN age > 1 THEN age ELSE 1000 END", (0.0, 1000.0)),
        ("CASE WHEN age > 1 THEN age WHEN age < 0 THEN cost ELSE 7 END", (-50.0, 500.5)),
    ],
)
def test_a_choice_is_bounded_by_its_branches(sql: str, expected: Interval) -> None:
    assert bounds(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("ROUND(cost)", (-51.0, 501.5)),
        ("FLOOR(age)", (-1.0, 101.0)),
        ("CEIL(cost * 2)", (-101.0, 1002.0)),
        ("CAST(cost AS integer)", (-50.0, 500.5)),
    ],
)
def test_rounding_widens_by_one_each_way_and_a_cast_keeps_the_range(sql: str, expected: Interval) -> None:
    assert bounds(sql) == expected


def test_a_zero_times_an_unbounded_end_bounds_nothing() -> None:
    """0 · ∞ is undefined: the product of age (which can be 0) and an unbounded column has no range."""
    assert bounds("age * patient_id") == UNBOUNDED


def test_a_per_person_count_has_no_upper_bound_to_derive_a_range_from() -> None:
    """A per-person COUNT(*) is a column with a lower bound (0) and no upper one: an expression of it
    has no range, and the analyst is told to clamp it (not an internal error)."""
    with pytest.raises(PolicyViolationError) as refused:
        classified(
            "SELECT SUM(n * 2) FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) t"
        )
    assert refused.value.message == "sum(n * 2): the range of n * 2 cannot be derived from the policy"
    assert refused.value.hint == (
        "clamp it explicitly: veil_clamp(n * 2, lower, upper) — or declare bounds for its columns"
    )


@pytest.mark.parametrize(
    ("sql", "integer"),
    [
        ("age", True),
        ("(age)", True),
        ("-age", True),
        ("ABS(age)", True),
        ("age + 1", True),
        ("1 + age", True),
        ("age * age", True),
        ("age / 2", True),  # PostgreSQL: int / int is int
        ("age + cost", False),
        ("cost + age", False),
        ("age + 1.5", False),
        ("cost", False),
        ("nothing", False),
        ("'1'", False),
        ("CAST(cost AS bigint)", True),
        ("CAST(age AS double precision)", False),
    ],
)
def test_integer_arithmetic_on_integers_is_integer(sql: str, integer: bool) -> None:
    """An integer input is measured as INTEGER (the engine sums it exactly); a real one as REAL."""
    assert is_integer(sqlglot.parse_one(sql, dialect="postgres"), visits()) is integer
