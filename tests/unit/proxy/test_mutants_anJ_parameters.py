"""Only ``$`` followed by digits is a numbered parameter (analysis/parameters.py): ``$'a'``, ``$1e5`` or
``$.5`` ask the client for no value and get no type, so a Parse of such a statement is answered (and the
statement refused later by the ordinary analysis) rather than failing inside Veil."""

from __future__ import annotations

import pytest

from proxy.errors import PolicyViolationError
from tests.unit.proxy.test_mutants_an_joins import classified
from tests.unit.proxy.test_mutants_anD_parameters import prepared


@pytest.mark.parametrize("placeholder", ["$'a'", "$1e5", "$.5"])
def test_a_dollar_without_digits_is_no_numbered_parameter(placeholder: str) -> None:
    statement = prepared(f"SELECT COUNT(*) FROM visits WHERE age > {placeholder} AND cost < $1")
    assert (statement.parameter_count, dict(statement.inferred_types)) == (1, {1: "float8"})
    bound = statement.bind([7])
    assert bound is not None
    assert bound.sql(dialect="postgres").endswith("AND cost < 7")


def test_such_a_statement_is_then_refused_by_the_ordinary_analysis() -> None:
    with pytest.raises(PolicyViolationError) as refused:
        classified("SELECT COUNT(*) FROM visits WHERE age > $'a'")
    assert refused.value.message == "Parameter is not allowed in WHERE of a query on private data"
