"""Keep a pinned statement's engine query to people whose every row holds one value of the partition
column — the condition under which parallel composition across statements is sound.

A statement pinned to ``region = 'north'`` (analysis/partitions.py) is charged only to the north. That
is sound only if adding or removing one person changes the answers pinned to one region at most: a
person with rows in two regions would be read by the north's statements and the south's, each charged
apart. The policy's ``partition = true`` asserts that no such person exists; this guard makes the
engine hold to it anyway. It drops, from a pinned query, every person with a row whose partition value
differs from another of their rows (NULL included), and rows without a privacy unit (their person is
unknown). Whether a person is kept then depends on their own rows only, and a kept person's rows all
hold the one value the statement is charged to — so a person in the south changes no answer pinned
to the north. If the assertion holds, nobody is dropped and the answer is unchanged.

A table whose rows are people (``privacy_unit = "row"``) needs no guard: each person is one row.

>>> partition_guard(shape).sql("duckdb")  # visits, privacy unit patient_id, partition column region
'NOT visits.patient_id IS NULL AND NOT EXISTS(SELECT 1 FROM visits AS _dp_same_person WHERE
_dp_same_person.patient_id = visits.patient_id AND _dp_same_person.region IS DISTINCT FROM visits.region)'
"""

from __future__ import annotations

from sqlglot import exp

from proxy.analysis.shape import QueryShape

SAME_PERSON = "_dp_same_person"


def partition_guard(shape: QueryShape) -> exp.Expression | None:
    """The condition to AND into a pinned query's WHERE (over the table itself, unaliased); None when
    the statement is not pinned or the table's rows are people."""
    unit = shape.table.privacy_unit
    if shape.partition is None or unit is None:
        return None
    table, column = shape.table.name, shape.partition.column
    other_value = exp.and_(
        exp.EQ(this=exp.column(unit, table=SAME_PERSON), expression=exp.column(unit, table=table)),
        exp.NullSafeNEQ(
            this=exp.column(column, table=SAME_PERSON), expression=exp.column(column, table=table)
        ),
        copy=False,
    )
    same_person = exp.Table(
        this=exp.to_identifier(table), alias=exp.TableAlias(this=exp.to_identifier(SAME_PERSON))
    )
    rows = (
        exp.select(exp.Literal.number(1), copy=False)
        .from_(same_person, copy=False)
        .where(other_value, copy=False)
    )
    known = exp.column(unit, table=table).is_(exp.null()).not_()
    return exp.and_(known, exp.Not(this=exp.Exists(this=rows)), copy=False)
