"""Error probes: no function accepted on private values may fail because of one person's row.

For every family of analysis/function_safety.py, adversarial arguments (division by zero, overflow,
invalid units and fields, bad casts, bad LIKE escapes, huge ROUND digits, huge literals, dates
pushed out of range, square roots of negatives…) are reached by one row only — ``CASE WHEN <that
row> THEN <probe> END`` — in a WHERE condition, inside an aggregate, in a GROUP BY key whose keys
come from the data, and in one whose key domain Veil derives by evaluating the key over public
values. Each probe is aimed at an ordinary person (42), at a person with extreme values (43) and at
nobody: all three must end the same way — answered, or refused before any engine query with the
same error. An engine error, or a refusal after an engine query ran, fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from proxy.analysis.function_safety import families
from proxy.errors import ProxyError
from proxy.query.service import Principal, QueryService
from proxy.settings import SessionSettings
from tests.adversarial.error_probe_dataset import ANALYST, RecordingBackend, error_probe_service


@dataclass(frozen=True)
class Placement:
    """Where a probe is put: the query around it, the columns its placeholders stand for, and the
    conditions that select one row (the last selects none)."""

    name: str
    sql: str
    columns: dict[str, str]
    gates: tuple[str, ...]
    settings: tuple[tuple[str, str], ...] = ()


OF_THE_ROW = {"x": "age", "r": "income", "s": "name", "d": "born"}
PLACEMENTS = (
    Placement(
        "where",
        "SELECT COUNT(*) FROM people WHERE (CASE WHEN {gate} THEN {probe} END) IS NOT NULL",
        OF_THE_ROW,
        ("id = 42", "id = 43", "id = 4242"),
    ),
    Placement(
        "aggregate",
        "SELECT COUNT(CASE WHEN {gate} THEN {probe} END) FROM people",
        OF_THE_ROW,
        ("id = 42", "id = 43", "id = 4242"),
    ),
    Placement(  # a key of one private column: its keys come from the data (τ-thresholding)
        "key from the data",
        "SELECT COUNT(*) FROM people GROUP BY CASE WHEN {gate} THEN {probe} END",
        {
            "x": "EXTRACT(DOY FROM born)",
            "r": "EXTRACT(EPOCH FROM born)",
            "s": "CAST(born AS TEXT)",
            "d": "born",
        },
        ("born = DATE '1987-05-05'", "born = DATE 'infinity'", "born = DATE '1111-11-11'"),
        (("veil.delta", "1e-6"),),
    ),
    Placement(  # a key of a bounded integer: Veil evaluates it over 0..100 to derive its domain
        "key over a public domain",
        "SELECT COUNT(*) FROM people GROUP BY CASE WHEN {gate} THEN {probe} END",
        {"x": "age", "r": "age * 0.5", "s": "CAST(age AS TEXT)", "d": "DATE '2000-01-01'"},
        ("age = 37", "age = 1000"),
    ),
)


@dataclass(frozen=True)
class Probe:
    family: str  # a family of analysis/function_safety.py
    sql: str  # {x} a number, {r} a real number, {s} a text, {d} a date


def probes(family: str, *sqls: str) -> list[Probe]:
    return [Probe(family, sql) for sql in sqls]


HUGE_PRODUCT = " * ".join(["{r}"] * 60)  # within the complexity budget, far beyond a double
PROBES = [
    *probes(
        "number and string literals",
        "{x} * 1e100000 * 1e100000",
        "{x} * '1e100000' * '1e100000'",
        "{x} * 1e300 * 1e300 * 1e300",
        "CASE WHEN {x} > 0 THEN 2000000000 ELSE 0 END * 2",
        "{x} + 9223372036854775807",
    ),
    *probes("TRUE, FALSE, NULL", "CASE WHEN TRUE THEN NULL ELSE {x} / 0 END", "NULLIF(TRUE, {x} % 0 > 1)"),
    *probes("parentheses and lists", "{x} IN ({x} / 0, 1)", "(({x}) / (0))"),
    *probes("type names and date parts", "CAST({s} AS INTERVAL)", "CAST({x} AS regclass)"),
    *probes(
        "interval literals",
        "{d} + INTERVAL '1000000 years'",
        "{d} + INTERVAL '1 year 2 months'",
        "{d} - INTERVAL '2000' YEAR",
        "{d} + INTERVAL ({x}) DAY",
    ),
    *probes("boolean logic", "NOT ({x} / 0 > 1)", "({x} % 0 = 1) OR ({x} > 0)"),
    *probes(
        "comparisons",
        "{x} / 0 = 1",
        "{x} BETWEEN {x} / 0 AND 2",
        "{x} IS NOT DISTINCT FROM {x} % 0",
        "({x} / 0) IS NULL",
    ),
    *probes(
        "LIKE, ILIKE",
        r"{s} LIKE 'a\'",
        "'abc' LIKE {s}",
        "{s} ILIKE ({s} || '%')",
        "{s} LIKE 'A!%' ESCAPE '!'",
    ),
    *probes(
        "addition and subtraction",
        "-9223372036854775807 - {x} - 2",
        "{d} + 100000000",
        "{d} - 2147483647",
        "{d} + {x}",
        "{d} - {d}",
        "{d} - CAST('infinity' AS DATE)",
        "{d} + 1000000 + 1000000 + 1000000",
        "(CAST({d} AS TIMESTAMP) - CAST('0001-01-01' AS TIMESTAMP)) * 2",
        "{d} + (CAST({d} AS TIMESTAMP) - CAST('0001-01-01' AS TIMESTAMP))",
    ),
    *probes(
        "multiplication",
        "{x} * 9223372036854775807 * 9223372036854775807",
        "{r} * {r} * {r}",
        HUGE_PRODUCT,
        "INTERVAL '1' DAY * {x}",
        "INTERVAL '1' DAY * 1e300",
        "length({s}) * 2000000000",
    ),
    *probes(
        "division and remainder",
        "{x} / 0",
        "{x} / ({x} - {x})",
        "1 / ({x} / ({r} - {r}))",
        "div({x}, 0)",
        "{x} % 0",
        "mod({x}, {x} - {x})",
        "({x} * 0 - 9223372036854775807 - 1) / -1",
        "INTERVAL '1' DAY / ({x} - {x})",
        "{r} / (1e-300 * {x} - 1e-300 * {x} + 1e-300) / 1e-300 / 1e-300 / 1e-300",
        " / ".join(["{r}"] + ["({r} - {r} + 1e-300)"] * 9),
    ),
    *probes(
        "sign and rounding to integers",
        "-({x} * 0 - 9223372036854775807 - 1)",
        "abs({x} * 0 - 9223372036854775807 - 1)",
        "floor({r} * 1e300 * 1e300)",
        "ceil({x} / 0)",
        "sign({x} % 0)",
    ),
    *probes(
        "ROUND", "round({r}, 100000)", "round({r}, {x})", "round({r}, 2147483648)", "round({r} * 1e300, 100)"
    ),
    *probes("square root", "sqrt(-1 - {x})", "sqrt({x} - 38)"),
    *probes(
        "logarithms",
        "ln(0 * {x})",
        "ln(-{x})",
        "log(0 * {x})",
        "log(1 + 0 * {x}, 10)",
        "log(-{x}, 10)",
        "log({x} - 36, {x})",
    ),
    *probes("exponential", "exp({x} * 100000)", "exp(1e6 + {x})", "exp(-1e6 - {x})"),
    *probes(
        "power",
        "power({x}, 1000000)",
        "power(-1 - {x}, 0.5)",
        "power(0 * {x}, -1)",
        "{x} ^ {x}",
        "power({r}, {r})",
        "power(10, {x} * 1000)",
    ),
    *probes(
        "CAST",
        "CAST({s} AS INT)",
        "CAST({r} AS SMALLINT)",
        "CAST({x} * 1000000000000 AS INT)",
        "CAST({r} AS BIGINT)",
        "CAST({d} AS TIMESTAMP)",
        "CAST({s} AS DATE)",
        "TRY_CAST({s} AS INT)",
        "CAST('1e400' AS DOUBLE PRECISION) * {x}",
        "CAST({x} AS BOOLEAN)",
        "CAST({r} AS NUMERIC(3, 1))",
        "{x}::int2",
    ),
    *probes(
        "conditionals",
        "COALESCE({x} / 0, 1)",
        "NULLIF({x}, 0) / 0",
        "GREATEST({x}, 9223372036854775807) + 1",
        "LEAST({x} % 0, 1)",
        "CASE WHEN {x} > 0 THEN {x} / 0 ELSE 1 END",
    ),
    *probes(
        "text functions",
        "lower({s}) || ({x} / 0)",
        "upper({s} || {x} % 0)",
        "trim(both {s} from {s})",
        "concat({s}, {x} / 0)",
        "concat_ws({s}, {s}, {x} % 0)",
    ),
    *probes(
        "LENGTH, POSITION",
        "length({s}) * 2000000000",
        "strpos({s}, 'n') * 2147483647",
        "position('n' IN {s}) / 0",
    ),
    *probes(
        "SUBSTRING",
        "substring({s}, 1, -1)",
        "substring({s} FROM '(')",
        "substring({s}, {x}, 2)",
        "substring({s}, 1, 3000000000)",
        "substring({s}, -5, 8)",
    ),
    *probes(
        "EXTRACT",
        "EXTRACT(nonsense FROM {d})",
        "EXTRACT(hour FROM {d})",
        "date_part({s}, {d})",
        "EXTRACT(week FROM CAST({d} AS TIMESTAMP) - CAST({d} AS TIMESTAMP))",
        "EXTRACT(timezone FROM {d})",
        "EXTRACT(epoch FROM {d}) * 1e300 * 1e300",
    ),
    *probes(
        "date_trunc",
        "date_trunc('nonsense', {d})",
        "date_trunc({s}, {d})",
        "date_trunc('week', CAST({d} AS TIMESTAMP) - CAST({d} AS TIMESTAMP))",
        "date_trunc('millennium', {d} - 1000000)",
        "date_trunc('day', {d}, 'Mars/Olympus')",
        "date_trunc('month', {d})",
    ),
    *probes("CURRENT_DATE", "current_date + 2147483647", "current_date + {x} * 100000", "current_date - {d}"),
]


@pytest.fixture(scope="module", params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[QueryService]:
    """One service per engine for the module: the probes only read, and each is a query of its own."""
    directory: Path = tmp_path_factory.mktemp(request.param)
    with error_probe_service(request.param, directory, request) as service:
        yield service


def outcome(service: QueryService, sql: str, settings: tuple[tuple[str, str], ...]) -> str:
    """``answered``, or the error class, or — failing the test — an engine error or a late refusal."""
    recorder = service.backend
    assert isinstance(recorder, RecordingBackend)
    recorder.executed.clear()
    session = SessionSettings()
    for name, value in settings:
        session.set(name, value)
    (tree,) = service.parse(sql)
    try:
        service.run(tree, principal=Principal(ANALYST), settings=session)
    except ProxyError as error:
        late = f" after {len(recorder.executed)} engine queries" if recorder.executed else ""
        return f"{type(error).__name__} {error.sqlstate}{late}: {error.message}"
    return "answered"


@pytest.mark.parametrize("placement", PLACEMENTS, ids=[p.name for p in PLACEMENTS])
@pytest.mark.parametrize("probe", PROBES, ids=[p.sql for p in PROBES])
def test_a_probe_ends_the_same_way_whoever_it_reaches(
    service: QueryService, probe: Probe, placement: Placement
) -> None:
    text = probe.sql.format(**placement.columns)
    outcomes = {
        gate: outcome(service, placement.sql.format(gate=gate, probe=text), placement.settings)
        for gate in placement.gates
    }
    assert len(set(outcomes.values())) == 1, outcomes
    (only,) = set(outcomes.values())
    assert only == "answered" or ("engine queries" not in only and "58000" not in only), only


def test_every_family_is_probed() -> None:
    assert {safety.family for safety in families()} == {probe.family for probe in PROBES}
