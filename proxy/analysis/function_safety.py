"""Every function and operator accepted on private values, and how each engine is kept from failing on it.

A query that fails on one row reveals that row: ``CASE WHEN id = 42 AND age = 37 THEN 1 % 0 END``
fails exactly when person 42 is 37, and a failure is an answer without noise. So every node type
that may appear in a WHERE condition, a GROUP BY key or an aggregate's argument is listed here, with
what makes it unable to fail on any single row:

- **total as is** — it cannot fail on any value it can be given;
- **total after rewrite** — Veil rewrites it so that it cannot (DuckDB: ``TRY(…)`` turns any runtime
  failure into NULL; PostgreSQL has no TRY, so divisors are guarded, numbers computed as NUMERIC,
  domains checked with CASE… — proxy/rewrite/safe_predicates.py);
- **arguments validated** — the arguments that choose what it does must be literals of an accepted
  form (and, for date arithmetic, of an accepted type), checked before any engine query runs, on
  every engine (analysis/argument_checks.py).

``SCALAR_NODES`` (the allow-list of analysis/checks.py) is derived from this table, and the rewrites
of safe_predicates.py and the function list of docs/sql.md are tested against it: nothing is accepted
without a declared treatment, and the docs say what the code does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from sqlglot import exp

from proxy.analysis import argument_checks as arguments
from proxy.config import TablePolicy


class Treatment(StrEnum):
    TOTAL = "total as is"
    REWRITTEN = "total after rewrite"


@dataclass(frozen=True)
class Handling:
    """What one engine does with a family: a treatment, and in a few words which rewrite."""

    treatment: Treatment
    how: str = ""

    def __str__(self) -> str:
        return f"{self.treatment.value}: {self.how}" if self.how else self.treatment.value


@dataclass(frozen=True)
class ArgumentCheck:
    """A check of constant arguments, run with the allow-list (analysis/checks.py) on every engine."""

    what: str
    run: Callable[[exp.Expression], None]


@dataclass(frozen=True)
class KindCheck:
    """A check that needs the columns' types, run when the expression is made error-free for its
    engine (rewrite/safe_predicates.py) — on every engine, before any engine query."""

    what: str
    run: Callable[[exp.Expression, TablePolicy], None]


@dataclass(frozen=True)
class FunctionSafety:
    family: str  # the name in docs/sql.md
    sql: str  # how an analyst writes it
    duckdb: Handling
    postgres: Handling
    check: ArgumentCheck | None = None
    kind_check: KindCheck | None = None

    @property
    def checks(self) -> str:
        """What is validated before execution, on every engine (for docs/sql.md)."""
        return "; ".join(check.what for check in (self.check, self.kind_check) if check is not None)


TOTAL = Handling(Treatment.TOTAL)
TRY = Handling(Treatment.REWRITTEN, "evaluated under TRY(…): a failure becomes NULL")
NUMERIC = Handling(Treatment.TOTAL, "its operands are NUMERIC, which has no overflow at this size")

LITERALS = FunctionSafety(
    "number and string literals",
    "`42`, `1.5e3`, `'text'`",
    TOTAL,
    Handling(Treatment.REWRITTEN, "integer literals become NUMERIC, so no int4 arithmetic can overflow"),
    ArgumentCheck(
        "numbers of at most 400 characters and magnitude at most 1e308", arguments.check_number_literal
    ),
)
CONSTANTS = FunctionSafety("TRUE, FALSE, NULL", "`TRUE`, `NULL`", TOTAL, TOTAL)
GROUPING = FunctionSafety("parentheses and lists", "`(a + b)`, `IN (1, 2)`", TOTAL, TOTAL)
KEYWORDS = FunctionSafety(
    "type names and date parts",
    "the `INT` of `CAST(x AS INT)`, the `year` of `EXTRACT(year FROM d)`",
    TOTAL,
    TOTAL,
)
INTERVALS = FunctionSafety(
    "interval literals",
    "`INTERVAL '3' DAY`, `INTERVAL '90 days'`",
    TOTAL,
    TOTAL,
    ArgumentCheck(
        "one whole number and one unit (year, month, week, day, hour, minute, second), at most 2000 years",
        arguments.check_interval,
    ),
)
LOGIC = FunctionSafety("boolean logic", "`AND`, `OR`, `NOT`", TOTAL, TOTAL)
COMPARISONS = FunctionSafety(
    "comparisons",
    "`=`, `<>`, `<`, `<=`, `>`, `>=`, `IS [NOT] NULL`, `IS [NOT] DISTINCT FROM`, `IN (…)`, `BETWEEN`",
    TRY,  # an implicit cast of text to a number fails on DuckDB for the rows that hold other text
    Handling(Treatment.TOTAL, "operand types are resolved when the query is planned, for all rows alike"),
)
PATTERNS = FunctionSafety(
    "LIKE, ILIKE",
    "`name LIKE 'A%'`, `NOT ILIKE`",
    TOTAL,
    TOTAL,
    ArgumentCheck(
        "the pattern is a string literal that does not end with a lone backslash",
        arguments.check_like_pattern,
    ),
)
ADDITION = FunctionSafety(
    "addition and subtraction",
    "`a + b`, `a - b`, `born + 30`, `born - INTERVAL '1' YEAR`, `d1 - d2`",
    TRY,
    Handling(
        Treatment.REWRITTEN,
        "a date or timestamp operand is read only within years 1–9999 (NULL outside); date − date is NUMERIC; "
        "numbers are NUMERIC, and a query whose numbers could exceed NUMERIC's 131,072 digits is refused",
    ),
    kind_check=KindCheck(
        "a date moves only by an integer literal of at most 1,000,000 days or by an interval literal",
        arguments.check_moved,
    ),
)
MULTIPLICATION = FunctionSafety(
    "multiplication",
    "`a * b`",
    TRY,
    Handling(
        Treatment.TOTAL,
        "on NUMERIC operands; a query whose numbers could exceed NUMERIC's 131,072 digits is refused",
    ),
    kind_check=KindCheck("no interval is multiplied", arguments.check_not_scaling_an_interval),
)
DIVISION = FunctionSafety(
    "division and remainder",
    "`a / b`, `div(a, b)`, `a % b`, `mod(a, b)`",
    TRY,
    Handling(
        Treatment.REWRITTEN,
        "the divisor becomes NULLIF(divisor, 0); integer operands divide as integers (truncated); NUMERIC "
        "with its magnitude bounded as for multiplication",
    ),
    kind_check=KindCheck("no interval is divided", arguments.check_not_scaling_an_interval),
)
SIGNS = FunctionSafety(
    "sign and rounding to integers",
    "`-x`, `abs`, `sign`, `floor`, `ceil`",
    TRY,  # -x and abs(x) overflow on the smallest BIGINT
    NUMERIC,
)
ROUNDING = FunctionSafety(
    "ROUND",
    "`round(x)`, `round(x, 2)`",
    TOTAL,
    NUMERIC,
    ArgumentCheck("the digits are an integer literal from -100 to 100", arguments.check_round_digits),
)
# DuckDB does not fail on these: it answers NaN or ±Infinity, which compare as numbers there. The
# PostgreSQL guards are applied on it too, so that each row is NULL where PostgreSQL's would be.
AS_POSTGRESQL = "the PostgreSQL guard (NULL where DuckDB would answer NaN or ±Infinity), under TRY(…)"
ROOTS = FunctionSafety(
    "square root",
    "`sqrt(x)`",
    Handling(Treatment.REWRITTEN, AS_POSTGRESQL),
    Handling(Treatment.REWRITTEN, "CASE WHEN x >= 0 THEN sqrt(x) END"),
)
LOGARITHMS = FunctionSafety(
    "logarithms",
    "`ln(x)`, `log(x)`, `log(b, x)`",
    Handling(Treatment.REWRITTEN, AS_POSTGRESQL),
    Handling(Treatment.REWRITTEN, "computed only for x > 0 (and b > 0, b ≠ 1); NULL otherwise"),
)
EXPONENTIALS = FunctionSafety(
    "exponential",
    "`exp(x)`",
    Handling(Treatment.REWRITTEN, AS_POSTGRESQL),
    Handling(Treatment.REWRITTEN, "computed only for x ≤ 709 (a finite double)"),
)
POWERS = FunctionSafety(
    "power",
    "`power(a, b)`, `a ^ b`",
    Handling(Treatment.REWRITTEN, AS_POSTGRESQL),
    Handling(
        Treatment.REWRITTEN,
        "computed only when defined (0 to a power ≥ 0; a negative base to an integer power) and at most "
        "e^709; NULL otherwise",
    ),
)
CASTS = FunctionSafety(
    "CAST",
    "`CAST(x AS type)`, `x::type`, `TRY_CAST`",
    Handling(Treatment.REWRITTEN, "CAST becomes TRY_CAST: a value that does not convert becomes NULL"),
    Handling(
        Treatment.REWRITTEN,
        "to text: kept; a number to REAL, DOUBLE PRECISION or NUMERIC: the NUMERIC value itself; a number to "
        "an integer type: NULL outside the type's range (rounding half away from zero, as NUMERIC does); a "
        "date to a timestamp: within years 1–9999; a literal: kept (it converts when the query is planned, "
        "for all rows alike); any other cast of a row's value (text to a number or a date, …) is refused",
    ),
    ArgumentCheck(
        "the target is a type both engines have (integers, real, double precision, numeric, text, varchar, "
        "char, date, timestamp, boolean, interval)",
        arguments.check_cast_target,
    ),
)
CHOICES = FunctionSafety("conditionals", "`CASE`, `COALESCE`, `NULLIF`, `GREATEST`, `LEAST`", TOTAL, TOTAL)
TEXT = FunctionSafety(
    "text functions", "`lower`, `upper`, `trim`, `btrim`, `||`, `concat`, `concat_ws`", TOTAL, TOTAL
)
TEXT_POSITIONS = FunctionSafety(
    "LENGTH, POSITION",
    "`length(s)`, `char_length(s)`, `position(t IN s)`, `strpos(s, t)`",
    TOTAL,
    Handling(Treatment.REWRITTEN, "the result is NUMERIC, so no int4 arithmetic can overflow"),
)
SUBSTRINGS = FunctionSafety(
    "SUBSTRING",
    "`substring(s, 1, 3)`, `substring(s FROM 2 FOR 3)`",
    TOTAL,
    TOTAL,
    ArgumentCheck(
        "start and length are integer literals, the length at least 0 (no regular-expression form)",
        arguments.check_substring_positions,
    ),
)
EXTRACTS = FunctionSafety(
    "EXTRACT",
    "`EXTRACT(year FROM d)`, `date_part('year', d)`",
    TRY,
    Handling(
        Treatment.REWRITTEN,
        "a time part (hour, minute, second…) of a date is read from the date as a timestamp (0), within years 1–9999",
    ),
    ArgumentCheck("the part is a literal both engines know", arguments.check_date_part),
    KindCheck("the argument is a date or a timestamp", arguments.check_moment_argument),
)
TRUNCATIONS = FunctionSafety(
    "date_trunc",
    "`date_trunc('month', d)`",
    TRY,
    Handling(Treatment.REWRITTEN, "the date or timestamp is read only within years 1–9999 (NULL outside)"),
    ArgumentCheck(
        "the unit is a literal both engines know; no time zone argument", arguments.check_trunc_unit
    ),
    KindCheck("the argument is a date or a timestamp", arguments.check_moment_argument),
)
TODAY = FunctionSafety("CURRENT_DATE", "`current_date`", TOTAL, TOTAL)

FUNCTIONS: dict[type[exp.Expression], FunctionSafety] = {
    exp.Literal: LITERALS,
    exp.Boolean: CONSTANTS,
    exp.Null: CONSTANTS,
    exp.Paren: GROUPING,
    exp.Tuple: GROUPING,
    exp.DataType: KEYWORDS,
    exp.Var: KEYWORDS,
    exp.Interval: INTERVALS,
    exp.And: LOGIC,
    exp.Or: LOGIC,
    exp.Not: LOGIC,
    exp.Xor: LOGIC,
    exp.EQ: COMPARISONS,
    exp.NEQ: COMPARISONS,
    exp.GT: COMPARISONS,
    exp.GTE: COMPARISONS,
    exp.LT: COMPARISONS,
    exp.LTE: COMPARISONS,
    exp.Is: COMPARISONS,
    exp.In: COMPARISONS,
    exp.Between: COMPARISONS,
    exp.NullSafeEQ: COMPARISONS,
    exp.NullSafeNEQ: COMPARISONS,
    exp.Like: PATTERNS,
    exp.ILike: PATTERNS,
    exp.Add: ADDITION,
    exp.Sub: ADDITION,
    exp.Mul: MULTIPLICATION,
    exp.Div: DIVISION,
    exp.IntDiv: DIVISION,
    exp.Mod: DIVISION,
    exp.Neg: SIGNS,
    exp.Abs: SIGNS,
    exp.Sign: SIGNS,
    exp.Floor: SIGNS,
    exp.Ceil: SIGNS,
    exp.Round: ROUNDING,
    exp.Sqrt: ROOTS,
    exp.Ln: LOGARITHMS,
    exp.Log: LOGARITHMS,
    exp.Exp: EXPONENTIALS,
    exp.Pow: POWERS,
    exp.Cast: CASTS,
    exp.TryCast: CASTS,
    exp.Case: CHOICES,
    exp.If: CHOICES,
    exp.Coalesce: CHOICES,
    exp.Nullif: CHOICES,
    exp.Greatest: CHOICES,
    exp.Least: CHOICES,
    exp.Lower: TEXT,
    exp.Upper: TEXT,
    exp.Trim: TEXT,
    exp.DPipe: TEXT,
    exp.Concat: TEXT,
    exp.ConcatWs: TEXT,
    exp.Length: TEXT_POSITIONS,
    exp.StrPosition: TEXT_POSITIONS,
    exp.Substring: SUBSTRINGS,
    exp.Extract: EXTRACTS,
    exp.TimestampTrunc: TRUNCATIONS,
    exp.DateTrunc: TRUNCATIONS,
    exp.CurrentDate: TODAY,
}
SCALAR_NODES: tuple[type[exp.Expression], ...] = tuple(FUNCTIONS)


def families() -> list[FunctionSafety]:
    """Each family once, in the table's order (for docs/sql.md)."""
    return list(dict.fromkeys(FUNCTIONS.values()))


def rewritten_on_postgres() -> frozenset[type[exp.Expression]]:
    """The node types whose PostgreSQL treatment is a rewrite: safe_predicates.py has one rule for each."""
    return frozenset(t for t, safety in FUNCTIONS.items() if safety.postgres.treatment is Treatment.REWRITTEN)


def check_constant_arguments(node: exp.Expression) -> None:
    """Run the node's argument check, if its family has one (before any engine query)."""
    safety = FUNCTIONS.get(type(node))
    if safety is not None and safety.check is not None:
        safety.check.run(node)


def check_argument_kinds(expression: exp.Expression, *, table: TablePolicy) -> None:
    """Run the kind checks of every node of ``expression`` (before any engine query, on every engine)."""
    for node in expression.walk():
        safety = FUNCTIONS.get(type(node))
        if safety is not None and safety.kind_check is not None:
            safety.kind_check.run(node, table)
