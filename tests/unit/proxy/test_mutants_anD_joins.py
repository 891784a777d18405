"""Joins of private tables on the privacy unit and of lookup tables on their key: the joined table Veil
builds (its rows, columns, privacy unit and bound) and the joins it refuses (analysis/unit_join.py,
lookup_join.py)."""

from __future__ import annotations

import pytest

from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery
from proxy.errors import PolicyViolationError
from tests.unit.proxy.test_mutants_an_joins import JOIN_HINT, classified

LOOKUP_HINT = "join public lookup tables on their key: FROM private_table p JOIN lookup_table l ON p.column = l.<declared key>"
VISITS_ROWS = (
    "SELECT v.patient_id AS v__patient_id, v.age AS v__age, v.cost AS v__cost, v.note AS v__note, "
    "v.region AS v__region, v.sex AS v__sex, "
)


def shape_of(sql: str) -> QueryShape:
    statement = classified(sql)
    assert isinstance(statement, PrivateQuery)
    return statement.shape


def refusal(sql: str) -> PolicyViolationError:
    with pytest.raises(PolicyViolationError) as refused:
        classified(sql)
    return refused.value


def test_a_join_on_the_unit_reads_every_column_of_both_tables_renamed() -> None:
    """The engine query is rebuilt from the checked parts only, each column under ``alias__column``."""
    shape = shape_of("SELECT COUNT(*) FROM visits V JOIN patients P ON P.PATIENT_ID = V.PATIENT_ID")
    assert shape.source is not None
    assert shape.source.select.sql(dialect="postgres") == (
        VISITS_ROWS + "p.patient_id AS p__patient_id, p.age AS p__age, p.sex AS p__sex "
        "FROM visits AS v JOIN patients AS p ON P.PATIENT_ID = V.PATIENT_ID"
    )
    assert shape.source.table is shape.table
    table = shape.table
    assert (table.name, table.privacy_unit, table.max_contributions) == ("_dp_joined", "v__patient_id", 3)
    assert list(table.columns) == [
        "v__patient_id", "v__age", "v__cost", "v__note", "v__region", "v__sex",
        "p__patient_id", "p__age", "p__sex",
    ]  # fmt: skip
    assert all(name == column.name for name, column in table.columns.items())
    assert (table.columns["p__age"].lower, table.columns["p__age"].upper) == (0, 100)


def test_a_join_using_the_unit_keeps_using() -> None:
    shape = shape_of(
        "SELECT COUNT(*) FROM patients p JOIN visits v USING (patient_id) JOIN visits w USING (patient_id)"
    )
    assert shape.source is not None
    assert shape.source.select.sql(dialect="postgres").endswith(
        "FROM patients AS p JOIN visits AS v USING (patient_id) JOIN visits AS w USING (patient_id)"
    )
    assert (shape.table.privacy_unit, shape.table.max_contributions) == ("p__patient_id", 1 * 3 * 3)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT COUNT(*) FROM visits v LEFT JOIN patients p ON v.patient_id = p.patient_id",
            "only inner joins of private tables are supported",
        ),
        (
            "SELECT COUNT(*) FROM visits v CROSS JOIN patients p",
            "only inner joins of private tables are supported",
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN patients p USING (age)",
            "USING must name exactly the privacy unit of both tables",
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id OR 1 = 1",
            "the join condition must be one equality of the two tables' privacy units",
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN patients p ON p.patient_id = p.patient_id",
            "the join condition must be one equality of the two tables' privacy units",
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN ratings r ON v.patient_id = r.user_id",
            'table "ratings" chooses max_contributions per query ("auto"); joins need fixed bounds',
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN people r ON v.patient_id = r.income",
            'table "people" has no privacy-unit column to join on',
        ),
    ],
)
def test_a_join_that_could_pair_different_people_is_refused(sql: str, message: str) -> None:
    """A person's joined rows are bounded by the product of their bounds only when rows of different
    people never meet."""
    error = refusal(sql)
    assert (error.sqlstate, error.message, error.hint) == ("42501", message, JOIN_HINT)


def test_a_lookup_join_adds_the_lookup_tables_public_columns() -> None:
    shape = shape_of("SELECT COUNT(*) FROM visits V LEFT OUTER JOIN zones Z ON Z.CODE = V.NOTE")
    assert shape.source is not None
    assert shape.source.select.sql(dialect="postgres") == (
        VISITS_ROWS
        + "z.code AS z__code, z.zone AS z__zone FROM visits AS v LEFT JOIN zones AS z ON Z.CODE = V.NOTE"
    )
    assert shape.source.lookup_keys == (("zones", "code"),)
    assert shape.source.table is shape.table
    table = shape.table
    assert (table.name, table.privacy_unit, table.max_contributions) == ("_dp_joined", "v__patient_id", 3)
    assert {name: column.public for name, column in table.columns.items()} == {
        "v__patient_id": False, "v__age": False, "v__cost": False, "v__note": False,
        "v__region": True, "v__sex": True, "z__code": True, "z__zone": True,
    }  # fmt: skip
    assert table.columns["z__zone"].name == "z__zone"


def test_two_lookup_joins_are_each_checked_unique() -> None:
    shape = shape_of(
        "SELECT COUNT(*) FROM visits v JOIN zones z ON v.note = z.code INNER JOIN zones y ON y.code = z.zone"
    )
    assert shape.source is not None
    assert shape.source.lookup_keys == (("zones", "code"), ("zones", "code"))
    assert shape.source.select.sql(dialect="postgres").endswith(
        "FROM visits AS v JOIN zones AS z ON v.note = z.code JOIN zones AS y ON y.code = z.zone"
    )


def test_a_lookup_join_of_a_table_with_automatic_bounds_keeps_them_automatic() -> None:
    shape = shape_of("SELECT COUNT(*) FROM ratings r JOIN zones z ON r.user_id = z.code")
    assert (shape.table.privacy_unit, shape.table.auto_contributions) == ("r__user_id", True)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT COUNT(*) FROM visits v RIGHT JOIN zones z ON v.note = z.code",
            "only inner and left joins with lookup tables are supported",
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN zones z ON v.note <> z.code",
            "the join condition must be one equality with the lookup table's key",
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN zones z ON v.note = z.code AND 1 = 1",
            "the join condition must be one equality with the lookup table's key",
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN zones z ON z.zone = z.code",
            "the join must match a column of a table joined before it",
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN zones z ON v.nothing = z.code",
            "the join must match a column of a table joined before it",
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN zones z ON v.note = z.zone",
            'the join must use the key "z.code" of the lookup table',
        ),
        (
            "SELECT COUNT(*) FROM zones z JOIN visits v ON v.note = z.code",
            "a lookup join reads one private table first, then public lookup tables",
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
            "JOIN zones z ON z.code = v.note",
            "a lookup join reads one private table first, then public lookup tables",
        ),
    ],
)
def test_a_lookup_join_that_could_repeat_a_row_is_refused(sql: str, message: str) -> None:
    """Off the unique key (or not an equality) one private row could meet several lookup rows, and one
    person change more rows than the bound says."""
    error = refusal(sql)
    assert (error.sqlstate, error.message, error.hint) == ("42501", message, LOOKUP_HINT)
