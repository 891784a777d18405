"""The group keys of a join with a public lookup table (analysis/shape.py ``_Scope.lookup``): a key of the
lookup table's own column takes its values from that public table, and a key of a private column never
does — its values come from the policy's declared bounds, so no key is read from private rows.

Joined columns are stored as ``<alias>__<column>``; an alias or a column name may itself hold ``__``.
An alias such as ``z__x`` used to lose its lookup table, and the query failed with an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import parse_config
from proxy.query.service import QueryService
from tests.unit.proxy.policy_fixture import POLICY
from tests.unit.proxy.test_service_answers import run, service  # noqa: F401  (the DuckDB service fixture)


def test_a_private_columns_key_in_a_lookup_join_takes_every_value_its_bounds_allow(
    service: QueryService,  # noqa: F811
) -> None:
    """age is private, declared in [0, 100]: the decades are 0 … 10, all shown. The visits' ages are
    20 … 69; keys taken from them (2 … 6 only) would tell which decades hold people."""
    outcome = run(
        service,
        "SELECT FLOOR(v.age / 10) AS decade, COUNT(*) AS n FROM visits v JOIN zones z ON v.region = z.code "
        "GROUP BY 1",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None
    assert sorted(decade for decade, _ in outcome.table.rows) == list(range(11))


@pytest.mark.parametrize("alias", ["z__x", "zx__"])
def test_a_lookup_table_aliased_with_two_underscores_still_gives_its_values(
    service: QueryService,  # noqa: F811
    alias: str,
) -> None:
    outcome = run(
        service,
        f"SELECT upper({alias}.zone) AS zone, COUNT(*) AS n FROM visits v JOIN zones {alias} "
        f"ON v.region = {alias}.code GROUP BY 1",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None
    assert sorted(zone for zone, _ in outcome.table.rows) == ["NORTH", "SOUTH"]


def test_a_lookup_column_named_with_two_underscores_is_read_from_the_lookup_table() -> None:
    """zones.zone__label: the key's values are that column of zones (not a table "z__zone")."""
    text = POLICY.replace(
        'zone = { type = "text" }\n', 'zone = { type = "text" }\nzone__label = { type = "text" }\n'
    )
    assert text != POLICY
    dataset = parse_config(text, path=Path("/nonexistent/veil.toml")).dataset("clinic")
    assert dataset is not None
    (tree,) = parse_statements(
        "SELECT z.zone__label, COUNT(*) FROM visits v JOIN zones z ON v.region = z.code GROUP BY 1"
    )
    statement = classify(tree, dataset)
    assert isinstance(statement, PrivateQuery)
    (key,) = statement.shape.group_keys
    assert (key.lookup, key.thresholded) == (("zones", "zone__label"), False)
