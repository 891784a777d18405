"""The complexity limits measure the statement the analyst wrote (analysis/shape.py, row_subqueries.py).

Veil rewrites ``agg(x) FILTER (WHERE c)`` as ``agg(CASE WHEN c THEN x END)`` before it describes the query;
the CASE is one level deeper and counts as scalar calls. A statement within the dataset's limits must not
be refused for the size of Veil's own rewriting of it: only a folded subquery (whose expressions are
copied to each place that reads them) is measured again.
"""

from __future__ import annotations

import dataclasses

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from tests.unit.proxy.policy_fixture import clinic_policy


def test_a_filter_clause_at_the_limits_is_not_refused_for_its_case_form() -> None:
    dataset = clinic_policy()
    limits = dataclasses.replace(dataset.limits, max_depth=6, max_function_calls=0)
    (tree,) = parse_statements("SELECT COUNT(*) FILTER (WHERE age > 3) FROM visits")
    statement = classify(tree, dataclasses.replace(dataset, limits=limits))
    assert isinstance(statement, PrivateQuery)
