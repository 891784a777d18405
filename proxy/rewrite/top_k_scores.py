"""The engine query behind a DP top-k selection: the number of distinct people of every key.

Rows are filtered and keys outside their public domains dropped exactly as for any GROUP BY
(bound_contributions.py). No contribution bound is applied: a person adds at most 1 to any key's number
of people, whatever the number of keys they have — the selection's sensitivity. With partitions (top k
per group), each person is counted only in their **first partition** (the smallest partition key, NULLs
left out), so that one person can change the scores of one partition only and the partitions' selections
compose in parallel.

>>> top_k_score_query(shape, partition=(), dialect="duckdb").sql()  # … GROUP BY genre ORDER BY … LIMIT 10
SELECT _dp_key_0, COUNT(DISTINCT _dp_unit) AS _dp_score FROM (SELECT user_id AS _dp_unit, genre AS
_dp_key_0 FROM ratings WHERE …) AS _dp_rows GROUP BY _dp_key_0
"""

from __future__ import annotations

from sqlglot import exp

from proxy.analysis.shape import QueryShape
from proxy.rewrite.bound_contributions import UNIT, _filtered_rows, key_alias, table_node

SCORE = "_dp_score"
HOME = "_dp_home"


def top_k_score_query(shape: QueryShape, *, partition: tuple[int, ...], dialect: str) -> exp.Select:
    """(keys…, number of distinct people) per key, each person in one partition only."""
    assert shape.table.privacy_unit is not None, "a DP top-k selection counts people"
    rows = _filtered_rows(shape, (), dialect=dialect)
    keys = [exp.column(key_alias(i)) for i in range(len(shape.group_keys))]
    unit = exp.column(UNIT)
    if not partition:
        score = exp.Count(this=exp.Distinct(expressions=[unit])).as_(SCORE)
        return (
            exp.select(*keys, score, copy=False)
            .from_(rows.subquery("_dp_rows"), copy=False)
            .group_by(*(key.copy() for key in keys), copy=False)
        )
    parts = [exp.column(key_alias(i)) for i in partition]
    known = exp.and_(*(part.copy().is_(exp.null()).not_() for part in parts))
    cells = (
        exp.select(unit.copy(), *(key.copy() for key in keys), copy=False)
        .distinct()
        .from_(rows.subquery("_dp_rows"), copy=False)
        .where(known, copy=False)
    )
    first = exp.Window(
        this=exp.RowNumber(),
        partition_by=[unit.copy()],
        order=exp.Order(expressions=[exp.Ordered(this=part.copy()) for part in parts]),
    )
    ranked = exp.select(unit.copy(), *(part.copy() for part in parts), first.as_(HOME), copy=False).from_(
        exp.select(unit.copy(), *(part.copy() for part in parts), copy=False)
        .distinct()
        .from_(table_node("_dp_cells"), copy=False)
        .subquery("_dp_partitions"),
        copy=False,
    )
    homes = (
        exp.select(unit.copy(), *(part.copy() for part in parts), copy=False)
        .from_(ranked.subquery("_dp_ranked"), copy=False)
        .where(exp.EQ(this=exp.column(HOME), expression=exp.Literal.number(1)), copy=False)
    )
    using = [exp.to_identifier(UNIT), *(exp.to_identifier(key_alias(i)) for i in partition)]
    query = (
        exp.select(*keys, exp.Count(this=exp.Star()).as_(SCORE), copy=False)
        .from_(table_node("_dp_cells"), copy=False)
        .join(table_node("_dp_homes"), using=using, copy=False)
        .group_by(*(key.copy() for key in keys), copy=False)
    )
    return query.with_(exp.TableAlias(this=exp.to_identifier("_dp_cells")), as_=cells, copy=False).with_(
        exp.TableAlias(this=exp.to_identifier("_dp_homes")), as_=homes, copy=False
    )
