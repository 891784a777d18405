"""The pipeline before the ledger: key domains, the contribution bound, the price and the engine SQL.

Everything here is decided from the policy and the query — except the two small, data-free or DP
steps that need an engine: GROUP BY expression domains (evaluated over VALUES lists, never a table)
and the DP choice of ``max_contributions = "auto"``. ``veil explain`` stops here; the query service
goes on to the ledger and the engine.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable
from typing import Any

from mechanisms.contribution_bound import dp_contribution_bound
from mechanisms.random_source import RandomSource
from proxy.analysis.intervals import is_integer
from proxy.analysis.quantities import Quantity, QuantityKind
from proxy.analysis.shape import GroupKey, QueryShape
from proxy.config import ColumnType, DatasetPolicy
from proxy.errors import InvalidParameterValueError, PolicyViolationError, UnsupportedQueryError
from proxy.release.apply import Histograms
from proxy.release.plan import (
    ReleasePlan,
    bound_matters,
    bound_selection_epsilon,
    bound_target_people,
    price_query,
    split_epsilon,
)
from proxy.release.top_k import price_top_k, selection_applies
from proxy.rewrite.bound_contributions import (
    QUANTILE_GRID,
    bounded_query,
    contributions_histogram_query,
    distinct_inputs,
    histogram_query,
    mode_histogram_query,
    value_histogram_query,
)
from proxy.rewrite.group_domains import domain_query, duplicate_keys_query, lookup_values_query
from proxy.rewrite.safe_predicates import refuse_what_could_fail
from proxy.rewrite.top_k_scores import top_k_score_query

MAX_GROUP_CELLS = 10_000
Execute = Callable[[str], tuple[list[tuple[str, str]], list[tuple[Any, ...]]]]


def checked_epsilon(dataset: DatasetPolicy, chosen: float | None) -> float:
    """The ε one query spends: the session's choice, else the dataset default, within
    [min_epsilon, max_epsilon]. The floor exists because what a query reveals outside its noise — that
    it failed, how long it took — is priced at its ε: at 1e-9 such probes would be free."""
    epsilon = dataset.default_epsilon if chosen is None else chosen
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise InvalidParameterValueError(f"epsilon must be greater than 0, got {epsilon:g}")
    if epsilon < dataset.min_epsilon:
        raise InvalidParameterValueError(
            f"veil.epsilon = {epsilon:g} is below this dataset's min_epsilon of {dataset.min_epsilon:g}",
            detail="every answer costs at least min_epsilon, so that nothing it reveals is free",
            hint=f"SET veil.epsilon to at least {dataset.min_epsilon:g}",
        )
    if epsilon > dataset.max_epsilon:
        raise InvalidParameterValueError(
            f"veil.epsilon = {epsilon:g} exceeds this dataset's max_epsilon of {dataset.max_epsilon:g}",
            hint=f"SET veil.epsilon to at most {dataset.max_epsilon:g}",
        )
    return epsilon


def resolve_group_domains(shape: QueryShape, *, execute: Execute, dialect: str) -> QueryShape:
    """Fill in the public key domain of each GROUP BY expression, evaluated by ``execute`` (the
    engine) over the values the policy allows — never over a private table. A lookup table's column
    takes its values from that (public) table. First of all, anything the engine could not evaluate
    without failing on some row is refused: before any engine query, even over public values."""
    refuse_what_could_fail(shape, dialect=dialect)
    _check_lookup_keys(shape, execute=execute, dialect=dialect)
    keys = []
    for key in shape.group_keys:
        if key.values is None and not key.thresholded:
            source = _lookup_values(key, execute=execute, dialect=dialect) if key.lookup else None
            if source is not None and (key.is_column or not source):
                raw = list(source)  # the column's values; an expression over no values has none
            else:
                sql = domain_query(key, table=shape.table, dialect=dialect, values=source).sql(
                    dialect=dialect
                )
                raw = [row[0] for row in execute(sql)[1] if row[0] is not None]
            type_ = _key_type(key, shape, raw)
            domain = {_typed(value, type_) for value in raw if _fits(value, type_)}
            key = key.with_domain(tuple(sorted(domain)), type_)
        keys.append(key)
    return shape.with_group_keys(tuple(keys))


def _lookup_values(key: GroupKey, *, execute: Execute, dialect: str) -> list[Any]:
    assert key.lookup is not None
    sql = lookup_values_query(*key.lookup).sql(dialect=dialect)
    return [row[0] for row in execute(sql)[1] if row[0] is not None]


def _check_lookup_keys(shape: QueryShape, *, execute: Execute, dialect: str) -> None:
    """A lookup key must be unique, or one private row could meet several lookup rows and count twice."""
    for table, key in shape.source.lookup_keys if shape.source is not None else ():
        sql = duplicate_keys_query(table, key).sql(dialect=dialect)
        if execute(sql)[1][0][0]:
            raise PolicyViolationError(
                f'the key "{key}" of lookup table "{table}" is not unique',
                hint="fix the lookup table, or declare a unique key column in the policy",
            )


def _key_type(key: GroupKey, shape: QueryShape, values: list[Any]) -> ColumnType:
    """Numbers are typed from the expression, as PostgreSQL types it — not from whichever Python type
    an engine hands back (PostgreSQL's NUMERIC arrives as Decimal, DuckDB's as float or int)."""
    for python_type, column_type in ((bool, ColumnType.BOOLEAN), (str, ColumnType.TEXT)):
        if values and all(isinstance(value, python_type) for value in values):
            return column_type
    if values and all(isinstance(value, datetime.date) for value in values):
        stamps = key.type is ColumnType.TIMESTAMP and all(isinstance(v, datetime.datetime) for v in values)
        return ColumnType.TIMESTAMP if stamps else ColumnType.DATE
    if is_integer(key.expression, shape.table):
        return ColumnType.INTEGER
    whole = values and all(_whole_number(value) for value in values)
    return ColumnType.INTEGER if key.type is ColumnType.INTEGER and whole else ColumnType.REAL


def _whole_number(value: Any) -> bool:
    """``EXTRACT(year FROM d)`` is typed an integer from the expression (analysis/key_types.py) though
    PostgreSQL computes a NUMERIC: its domain is integral, so its keys are integers."""
    try:
        return float(value).is_integer()
    except (TypeError, ValueError, OverflowError):
        return False


def _typed(value: Any, type_: ColumnType) -> Any:
    if value is None:
        return None
    if type_ is ColumnType.INTEGER:
        return int(value)
    if type_ is ColumnType.REAL:
        return float(value)
    if type_ is ColumnType.DATE and isinstance(value, datetime.datetime):
        return value.date()  # PostgreSQL's date_trunc of a date is a timestamp
    if type_ is ColumnType.TIMESTAMP and not isinstance(value, datetime.datetime):
        return datetime.datetime.combine(value, datetime.time())  # a type error for anything but a date
    if type_ is ColumnType.TIMESTAMP and value.tzinfo is not None:  # an engine's timestamptz: read in UTC
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    return value


_PYTHON_TYPES: dict[ColumnType, type] = {
    ColumnType.DATE: datetime.date,
    ColumnType.TIMESTAMP: datetime.datetime,
    ColumnType.BOOLEAN: bool,
}


def _fits(value: Any, type_: ColumnType) -> bool:
    """Whether a key value from an engine can be typed and written back into SQL: not a number that
    does not convert (``exp(1000)`` is ``inf`` on DuckDB, NaN on either), not a date Python cannot
    hold (a year before 1). A key that does not fit is dropped, whoever's row it comes from."""
    if value is None:
        return True
    try:
        typed = _typed(value, type_)
    except (TypeError, ValueError, ArithmeticError):
        return False
    if type_ in _PYTHON_TYPES:
        return isinstance(typed, _PYTHON_TYPES[type_])
    return not isinstance(typed, float) or math.isfinite(typed)


def typed_key_rows(plan: ReleasePlan, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Keys arrive in each engine's own types (PostgreSQL's NUMERIC as Decimal, date_trunc as a
    timestamp on both); the noisy table holds them in the key's type, on every engine, so that a
    public cell (a date) finds the engine's row (a timestamp) of the same key. A row whose key cannot
    be typed (an infinite date, NaN) is dropped before any threshold, rather than failing the query
    on one person's key."""
    types = [key.type for key in plan.shape.group_keys]
    if not types:
        return rows
    width = len(types)
    return [
        tuple(_typed(value, type_) for value, type_ in zip(row[:width], types, strict=True))
        + tuple(row[width:])
        for row in rows
        if all(_fits(value, type_) for value, type_ in zip(row[:width], types, strict=True))
    ]


def prepare_release(
    shape: QueryShape,
    *,
    epsilon: float,
    dialect: str,
    delta: float = 0.0,
    bound_epsilon: float = 0.0,
    gaussian: bool = False,
    other_row: bool = False,
) -> tuple[ReleasePlan, str | None]:
    """Price and rewrite without touching the engine or the ledger (``veil explain`` stops here).
    The SQL is the main engine query, None when every aggregate is a quantile; for a top-k query answered
    by a DP selection (release/top_k.py), the query of every key's number of people."""
    if shape.thresholded and delta <= 0:
        key = next(key for key in shape.group_keys if key.thresholded)
        raise PolicyViolationError(
            f"GROUP BY {key.label}: the keys are not public",
            detail=f'"{key.source.name}" is private and has no public value list, so its keys would come from the data',
            hint=_public_keys_hint(key),
        )
    if selection_applies(shape, gaussian=gaussian, other_row=other_row):  # a DP top-k selection
        plan = price_top_k(shape, epsilon=epsilon, delta=delta)
        return plan, top_k_score_query(shape, partition=plan.top_k.partition, dialect=dialect).sql(
            dialect=dialect
        )
    if other_row and shape.top_k is not None and shape.top_k.partition:
        raise UnsupportedQueryError(
            "veil.other_row does not apply to a top k per partition", hint="SET veil.other_row = off"
        )
    cells = shape.cells
    if cells is not None and cells > MAX_GROUP_CELLS:
        raise UnsupportedQueryError(
            f"the GROUP BY has {cells} public cells; at most {MAX_GROUP_CELLS} are answered",
            hint="group by fewer columns or filter with WHERE",
        )
    if gaussian and delta <= 0:
        raise InvalidParameterValueError(
            "veil.mechanism = gaussian needs veil.delta > 0",
            hint="SET veil.delta = 1e-6, or SET veil.mechanism = laplace",
        )
    plan = price_query(
        shape,
        epsilon=epsilon,
        delta=delta if (shape.thresholded or gaussian) else 0.0,
        bound_epsilon=bound_epsilon,
        gaussian=gaussian,
        other_row=other_row,
    )
    scalars = tuple(m.quantity for m in plan.scalar_measurements)
    main = bounded_query(shape, scalars, dialect=dialect).sql(dialect=dialect) if scalars else None
    return plan, main


_THRESHOLD_HINT = (
    "SET veil.delta = 1e-6 (for example) to release only keys that enough people share (τ-thresholding); "
    "it is paid from a δ grant (an administrator adds one: veil budget grant ANALYST DATASET EPSILON --delta 1e-5)"
)


def _public_keys_hint(key: GroupKey) -> str:
    """What gives the keys a public domain — the policy's fix first, since it costs no δ."""
    column = key.source
    if column.type is ColumnType.DATE:
        return (
            f"declare lower and upper dates for {column.name} in the policy (e.g. lower = 2024-01-01, "
            "upper = 2025-12-31, at most 100,000 days apart): its days, and date_trunc or EXTRACT of it, "
            f"then have public keys; or {_THRESHOLD_HINT}"
        )
    if column.type is ColumnType.TIMESTAMP:
        return (
            f"group by a day or longer of {column.name} — date_trunc('day', {column.name}) (or 'week', 'month', "
            f"'year'…), EXTRACT(year FROM {column.name}) (or month, day, dow…) or CAST({column.name} AS DATE) — "
            f"and declare lower and upper timestamps for {column.name} in the policy (e.g. lower = "
            "2024-01-01T00:00:00, upper = 2025-12-31T23:59:59, at most 100,000 days apart): those keys are then "
            f"public; a timestamp itself, its hour, minute or second has no public domain; or {_THRESHOLD_HINT}"
        )
    if column.type is ColumnType.INTEGER and not key.is_column:
        return f"declare lower and upper for {column.name} in the policy; or {_THRESHOLD_HINT}"
    return f"declare {column.name} public with its values in the policy; or {_THRESHOLD_HINT}"


def choose_contribution_bound(plan: ReleasePlan, *, execute: Execute, dialect: str, rng: RandomSource) -> int:
    """max_contributions = "auto": L chosen with DP from this query's per-person row counts, capped at
    the policy's contribution_cap (mechanisms/contribution_bound.py), aiming at the bias-variance
    optimum of ``plan``'s noisy totals and anchored at the policy's contribution_hint. It spends
    ``plan.bound_epsilon``; each person is one count, so the scores' sensitivity is 1."""
    table = plan.shape.table
    people_by_count = {
        int(count): int(people) for count, people in execute(bound_histogram_sql(plan, dialect))[1]
    }
    return dp_contribution_bound(
        people_by_count,
        cap=table.max_contributions,
        epsilon=plan.bound_epsilon,
        rng=rng,
        target=bound_target_people(plan),
        hint=table.contribution_hint,
    )


def bound_histogram_sql(plan: ReleasePlan, dialect: str) -> str:
    """How many people have how many rows after the query's filters (counts above the cap as the cap)."""
    shape = plan.shape
    return contributions_histogram_query(shape, cap=shape.table.max_contributions, dialect=dialect).sql(
        dialect=dialect
    )


def with_contribution_bound(shape: QueryShape, bound: int) -> QueryShape:
    """The shape with L fixed: what the query is rewritten and priced with once L is chosen."""
    return dataclasses.replace(shape, table=shape.table.with_max_contributions(bound))


def bound_choice_epsilon(shape: QueryShape, epsilon: float) -> float:
    """The part of a query's ε spent choosing bounds with DP before it is measured (``bound_selection_epsilon``)
    when the table chooses max_contributions per query ("auto") and the bound matters to the query
    (``bound_matters``: not for COUNT(DISTINCT <privacy unit>) alone), or per-person values need bounds;
    else nothing. The query service charges, and ``veil explain`` shows, exactly this."""
    chooses = (shape.table.auto_contributions and bound_matters(shape)) or bool(shape.value_bounds)
    return bound_selection_epsilon(epsilon) if chooses else 0.0


def union_shares(
    shapes: list[QueryShape], *, epsilon: float, delta: float, gaussian: bool
) -> tuple[float, float]:
    """(ε of each part, δ of each part that spends δ) of a UNION ALL: the statement's ε split equally over
    its parts, its δ over the parts that spend δ (keys from the data, Gaussian noise). Each share is the
    largest float with parts × share <= the decimal the ledger charges, as within one query."""
    spenders = sum(1 for shape in shapes if shape.thresholded or gaussian)
    delta_share = split_epsilon(delta, spenders) if spenders and delta > 0 else delta
    return split_epsilon(epsilon, len(shapes)), delta_share


def choose_value_bounds(
    plan: ReleasePlan, *, execute: Execute, dialect: str, rng: RandomSource
) -> QueryShape:
    """Per-person values aggregated without bounds (``AVG(n)`` over ``COUNT(*) AS n``): each is clamped to
    ``M = unit × L``, L chosen with DP from ``⌈|value| / unit⌉`` over the people by the very mechanism of
    max_contributions = "auto" (mechanisms/contribution_bound.py): among 1, 2, 3, 4, 6, 8, … up to the
    cap, at the bias-variance optimum of ``plan``'s noisy totals (C = cells/ε per quantity people may be
    clamped), anchored at the smallest candidate. ``plan.bound_epsilon`` is shared equally by the values;
    each person is one row of the per-person table, so each histogram's scores have sensitivity 1."""
    shape = plan.shape
    share = split_epsilon(plan.bound_epsilon, len(shape.value_bounds))
    target = bound_target_people(plan)
    chosen = []
    for bound in shape.value_bounds:
        sql = value_histogram_query(shape, bound, dialect=dialect).sql(dialect=dialect)
        people_by_count = {int(count): int(people) for count, people in execute(sql)[1]}
        steps = dp_contribution_bound(people_by_count, cap=bound.cap, epsilon=share, rng=rng, target=target)
        chosen.append(bound.with_choice(steps))
    return shape.with_value_bounds(tuple(chosen))


def totals_query(plan: ReleasePlan, *, dialect: str) -> str | None:
    """The "(other)" row's totals: the same bounded quantities over all filtered rows, no GROUP BY."""
    totals = tuple(m.quantity for m in plan.total_measurements)
    if not totals:
        return None
    return bounded_query(plan.shape.with_group_keys(()), totals, dialect=dialect).sql(dialect=dialect)


def histogram_queries(plan: ReleasePlan, *, dialect: str) -> dict[str, str]:
    """One engine query per histogram the plan selects from: a grid histogram per column whose
    quantiles it measures, a value histogram per column whose mode it measures (``mode(col)``)."""
    queries = {}
    selections = (*plan.quantile_measurements, *plan.mode_measurements)
    distinct_inputs(m.quantity.column for m in selections if m.quantity.column is not None)
    for measurement in selections:
        quantity = measurement.quantity
        assert quantity.column is not None
        build = histogram_query if quantity.kind is QuantityKind.QUANTILE else mode_histogram_query
        queries[quantity.histogram] = build(plan.shape, quantity.column, dialect=dialect).sql(dialect=dialect)
    return queries


def collect_histograms(plan: ReleasePlan, *, execute: Execute, dialect: str) -> Histograms:
    """Run the histogram queries and fold their rows (keys…, bucket or value, weight) into one count
    list per histogram and group cell: grid cells for quantiles, the public values in policy order
    for modes."""
    keys = len(plan.shape.group_keys)
    folds = {
        m.quantity.histogram: _fold(m.quantity)
        for m in (*plan.quantile_measurements, *plan.mode_measurements)
    }
    histograms: dict[str, dict[tuple[object, ...], list[int]]] = {}
    for name, sql in histogram_queries(plan, dialect=dialect).items():
        size, position = folds[name]
        cells = histograms.setdefault(name, {})
        for row in execute(sql)[1]:
            index = position(row[keys])
            if index is not None:
                cells.setdefault(tuple(row[:keys]), [0] * size)[index] += int(row[keys + 1])
    return histograms


def _fold(quantity: Quantity) -> tuple[int, Callable[[Any], int | None]]:
    """How many counts a histogram has, and where an engine row's bucket or value goes. A mode's
    values come back in the engine's types (PostgreSQL's NUMERIC as Decimal), so they are typed as the
    column before they are looked up; a value that still matches none is dropped — a per-row rule
    that cannot make the query fail on one person's data."""
    if quantity.kind is QuantityKind.QUANTILE:
        return QUANTILE_GRID, int
    column = quantity.column
    assert column is not None and column.values is not None
    index = {value: i for i, value in enumerate(column.values)}
    return len(index), lambda value: index.get(_typed(value, column.type))
