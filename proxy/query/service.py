"""The query pipeline of one dataset, with no knowledge of the wire.

parse → classify (QueryShape) → price → reserve → rewrite → execute → noise → commit.
The reservation *is* the debit: it counts as spent from the moment it exists, so a crash between
execution and commit can only overcharge. Only a failure before any engine query was sent cancels
it: after that, every outcome is charged (docs/privacy.md, "Side channels").
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

import duckdb
from sqlglot import exp

from budget.accountants import Accountant
from budget.answer_cache import CacheKey
from budget.audit import Charge
from budget.ledger import BASIC, Ledger
from budget.totals import Release
from mechanisms.random_source import RandomSource
from proxy import __version__
from proxy.analysis.copy import CopyOptions, CopyStatement
from proxy.analysis.federated import SHAPE_HINT, count_column, federation_read, local_statement
from proxy.analysis.output_names import output_name
from proxy.analysis.parse import parse_statements, too_deep
from proxy.analysis.partitions import PartitionPin
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import (
    BUDGET_TABLE,
    BudgetQuery,
    CatalogQuery,
    ConstantQuery,
    DeallocateStatement,
    DiscardStatement,
    PrivateQuery,
    PublicQuery,
    ReconstructStatement,
    ResetStatement,
    SetStatement,
    ShowStatement,
    Statement,
    TransactionStatement,
    TTestStatement,
    UnionQuery,
    classify,
    classify_transaction,
)
from proxy.analysis.ttest import TTestQuery
from proxy.backends.base import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.interrupts import response_deadline
from proxy.catalog.shadow import READ_ONLY_PARAMETERS, ShadowCatalog
from proxy.config import COARSE_CAP_STEP, ColumnType, DatasetPolicy, FederationPolicy
from proxy.errors import (
    BackendUnavailableError,
    DatatypeMismatchError,
    InvalidParameterValueError,
    ProxyError,
    QueryCanceledError,
    UnsupportedQueryError,
)
from proxy.federation.exchange import FederationGateway, PeerAnswer
from proxy.query.budget_view import budget_table
from proxy.query.planning import (
    Execute,
    bound_choice_epsilon,
    bound_histogram_sql,
    checked_epsilon,
    choose_contribution_bound,
    choose_value_bounds,
    collect_histograms,
    histogram_queries,
    prepare_release,
    resolve_group_domains,
    totals_query,
    typed_key_rows,
    union_shares,
    with_contribution_bound,
)
from proxy.query.reconstruct import answer_reconstruct
from proxy.query.top_k import gate_query, measure_top_k
from proxy.query.ttest import NOTE as P_VALUE_NOTE
from proxy.query.ttest import (
    TTestPlan,
    answer_ttest,
    plan_ttest,
    ttest_columns,
    ttest_cost,
)
from proxy.release.apply import ReleasedTable, ResultColumn, noisy_columns, null_notes, release
from proxy.release.cache_key import (
    answer_digest,
    bound_choice_digest,
    decode_bound_choice,
    encode_bound_choice,
)
from proxy.release.cost import release_cost
from proxy.release.plan import ReleasePlan, bound_matters, bound_target_people
from proxy.release.postprocess import PostprocessEngine
from proxy.release.present import Presentation, present, settings_presentation
from proxy.release.stored import decode_table, encode_table
from proxy.release.top_k import TopKPlan
from proxy.rewrite.session_info import SessionInfo, constant_query
from proxy.settings import SETTINGS, SETTINGS_BY_NAME, SessionSettings, lookup
from proxy.wire import types as pgtypes

log = logging.getLogger("veil.query")

VERSION_STRING = f"PostgreSQL 16.0 (Veil {__version__}, differentially private SQL proxy)"

_ENGINE_TYPES = {  # DuckDB's type names, then PostgreSQL's
    "BOOLEAN": ColumnType.BOOLEAN,
    "TINYINT": ColumnType.INTEGER,
    "SMALLINT": ColumnType.INTEGER,
    "INTEGER": ColumnType.INTEGER,
    "BIGINT": ColumnType.INTEGER,
    "HUGEINT": ColumnType.INTEGER,
    "FLOAT": ColumnType.REAL,
    "DOUBLE": ColumnType.REAL,
    "DATE": ColumnType.DATE,
    "TIMESTAMP": ColumnType.TIMESTAMP,
    "TIMESTAMP WITH TIME ZONE": ColumnType.TIMESTAMP,  # sent as timestamptz (_SPECIFIC_OIDS)
    "bool": ColumnType.BOOLEAN,
    "int2": ColumnType.INTEGER,
    "int4": ColumnType.INTEGER,
    "int8": ColumnType.INTEGER,
    "float4": ColumnType.REAL,
    "float8": ColumnType.REAL,
    "numeric": ColumnType.REAL,
    "date": ColumnType.DATE,
    "timestamp": ColumnType.TIMESTAMP,
    "timestamptz": ColumnType.TIMESTAMP,
}


@dataclass(frozen=True)
class StatementOutcome:
    """What one statement produced: a command tag, maybe a table, and notices for the client."""

    tag: str
    table: ReleasedTable | None = None
    notices: tuple[str, ...] = ()
    parameter_changed: tuple[str, str] | None = None  # a reported setting's new value
    charge: Charge | None = None  # set for answers from private data
    copy: CopyAnswer | None = None  # COPY … TO STDOUT: rows sent as COPY data (``table`` is None)


@dataclass(frozen=True)
class CopyAnswer:
    """A COPY TO STDOUT's answer, column by column as proxy/wire/copy_out.py writes it: ``values[i]`` holds
    the ``count`` values of the column named ``names[i]``."""

    options: CopyOptions
    names: tuple[str, ...]
    values: list[list[object]]
    count: int

    @classmethod
    def of_table(cls, options: CopyOptions, table: ReleasedTable) -> CopyAnswer:
        names = tuple(column.name for column in table.columns)
        values = [list(column) for column in zip(*table.rows, strict=True)] or [[] for _ in names]
        return cls(options, names, values, len(table.rows))


@dataclass(frozen=True)
class Description:
    """What a statement will answer, found without spending: its ``columns`` (None: no rows, as for
    SET), and the ``outcome`` itself when finding them meant running a free statement."""

    columns: tuple[ResultColumn, ...] | None
    outcome: StatementOutcome | None = None


@dataclass(frozen=True)
class Principal:
    """The analyst on whose ledger every answer is debited."""

    name: str


class QueryService:
    def __init__(
        self,
        dataset: DatasetPolicy,
        *,
        backend: Backend,
        sandbox: DuckDBBackend,
        ledger: Ledger,
        rng: RandomSource,
        accountant_of: Callable[[str], Accountant] = lambda _dataset: BASIC,
        cap_step_of: Callable[[str], float | None] | None = None,
        federation: FederationGateway | None = None,
        databases: Sequence[str] = (),
    ) -> None:
        """``accountant_of`` names each dataset's accountant (the policy's choice), for this
        dataset's debits and for the ``veil.budget`` view, which spans the analyst's datasets;
        ``cap_step_of`` the step in which analysts see each dataset's cap (None: exactly); by default
        this dataset's own, and coarse for the others."""
        self.dataset, self.backend, self.sandbox, self.ledger, self.rng = (
            dataset,
            backend,
            sandbox,
            ledger,
            rng,
        )
        self.accountant_of = accountant_of
        self.cap_step_of = cap_step_of or (
            lambda name: dataset.cap_step if name == dataset.name else COARSE_CAP_STEP
        )
        self.accountant = accountant_of(dataset.name)
        self.postprocessor = PostprocessEngine()
        self.databases = tuple(databases)  # every dataset of the server, for the catalog's pg_database
        self.catalog = ShadowCatalog(dataset, self.databases)  # built on the first catalog query
        self.federation = federation

    def update_policy(self, dataset: DatasetPolicy, *, accountant: Accountant) -> None:
        """A reloaded policy for the same engine (proxy/server/reload.py): later statements follow it;
        one already classified keeps the table policy it was planned with."""
        self.dataset, self.accountant = dataset, accountant
        self.catalog = ShadowCatalog(dataset, self.databases)

    def parse(self, sql: str) -> list[exp.Expression]:
        return parse_statements(sql, max_tokens=self.dataset.limits.max_tokens)

    def statement_text(self, tree: exp.Expression) -> str:
        """The statement as the audit log records it: normalized by sqlglot (one line, one style)."""
        return tree.sql(dialect="postgres")

    def transaction_tag(self, tree: exp.Expression) -> str | None:
        """BEGIN/COMMIT/ROLLBACK/ROLLBACK TO SAVEPOINT…, so the session can track the transaction
        status it reports."""
        statement = classify_transaction(tree)
        return statement.transition if statement is not None else None

    def run(
        self,
        tree: exp.Expression,
        *,
        principal: Principal,
        settings: SessionSettings,
        text: str | None = None,
    ) -> StatementOutcome:
        """``text``: the statement as :meth:`statement_text` gives it, if the caller has it already."""
        federation = self._federation_read(tree)
        if federation is not None:
            text = self.statement_text(tree) if text is None else text
            return self._answer_federated(federation, tree, text, principal=principal, settings=settings)
        statement = _classified(tree, self.dataset)
        if isinstance(statement, CopyStatement):
            return self._copy(statement, tree, principal=principal, settings=settings, text=text)
        if isinstance(statement, PrivateQuery | TTestStatement | UnionQuery):
            text = self.statement_text(tree) if text is None else text
            with response_deadline(self.dataset.response_deadline_ms):  # constant-time release, if set
                if isinstance(statement, TTestStatement):
                    return self._answer_ttest(statement.query, text, principal=principal, settings=settings)
                if isinstance(statement, UnionQuery):
                    return self._answer_union(statement, text, principal=principal, settings=settings)
                return self._answer_and_charge(statement.shape, text, principal=principal, settings=settings)
        return self._dispatch(statement, settings=settings, principal=principal)

    def describe(
        self, tree: exp.Expression, *, principal: Principal, settings: SessionSettings
    ) -> Description:
        """The columns :meth:`run` would answer with (the extended protocol's Describe), without
        spending budget or reading a private row.

        A private query is planned only — group domains, price, the noisy table's columns, the
        post-processing's types over one made-up row — with no reservation and no engine query on a
        table. A statement that changes the session (SET, BEGIN …) is not run: it has no rows. Any
        other statement is free and read-only (constants, public tables, the catalog, SHOW,
        ``veil.budget``): it is run, and its outcome returned for the Execute that follows."""
        federation = self._federation_read(tree)
        if federation is not None:
            return Description(self._planned_columns(self._federated_shape(federation, tree)[0], settings))
        statement = _classified(tree, self.dataset)
        if isinstance(statement, CopyStatement):
            return Description(None)  # COPY answers with CopyOutResponse, not RowDescription
        if isinstance(statement, PrivateQuery):
            return Description(self._planned_columns(statement.shape, settings))
        if isinstance(statement, UnionQuery):
            parts = self._plan_union(statement, principal=principal, settings=settings)
            return Description(_union_columns([part.columns for part in parts]))
        if isinstance(statement, TTestStatement):
            return Description(ttest_columns(self._ttest_plan(statement.query, settings)))
        if isinstance(statement, _CHANGES_THE_SESSION):
            return Description(None)
        outcome = self._dispatch(statement, settings=settings, principal=principal)
        return Description(outcome.table.columns if outcome.table is not None else None, outcome)

    def _planned_columns(self, shape: QueryShape, settings: SessionSettings) -> tuple[ResultColumn, ...]:
        shape = resolve_group_domains(shape, execute=self.backend.execute, dialect=self.backend.dialect)
        epsilon = self.epsilon(settings)
        plan, _ = prepare_release(
            shape, epsilon=epsilon, dialect=self.backend.dialect, **_release_options(shape, epsilon, settings)
        )
        return self._columns_of(plan)

    def _columns_of(self, plan: ReleasePlan) -> tuple[ResultColumn, ...]:
        """The answer's columns, from post-processing run over one made-up noisy row."""
        columns = noisy_columns(plan)
        sample = ReleasedTable(columns, [tuple(_SAMPLE_VALUES[column.type] for column in columns)])
        return self._postprocess(plan.shape, present(plan, sample, Presentation())).columns  # types only

    def _dispatch(
        self, statement: Statement, *, principal: Principal, settings: SessionSettings
    ) -> StatementOutcome:
        match statement:
            case ConstantQuery():
                return self._answer_constant(statement, principal=principal)
            case CatalogQuery(tree=tree):
                table = self.catalog.answer(
                    tree, info=self._session_info(principal), setting=lambda name: _setting(settings, name)
                )
                return StatementOutcome(f"SELECT {len(table.rows)}", table=table)
            case BudgetQuery(tree=tree):
                return self._answer_budget_query(tree, principal)
            case ReconstructStatement(query=query):
                table, iterations = answer_reconstruct(
                    query, execute=self.backend.execute, dialect=self.backend.dialect
                )
                notice = (
                    f"veil_reconstruct: an estimate from the published release {query.release} (EM, "
                    f"{iterations} iterations); a public release, so nothing was spent"
                )
                return StatementOutcome(f"SELECT {len(table.rows)}", table=table, notices=(notice,))
            case ShowStatement(name=name) if name.lower() == "veil.budget":
                table = self._budget(principal)
                return StatementOutcome("SHOW", table=table)
            case PublicQuery(tree=tree):
                description, rows = self.backend.execute(tree.sql(dialect=self.backend.dialect))
                names = _public_names(tree, description)
                return StatementOutcome(f"SELECT {len(rows)}", table=_typed_table(names, description, rows))
            case SetStatement(name=name, value=value):
                if value is not None and lookup(name).name == "veil.epsilon":
                    # refuse an ε above max_epsilon now, not at the next query, and keep the old value
                    checked_epsilon(self.dataset, float(lookup(name).normalize(value)))
                setting = settings.set(name, value) if value is not None else settings.reset(name)
                changed = (setting.name, settings.get(name)) if setting.reported else None
                return StatementOutcome("SET", parameter_changed=changed)
            case ResetStatement(name=name):
                if name is None:
                    settings.reset_all()
                else:
                    settings.reset(name)
                return StatementOutcome("RESET")
            case ShowStatement(name=name):
                return StatementOutcome("SHOW", table=self._show(name, settings))
            case TransactionStatement(tag=tag):
                return StatementOutcome(tag)
            case DiscardStatement(what=what):
                if what == "ALL":
                    settings.reset_all()
                return StatementOutcome(f"DISCARD {what}")
            case DeallocateStatement(name=name):
                return StatementOutcome("DEALLOCATE" if name is not None else "DEALLOCATE ALL")
        raise UnsupportedQueryError("statement not supported")  # pragma: no cover - match is exhaustive

    def _copy(
        self,
        statement: CopyStatement,
        tree: exp.Expression,
        *,
        principal: Principal,
        settings: SessionSettings,
        text: str | None,
    ) -> StatementOutcome:
        """COPY … TO STDOUT: the query answered (and priced) as the same SELECT, its rows sent as COPY data.
        A query of public tables only is fetched column by column (``Backend.execute_columns``): it can
        be every row of a large table. (A COPY naming a federation never gets here: :meth:`run` refuses it.)"""
        query = _classified(statement.query, self.dataset)
        if isinstance(query, PublicQuery):
            return self._copy_public(query, statement.options)
        text = self.statement_text(tree) if text is None else text
        inner = self.run(statement.query, principal=principal, settings=settings, text=text)
        if inner.table is None:
            raise UnsupportedQueryError("COPY needs a query that returns rows")
        copied = CopyAnswer.of_table(statement.options, inner.table)
        return dataclasses.replace(inner, tag=f"COPY {copied.count}", table=None, copy=copied)

    def _copy_public(self, query: PublicQuery, options: CopyOptions) -> StatementOutcome:
        """The same rows and names as the SELECT's answer (decimals as floats, as ``_typed_table`` has them)."""
        result = self.backend.execute_columns(query.tree.sql(dialect=self.backend.dialect))
        names = _public_names(query.tree, result.description)
        values = [
            [float(value) if isinstance(value, Decimal) else value for value in column]
            if _is_decimal(type_name)
            else column
            for column, (_, type_name) in zip(result.values, result.description, strict=True)
        ]
        return StatementOutcome(f"COPY {result.count}", copy=CopyAnswer(options, names, values, result.count))

    def _federation_read(self, tree: exp.Expression) -> FederationPolicy | None:
        if self.federation is None:
            return None
        return federation_read(tree, self.federation.of_dataset(self.dataset.name))

    def _federated_shape(self, federation: FederationPolicy, tree: exp.Expression) -> tuple[QueryShape, int]:
        """The statement over this site's table, checked to be a federated count; and its count's column."""
        assert isinstance(tree, exp.Select)
        statement = _classified(local_statement(tree, federation), self.dataset)
        if not isinstance(statement, PrivateQuery):
            raise UnsupportedQueryError(f"federation {federation.name} answers counts only", hint=SHAPE_HINT)
        # charged as an ordinary statement at both sites: parallel composition is not offered here
        shape = dataclasses.replace(statement.shape, partition=None)
        return shape, count_column(shape, federation)

    def _answer_federated(
        self,
        federation: FederationPolicy,
        tree: exp.Expression,
        text: str,
        *,
        principal: Principal,
        settings: SessionSettings,
    ) -> StatementOutcome:
        """This site's DP counts, then the secure comparison of each cell's joint count with k at the
        peer (docs/federation.md). The link is up and authenticated before the spend. Both sites' counts
        are summed as drawn (``veil.raw_counts``): clamping each at 0 first would bias the sum upward."""
        assert self.federation is not None
        shape, count = self._federated_shape(federation, tree)
        raw = settings.with_value("veil.raw_counts", "on")
        with self.federation.open(federation) as link:
            local = self._answer_and_charge(shape, text, principal=principal, settings=raw)
            assert local.table is not None
            rows = local.table.rows
            cells = [tuple(str(v) for i, v in enumerate(row) if i != count) for row in rows]
            joint = self.federation.ask(link, federation, text, cells, [float(row[count]) for row in rows])
        released = [
            (*row[:count], None if total is None else type(row[count])(round(total, 6)), *row[count + 1 :])
            for row, total in zip(rows, joint.counts, strict=True)
        ]
        suppressed = sum(total is None for total in joint.counts)
        notice = (
            f"federation {federation.name}: {len(rows) - suppressed} of {len(rows)} cells reach k = "
            f"{federation.threshold} and show both sites' noisy counts summed; {suppressed} suppressed (NULL). "
            f"The other site spent ε = {joint.peer_epsilon:g} of its own budget; {joint.bytes_exchanged:,} bytes exchanged"
        )
        table = ReleasedTable(local.table.columns, released)
        return dataclasses.replace(local, table=table, notices=(*local.notices, notice))

    def answer_for_peer(self, federation: FederationPolicy, text: str) -> PeerAnswer:
        """The answering site's DP counts for a federated statement from the peer, debited to the
        federation's ``peer_analyst`` at its ε. Refused (nothing spent) unless it is a federated count."""
        trees = self.parse(text)
        if len(trees) != 1 or self._federation_read(trees[0]) is not federation:
            raise UnsupportedQueryError(
                f"the peer's statement is not a count of federation {federation.name}"
            )
        shape, count = self._federated_shape(federation, trees[0])
        settings = SessionSettings({"veil.raw_counts": "on"})  # summed with the asking site's, as drawn
        if federation.epsilon is not None:
            settings.set("veil.epsilon", repr(federation.epsilon))
        assert federation.peer_analyst is not None
        principal = Principal(federation.peer_analyst)
        outcome = self._answer_and_charge(
            shape, self.statement_text(trees[0]), principal=principal, settings=settings
        )
        assert outcome.table is not None
        cells = [tuple(str(v) for i, v in enumerate(row) if i != count) for row in outcome.table.rows]
        counts = [float(row[count]) for row in outcome.table.rows]
        return PeerAnswer(cells, counts, self.epsilon(settings))

    def epsilon(self, settings: SessionSettings) -> float:
        chosen = settings.get("veil.epsilon")
        return checked_epsilon(self.dataset, float(chosen) if chosen else None)

    def _answer_and_charge(
        self, shape: QueryShape, text: str, *, principal: Principal, settings: SessionSettings
    ) -> StatementOutcome:
        """Price, look for a stored answer, reserve, measure, commit — in that order: nothing is
        read from private rows before the reservation exists.

        Once an engine query has been sent, the statement is charged whatever becomes of it — an
        answer, an engine error, a timeout, a cancel, a disconnection: whether and when a query fails
        depends on private rows too. Only a failure before the engine saw the query is free."""
        shape = resolve_group_domains(shape, execute=self.backend.execute, dialect=self.backend.dialect)
        epsilon = self.epsilon(settings)
        options = _release_options(shape, epsilon, settings)
        dialect = self.backend.dialect
        plan, sql = prepare_release(shape, epsilon=epsilon, dialect=dialect, **options)
        key = self._cache_key(plan, sql, principal) if self.dataset.answer_cache else None
        stored = self.ledger.answer_cache.get(key) if key is not None else None
        if stored is not None:
            return self._respond(
                plan, decode_table(stored), principal=principal, settings=settings, cached=True
            )
        bound_key = self._bound_key(plan, principal)
        remembered = self.ledger.answer_cache.get(bound_key) if bound_key is not None else None
        if remembered is not None:  # a bound this analyst paid for: the whole ε goes to the answer
            shape = with_contribution_bound(shape, decode_bound_choice(remembered))
            options = _release_options(shape, epsilon, settings)
            plan, sql = prepare_release(shape, epsilon=epsilon, dialect=dialect, **options)
            plan = dataclasses.replace(plan, remembered_bound=True)
            key = self._cache_key(plan, sql, principal) if self.dataset.answer_cache else None
            stored = self.ledger.answer_cache.get(key) if key is not None else None
            if stored is not None:
                return self._respond(
                    plan, decode_table(stored), principal=principal, settings=settings, cached=True
                )
        chosen: list[str] = []

        def measure(execute: Execute) -> ReleasedTable:
            nonlocal plan, sql
            if _chooses_bound(plan):
                bound = choose_contribution_bound(plan, execute=execute, dialect=dialect, rng=self.rng)
                choice = encode_bound_choice(
                    bound, selection_epsilon=plan.bound_epsilon, target=bound_target_people(plan)
                )
                chosen.append(choice)
                shape = with_contribution_bound(plan.shape, bound)
                plan, sql = prepare_release(shape, epsilon=epsilon, dialect=dialect, **options)
            plan, sql = self._choose_value_bounds(
                plan, sql, epsilon=epsilon, options=options, execute=execute
            )
            return self._measure(plan, sql, execute=execute)

        def remember(spend_id: int) -> None:
            if bound_key is not None and chosen:
                self.ledger.answer_cache.put(bound_key, chosen[0], spend_id=spend_id)

        spend = _Spend(
            release_cost(plan), text, self._charge(plan, cached=False), plan.describe(), shape.partition
        )
        noisy = self._spend(spend, principal, measure, key, remember=remember)
        return self._respond(plan, noisy, principal=principal, settings=settings, cached=False)

    def _choose_value_bounds(
        self,
        plan: ReleasePlan,
        sql: str | None,
        *,
        epsilon: float,
        options: dict[str, Any],
        execute: Execute,
    ) -> tuple[ReleasePlan, str | None]:
        """Per-person values aggregated without bounds: their bounds chosen with DP (it spends
        ``plan.bound_epsilon``), and the query re-planned at the same ε with them."""
        if not plan.shape.value_bounds or isinstance(plan, TopKPlan):
            return plan, sql
        dialect = self.backend.dialect
        shape = choose_value_bounds(plan, execute=execute, dialect=dialect, rng=self.rng)
        return prepare_release(shape, epsilon=epsilon, dialect=dialect, **options)

    def _plan_union(
        self, query: UnionQuery, *, principal: Principal, settings: SessionSettings
    ) -> list[_UnionPart]:
        """Every part planned before anything is reserved: the statement's ε split equally over the parts,
        its δ over the parts that spend δ (keys from the data, Gaussian noise); each part's columns found
        by post-processing one made-up row, so that parts whose columns do not match are refused free."""
        shapes = [
            resolve_group_domains(shape, execute=self.backend.execute, dialect=self.backend.dialect)
            for shape in query.parts
        ]
        share, delta_share = union_shares(
            shapes,
            epsilon=self.epsilon(settings),
            delta=float(settings.get("veil.delta")),
            gaussian=settings.get("veil.mechanism") == "gaussian",
        )
        parts = []
        for shape in shapes:
            options = _release_options(shape, share, settings) | {"delta": delta_share}
            plan, sql = prepare_release(shape, epsilon=share, dialect=self.backend.dialect, **options)
            key = self._cache_key(plan, sql, principal) if self.dataset.answer_cache else None
            stored = self.ledger.answer_cache.get(key) if key is not None else None
            table = decode_table(stored) if stored is not None else None
            parts.append(_UnionPart(plan, sql, share, options, key, table, self._columns_of(plan)))
        return parts

    def _answer_union(
        self, query: UnionQuery, text: str, *, principal: Principal, settings: SessionSettings
    ) -> StatementOutcome:
        """``q1 UNION ALL q2 …``: every part planned (and its columns matched) first; the parts not in the
        answer cache reserved together, one ledger entry for their summed cost, before any of them reads
        a private row; then each measured, post-processed, and the rows put one after another."""
        parts = self._plan_union(query, principal=principal, settings=settings)
        columns = _union_columns([part.columns for part in parts])
        plans, tables, cost = self._measure_union(parts, text, principal=principal, settings=settings)
        stored = [part.stored is not None for part in parts]
        if cost is None:
            notices = [self._spent_notice(principal, "", cached=True)]
            charge = self._union_charge(None, plans, cached=True)
        else:
            notices = [self._spent_notice(principal, _union_description(cost, plans, stored), cached=False)]
            fresh = [plan for plan, hit in zip(plans, stored, strict=True) if not hit]
            charge = self._union_charge(cost, fresh, cached=False)
        shown = _presentation(settings)
        try:
            answered = [
                self._postprocess(plan.shape, present(plan, table, shown))
                for plan, table in zip(plans, tables, strict=True)
            ]
            rows = [row for table in answered for row in _converted(table, columns)]
            table = self._union_postprocess(ReleasedTable(columns, rows), query)
        except ProxyError as error:  # after the noise: the spend stands, and the error (and audit) say so
            error.charge = charge
            raise
        notices += [note for plan, part in zip(plans, tables, strict=True) for note in null_notes(plan, part)]
        if settings.get("veil.show_error") == "on":
            bounds = "; ".join(
                f"part {i}: "
                + ", ".join(
                    f"{m.quantity.label} ±{m.error_bound(cells=max(len(t.rows), 1)):.4g}"
                    for m in plan.measurements
                )
                for i, (plan, t) in enumerate(zip(plans, answered, strict=True), start=1)
            )
            notices.append(f"95% error bounds of the noise: {bounds}")
        return StatementOutcome(
            f"SELECT {len(table.rows)}", table=table, notices=tuple(notices), charge=charge
        )

    def _measure_union(
        self, parts: list[_UnionPart], text: str, *, principal: Principal, settings: SessionSettings
    ) -> tuple[list[ReleasePlan], list[ReleasedTable], Release | None]:
        """Each part's final plan and noisy table, and the cost reserved (None: every part was stored).
        A failure after the first engine query charges the whole reservation (``_spend``)."""
        plans = [part.plan for part in parts]
        tables = [part.stored for part in parts]
        fresh = [part for part in parts if part.stored is None]
        if not fresh:
            return plans, [table for table in tables if table is not None], None
        every = len(fresh) == len(parts)
        cost = _union_cost(
            [release_cost(part.plan) for part in fresh],
            epsilon=self.epsilon(settings) if every else None,
            delta=float(settings.get("veil.delta")) if every else None,
        )
        stored = [table is not None for table in tables]
        charge = self._union_charge(cost, [part.plan for part in fresh], cached=False)
        spend = _Spend(cost, text, charge, _union_description(cost, plans, stored))
        measured: list[tuple[ReleasePlan, ReleasedTable]] = []

        def measure(execute: Execute) -> list[tuple[ReleasePlan, ReleasedTable]]:
            for part in fresh:
                measured.append(self._measure_part(part, execute=execute))
            return measured

        def remember(spend_id: int) -> None:
            for part, (_, table) in zip(fresh, measured, strict=True):
                if part.key is not None:
                    self.ledger.answer_cache.put(part.key, encode_table(table), spend_id=spend_id)

        results = iter(self._spend(spend, principal, measure, None, remember=remember))
        for index, table in enumerate(tables):
            if table is None:
                plans[index], tables[index] = next(results)
        return plans, [table for table in tables if table is not None], cost

    def _measure_part(self, part: _UnionPart, *, execute: Execute) -> tuple[ReleasePlan, ReleasedTable]:
        """One part of a UNION ALL as a query of its own at its share of ε: its bounds chosen with DP first
        (max_contributions = "auto" — never remembered across statements here — and per-person values)."""
        plan, sql = part.plan, part.sql
        dialect = self.backend.dialect
        if _chooses_bound(plan):
            bound = choose_contribution_bound(plan, execute=execute, dialect=dialect, rng=self.rng)
            shape = with_contribution_bound(plan.shape, bound)
            plan, sql = prepare_release(shape, epsilon=part.epsilon, dialect=dialect, **part.options)
        plan, sql = self._choose_value_bounds(
            plan, sql, epsilon=part.epsilon, options=part.options, execute=execute
        )
        return plan, self._measure(plan, sql, execute=execute)

    def _union_charge(self, cost: Release | None, plans: list[ReleasePlan], *, cached: bool) -> Charge:
        return Charge(
            epsilon=cost.epsilon if cost is not None else sum(plan.epsilon for plan in plans),
            delta=cost.delta if cost is not None else sum(plan.delta for plan in plans),
            accountant=self.accountant.name,
            mechanisms=", ".join(
                sorted(
                    {m.mechanism for plan in plans for m in plan.measurements}.union(*map(_selections, plans))
                )
            ),
            cached=cached,
        )

    def _union_postprocess(self, table: ReleasedTable, query: UnionQuery) -> ReleasedTable:
        """The statement's ORDER BY, LIMIT and OFFSET over the rows of all parts (in the sandbox)."""
        modifiers = query.modifiers
        if not modifiers.order and modifiers.limit is None and modifiers.offset is None:
            return table
        positional = ReleasedTable(
            tuple(ResultColumn(f"_dp_col_{i}", column.type) for i, column in enumerate(table.columns)),
            table.rows,
        )
        select = exp.select(exp.Star()).from_(exp.Table(this=exp.to_identifier(_UNION_TABLE)))
        if modifiers.order:
            select = select.order_by(
                *(
                    exp.Ordered(
                        this=exp.column(f"_dp_col_{o.position}"), desc=o.descending, nulls_first=o.nulls_first
                    )
                    for o in modifiers.order
                )
            )
        if modifiers.limit is not None:
            select = select.limit(modifiers.limit)
        if modifiers.offset is not None:
            select = select.offset(modifiers.offset)
        description, rows = self.postprocessor.run(
            select.sql(dialect="duckdb"), positional, name=_UNION_TABLE
        )
        names = tuple(column.name for column in table.columns)
        return ReleasedTable(table.columns, _typed_table(names, description, rows).rows)

    def _bound_key(self, plan: ReleasePlan, principal: Principal) -> CacheKey | None:
        """Where this analyst's DP choice of max_contributions for the query's table, filters, grouping
        and ε is remembered (``remember_bounds``): in the answer cache, under the data version, so a
        change of the data forgets it."""
        if not (
            plan.shape.table.auto_contributions and self.dataset.remember_bounds and bound_matters(plan.shape)
        ):
            return None
        digest = bound_choice_digest(plan, bound_histogram_sql(plan, self.backend.dialect))
        return CacheKey(principal.name, self.dataset.name, self.backend.data_version(), digest)

    def _spend(
        self,
        spend: _Spend,
        principal: Principal,
        measure: Callable[[Execute], _Measured],
        key: CacheKey | None,
        *,
        remember: Callable[[int], None] | None = None,
    ) -> _Measured:
        """Reserve, measure, commit — nothing is read from private rows before the reservation exists.
        Once an engine query has been sent the statement is charged whatever becomes of it; only a
        failure before the engine saw the query cancels the reservation."""
        reservation = self.ledger.reserve(
            principal.name,
            self.dataset.name,
            spend.cost,
            statement=spend.text,
            accountant=self.accountant,
            cap_step=self.dataset.cap_step,
            partition=spend.partition.ledger_partition() if spend.partition is not None else None,
        )
        engine = _EngineCalls(self.backend.execute)
        try:
            noisy = measure(engine.execute)
        except BaseException as error:
            if not engine.sent:
                self.ledger.cancel(reservation)
                raise
            self.ledger.commit(reservation)
            raise self._charged_failure(error, spend) from None
        self.ledger.commit(reservation)  # noisy values exist: from here on the spend stands
        if key is not None and isinstance(noisy, ReleasedTable):
            self.ledger.answer_cache.put(key, encode_table(noisy), spend_id=reservation)
        if remember is not None:
            remember(reservation)
        log.info("released analyst=%s dataset=%s %s", principal.name, self.dataset.name, spend.description)
        return noisy

    def _charged_failure(self, error: BaseException, spend: _Spend) -> BaseException:
        """The error a charged failure ends with. A stop (cancel, timeout, deadline, disconnection)
        keeps its own fixed words; any other failure becomes one constant engine error, so that *how* a
        query failed says no more than *that* it failed. The original goes to the server log only."""
        if not isinstance(error, Exception):
            return error  # KeyboardInterrupt, SystemExit: the process is stopping
        if isinstance(error, QueryCanceledError):
            failure: ProxyError = QueryCanceledError(
                error.message, detail=error.detail, hint=error.hint, outcome=error.outcome
            )
        else:
            log.error("charged engine failure dataset=%s: %r", self.dataset.name, error)
            failure = BackendUnavailableError(
                "the database engine failed while answering the query",
                hint="the details are in the server log; try the query again or narrow it",
            )
        failure.charge = spend.charge
        note = f"this failed query was charged {spend.description}, since the engine had read private rows"
        failure.detail = f"{failure.detail}; {note}" if failure.detail else note
        return failure

    def _measure(self, plan: ReleasePlan, sql: str | None, *, execute: Execute) -> ReleasedTable:
        dialect = self.backend.dialect
        if isinstance(plan, TopKPlan):
            assert sql is not None
            return measure_top_k(plan, sql, execute=execute, dialect=dialect, rng=self.rng)
        exact_rows = typed_key_rows(plan, execute(sql)[1]) if sql is not None else []
        histograms = collect_histograms(plan, execute=execute, dialect=dialect)
        totals_sql = totals_query(plan, dialect=dialect)
        totals = execute(totals_sql)[1][0] if totals_sql is not None else ()
        return release(plan, exact_rows, rng=self.rng, histograms=histograms, exact_totals=totals)

    def _cache_key(self, plan: ReleasePlan, sql: str | None, principal: Principal) -> CacheKey:
        dialect = self.backend.dialect
        histograms = histogram_queries(plan, dialect=dialect)
        engine_sql = (sql or "", totals_query(plan, dialect=dialect) or "", *sorted(histograms.values()))
        if isinstance(plan, TopKPlan):
            engine_sql += (gate_query(plan, dialect=dialect) or "",)
        digest = answer_digest(plan, engine_sql)
        return CacheKey(principal.name, self.dataset.name, self.backend.data_version(), digest)

    def _respond(
        self,
        plan: ReleasePlan,
        noisy: ReleasedTable,
        *,
        principal: Principal,
        settings: SessionSettings,
        cached: bool,
    ) -> StatementOutcome:
        try:
            table = self._postprocess(plan.shape, present(plan, noisy, _presentation(settings)))
        except ProxyError as error:  # after the noise: the spend stands, and the error (and audit) say so
            error.charge = self._charge(plan, cached=cached)
            raise
        notices = [
            self._spent_notice(principal, plan.describe(), cached=cached, partition=plan.shape.partition),
            *null_notes(plan, noisy),
        ]
        if settings.get("veil.show_error") == "on":
            cells = max(len(noisy.rows), 1)
            bounds = ", ".join(
                f"{m.quantity.label} ±{m.error_bound(cells=cells):.4g}" for m in plan.measurements
            )
            if isinstance(plan, TopKPlan) and plan.selection is not None:
                bounds += f"; top-k selection: at most {plan.selection.score_gap():.4g} people below the k-th largest count"
            notices.append(f"95% error bounds of the noise (over all {cells} row(s)): {bounds}")
        return StatementOutcome(
            f"SELECT {len(table.rows)}",
            table=table,
            notices=tuple(notices),
            charge=self._charge(plan, cached=cached),
        )

    def _ttest_plan(self, query: TTestQuery, settings: SessionSettings) -> TTestPlan:
        return plan_ttest(
            query,
            epsilon=self.epsilon(settings),
            delta=float(settings.get("veil.delta")),
            mode=settings.get("veil.ttest_mode"),
            research_modes=self.dataset.research_modes,
            dialect=self.backend.dialect,
        )

    def _answer_ttest(
        self, query: TTestQuery, text: str, *, principal: Principal, settings: SessionSettings
    ) -> StatementOutcome:
        """A t-test: priced, looked up in the answer cache, then charged like any private query."""
        plan = self._ttest_plan(query, settings)
        key = None
        if self.dataset.answer_cache:
            key = CacheKey(principal.name, self.dataset.name, self.backend.data_version(), plan.digest())
        stored = self.ledger.answer_cache.get(key) if key is not None else None
        if stored is not None:
            return self._ttest_outcome(plan, decode_table(stored), principal=principal, cached=True)
        spend = _Spend(ttest_cost(plan), text, self._ttest_charge(plan, cached=False), plan.describe())
        noisy = self._spend(
            spend, principal, lambda execute: answer_ttest(plan, execute(plan.sql)[1], rng=self.rng), key
        )
        return self._ttest_outcome(plan, noisy, principal=principal, cached=False)

    def _ttest_outcome(
        self, plan: TTestPlan, noisy: ReleasedTable, *, principal: Principal, cached: bool
    ) -> StatementOutcome:
        notices = [self._spent_notice(principal, plan.describe(), cached=cached)]
        if plan.query.p_value:
            notices.append(f"veil_ttest: {P_VALUE_NOTE}")
        return StatementOutcome(
            "SELECT 1", table=noisy, notices=tuple(notices), charge=self._ttest_charge(plan, cached=cached)
        )

    def _ttest_charge(self, plan: TTestPlan, *, cached: bool) -> Charge:
        mechanisms = "smooth-sensitivity gaussian, laplace"
        return Charge(
            epsilon=plan.epsilon,
            delta=plan.delta,
            accountant=self.accountant.name,
            mechanisms=mechanisms,
            cached=cached,
        )

    def _charge(self, plan: ReleasePlan, *, cached: bool) -> Charge:
        return Charge(
            epsilon=plan.epsilon,
            delta=plan.delta,
            accountant=self.accountant.name,
            mechanisms=", ".join(sorted({m.mechanism for m in plan.measurements} | _selections(plan))),
            cached=cached,
        )

    def _spent_notice(
        self, principal: Principal, description: str, *, cached: bool, partition: PartitionPin | None = None
    ) -> str:
        """The NOTICE every DP answer carries: what it spent, and what is left — for a statement pinned
        to a partition, what is left for statements pinned to the same values too."""
        balance = self.ledger.balance(principal.name, self.dataset.name, accountant=self.accountant)
        granted = f"{balance.granted_epsilon:.6g}"
        left = f"{balance.remaining_epsilon:.6g} of {granted} ε remains on dataset {self.dataset.name}"
        if partition is not None:
            there = self._left_in(principal, partition, balance.remaining_epsilon)
            left = (
                f"{there:.6g} of {granted} ε remains for statements pinned to {partition.label}, "
                f"{balance.remaining_epsilon:.6g} for any statement on dataset {self.dataset.name}"
            )
        if cached:
            spent = "this is the stored answer of the same query asked before, so it spent nothing"
        else:
            spent = f"this answer spent {description}"
            if partition is not None:
                spent += f", charged to the partition {partition.label} only (parallel composition)"
        return f"differential privacy: {spent}; {left} ({balance.accountant} composition)"

    def _left_in(self, principal: Principal, partition: PartitionPin, otherwise: float) -> float:
        """What statements pinned to all of ``partition``'s values may still spend (``otherwise``: the
        dataset's remainder, when nothing was charged to the partition column yet)."""
        rows = {
            row.value: row.remaining_epsilon
            for row in self.ledger.partition_balances(
                principal.name, self.dataset.name, accountant=self.accountant
            )
            if row.column == partition.name
        }
        if not rows:
            return otherwise
        return min(rows.get(value, rows[None]) for value in partition.values)

    def _budget(self, principal: Principal) -> ReleasedTable:
        return budget_table(
            self.ledger, principal.name, accountant=self.accountant_of, cap_step=self.cap_step_of
        )

    def _postprocess(self, shape: QueryShape, noisy: ReleasedTable) -> ReleasedTable:
        """The query's own arithmetic, HAVING, ORDER BY and LIMIT, over noisy values only."""
        passthrough = shape.passthrough_columns
        if passthrough is not None:
            positions = [[column.name for column in noisy.columns].index(name) for name in passthrough]
            columns = tuple(
                ResultColumn(name, noisy.columns[i].type)
                for name, i in zip(shape.output_names, positions, strict=True)
            )
            return ReleasedTable(columns, [tuple(row[i] for i in positions) for row in noisy.rows])
        try:
            description, rows = self.postprocessor.run(shape.postprocess.sql(dialect="duckdb"), noisy)
        except duckdb.Error as error:  # the message can only quote noisy values
            raise UnsupportedQueryError(
                "could not compute the select list over the noisy answer",
                detail=str(error).splitlines()[0],
                hint="the budget for this answer is spent; check the expressions around the aggregates",
            ) from None
        return _typed_table(shape.output_names, description, rows)

    def _answer_budget_query(self, tree: exp.Select, principal: Principal) -> StatementOutcome:
        try:
            description, rows = self.postprocessor.run(
                tree.sql(dialect="duckdb"), self._budget(principal), name=BUDGET_TABLE
            )
        except duckdb.Error as error:  # the message can only quote this analyst's own budget
            raise InvalidParameterValueError(
                "could not answer the query on veil.budget", detail=str(error).splitlines()[0]
            ) from None
        starred = any(isinstance(item, exp.Star) or item.is_star for item in tree.expressions)
        names = (
            tuple(name for name, _ in description)  # * expands to the view's own column names
            if starred
            else tuple(output_name(item) for item in tree.expressions)
        )
        return StatementOutcome(f"SELECT {len(rows)}", table=_typed_table(names, description, rows))

    def _session_info(self, principal: Principal) -> SessionInfo:
        return SessionInfo(version=VERSION_STRING, user=principal.name, database=self.dataset.name)

    def answer_literals(self, tree: exp.Expression) -> StatementOutcome | None:
        """``SELECT 1`` and other select lists of plain literals, answered without the sandbox engine,
        or None for any other statement. Drivers and pools send such pings constantly; a trip through
        a worker thread and DuckDB would cost far more than the answer. Nothing here blocks, so the
        session may call it on the event loop. The values and types are those the sandbox gives."""
        items = _literal_items(tree)
        if items is None:
            return None
        statement = classify(tree, self.dataset)
        if not isinstance(statement, ConstantQuery):
            return None
        columns = tuple(
            ResultColumn(name, column_type, _literal_oid(value))
            for name, (column_type, value) in zip(statement.output_names, items, strict=True)
        )
        return StatementOutcome(
            "SELECT 1", table=ReleasedTable(columns, [tuple(value for _, value in items)])
        )

    def _answer_constant(self, query: ConstantQuery, *, principal: Principal) -> StatementOutcome:
        info = self._session_info(principal)
        sql = constant_query(query.tree, info=info).sql(dialect=self.sandbox.dialect)
        description, rows = self.sandbox.execute(sql)
        table = _typed_table(query.output_names, description, rows)
        return StatementOutcome(f"SELECT {len(rows)}", table=table)

    def _show(self, name: str, settings: SessionSettings) -> ReleasedTable:
        if name.upper() == "ALL":
            rows = [(s.name, self._effective(s.name, settings), s.help) for s in SETTINGS]
            columns = ("name", "setting", "description")
            return ReleasedTable(tuple(ResultColumn(c, ColumnType.TEXT) for c in columns), rows)
        value = self._effective(name, settings)
        return ReleasedTable((ResultColumn(name.lower(), ColumnType.TEXT),), [(value,)])

    def _effective(self, name: str, settings: SessionSettings) -> str:
        if name.lower() in READ_ONLY_PARAMETERS:
            return READ_ONLY_PARAMETERS[name.lower()]
        value = settings.get(name)
        if name.lower() == "veil.epsilon" and not value:
            return repr(self.dataset.default_epsilon)
        return value


def _classified(tree: exp.Expression, dataset: DatasetPolicy) -> Statement:
    """``classify``, with a statement too deep for the analysis' recursion refused as PostgreSQL would
    refuse it (54001), before anything runs — not an internal error."""
    try:
        return classify(tree, dataset)
    except RecursionError:
        raise too_deep() from None


_Measured = TypeVar("_Measured")
_UNION_TABLE = "_dp_union"


@dataclass(frozen=True)
class _UnionPart:
    """One part of a UNION ALL planned before anything is reserved: its plan at its share ``epsilon``, the
    main engine SQL, the options it was priced with, its answer-cache key and stored answer, if any, and
    the columns its answer will have."""

    plan: ReleasePlan
    sql: str | None
    epsilon: float
    options: dict[str, Any]
    key: CacheKey | None
    stored: ReleasedTable | None
    columns: tuple[ResultColumn, ...]


def _union_columns(parts: list[tuple[ResultColumn, ...]]) -> tuple[ResultColumn, ...]:
    """The first part's names; each column's type the one all parts share — integer and real make real,
    as PostgreSQL resolves them; anything else is refused (42804) before anything is spent."""
    columns = []
    for index, first in enumerate(parts[0]):
        types = [part[index].type for part in parts]
        if len(set(types)) == 1:
            oids = {part[index].type_oid for part in parts}
            columns.append(ResultColumn(first.name, first.type, oids.pop() if len(oids) == 1 else None))
        elif set(types) == {ColumnType.INTEGER, ColumnType.REAL}:
            columns.append(ResultColumn(first.name, ColumnType.REAL))
        else:
            other = next(t for t in types if t is not first.type)
            raise DatatypeMismatchError(
                f"UNION types {first.type.value} and {other.value} cannot be matched",
                hint=f"make column {index + 1} ({first.name}) the same type in every part, e.g. with CAST",
            )
    return tuple(columns)


def _converted(table: ReleasedTable, columns: tuple[ResultColumn, ...]) -> list[tuple[object, ...]]:
    """A part's rows in the union's column types (an integer column of a part that is real in the union)."""
    widen = [
        i
        for i, (mine, union) in enumerate(zip(table.columns, columns, strict=True))
        if mine.type is ColumnType.INTEGER and union.type is ColumnType.REAL
    ]
    if not widen:
        return table.rows
    return [
        tuple(float(v) if i in widen and v is not None else v for i, v in enumerate(row))  # type: ignore[arg-type]
        for row in table.rows
    ]


def _sum_up(values: list[float]) -> float:
    """An exact sum rounded up, so that a charge is never below the losses it adds."""
    total = math.fsum(values)
    return math.nextafter(total, math.inf) if total > 0 else 0.0


def _union_cost(costs: list[Release], *, epsilon: float | None, delta: float | None) -> Release:
    """One ledger entry for the parts measured: their summed losses (basic composition). When every part
    is measured, the statement's own ε and δ (which the parts' equal shares never exceed)."""
    spent_delta = _sum_up([cost.delta for cost in costs])
    charged_delta = delta if delta is not None and spent_delta > 0 else spent_delta
    return Release(
        epsilon=epsilon if epsilon is not None else _sum_up([cost.epsilon for cost in costs]),
        delta=charged_delta,
        rho=_sum_up([cost.rho or 0.0 for cost in costs]),
        rho_delta=min(_sum_up([cost.rho_delta for cost in costs]), charged_delta),
    )


def _union_description(cost: Release, plans: list[ReleasePlan], stored: list[bool]) -> str:
    """``ε=1 in 2 parts of a UNION ALL (part 1: ε=0.5 (count(*) ε=0.5); part 2: the stored answer, free)``."""
    parts = "; ".join(
        f"part {i}: " + ("the stored answer, free" if hit else plan.describe())
        for i, (plan, hit) in enumerate(zip(plans, stored, strict=True), start=1)
    )
    charge = f"ε={cost.epsilon:.4g}" + (f", δ={cost.delta:.3g}" if cost.delta else "")
    return f"{charge} in {len(plans)} parts of a UNION ALL ({parts})"


@dataclass(frozen=True)
class _Spend:
    """What one statement's reservation is for: its cost, its text, its audit charge, and its
    description in notices and errors."""

    cost: Release
    text: str
    charge: Charge
    description: str
    partition: PartitionPin | None = None  # parallel composition: charged to these values only


class _EngineCalls:
    """The engine as one statement sees it, remembering whether any query was sent: from then on the
    engine may have read private rows, and the statement is charged whatever its outcome."""

    def __init__(self, execute: Execute) -> None:
        self._execute = execute
        self.sent = False

    def execute(self, sql: str) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
        self.sent = True
        return self._execute(sql)


_CHANGES_THE_SESSION = (
    SetStatement,
    ResetStatement,
    TransactionStatement,
    DiscardStatement,
    DeallocateStatement,
)
# One value per column type: post-processing run over a row of these shows the answer's column types
# (over no row at all, DuckDB would type a date column as NULL).
_SAMPLE_VALUES: dict[ColumnType, object] = {
    ColumnType.INTEGER: 1,
    ColumnType.REAL: 1.0,
    ColumnType.TEXT: "",
    ColumnType.DATE: datetime.date(2000, 1, 1),
    ColumnType.TIMESTAMP: datetime.datetime(2000, 1, 1),
    ColumnType.BOOLEAN: True,
}


_INT64_LIMIT = 2**63


def _public_names(tree: exp.Expression, description: list[tuple[str, str]]) -> tuple[str, ...]:
    """Column names as PostgreSQL gives them (``count`` for COUNT(*), not DuckDB's ``count_star()``), where
    the select list says them; the engine's for ``*`` and anything else."""
    items = tree.expressions if isinstance(tree, exp.Select) else []
    if len(items) != len(description) or any(
        item.find(exp.Star) is not None and not isinstance(item, exp.Count) for item in items
    ):
        return tuple(name for name, _ in description)
    return tuple(output_name(item) for item in items)


def _literal_items(tree: exp.Expression) -> list[tuple[ColumnType, object]] | None:
    """(type, value) of each item of a ``SELECT`` of plain literals and nothing else (no FROM, no
    LIMIT …), or None. Only what DuckDB types unambiguously: integers (INTEGER/BIGINT), strings
    (VARCHAR) and booleans — decimals, NULL and escapes are left to the sandbox."""
    if not isinstance(tree, exp.Select) or any(
        value for key, value in tree.args.items() if key != "expressions"
    ):
        return None
    items = []
    for item in tree.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if type(node) is exp.Boolean:
            items.append((ColumnType.BOOLEAN, bool(node.this)))
        elif type(node) is exp.Literal and node.is_string:
            items.append((ColumnType.TEXT, node.this))
        elif (
            type(node) is exp.Literal
            and node.this.isascii()
            and node.this.isdigit()
            and int(node.this) < _INT64_LIMIT
        ):
            items.append((ColumnType.INTEGER, int(node.this)))
        else:
            return None
    return items or None


def _selections(plan: ReleasePlan) -> set[str]:
    """The selection mechanism of a top-k plan, which no measurement names."""
    return {plan.selection.mechanism} if isinstance(plan, TopKPlan) and plan.selection is not None else set()


def _release_options(shape: QueryShape, epsilon: float, settings: SessionSettings) -> dict[str, Any]:
    """The session's choices that shape a release plan, for ``prepare_release``."""
    return {
        "delta": float(settings.get("veil.delta")),
        "gaussian": settings.get("veil.mechanism") == "gaussian",
        "other_row": settings.get("veil.other_row") == "on",
        "bound_epsilon": bound_choice_epsilon(shape, epsilon),
    }


def _chooses_bound(plan: ReleasePlan) -> bool:
    """Whether answering the plan starts by choosing max_contributions with DP: "auto", and the bound
    matters to what it measures (not for COUNT(DISTINCT <privacy unit>) alone, nor for a top-k selection)."""
    return (
        plan.shape.table.auto_contributions and bound_matters(plan.shape) and not isinstance(plan, TopKPlan)
    )


def _presentation(settings: SessionSettings) -> Presentation:
    """How this session wants noisy answers shown (post-processing only: release/present.py)."""
    return settings_presentation(settings.get("veil.raw_counts"), settings.get("veil.round"))


def _setting(settings: SessionSettings, name: str) -> str | None:
    """A setting's value in this session, or a server parameter's; None for a name Veil does not know."""
    if name.lower() in SETTINGS_BY_NAME:
        return settings.get(name)
    return READ_ONLY_PARAMETERS.get(name.lower())


def _typed_table(
    names: tuple[str, ...], description: list[tuple[str, str]], rows: list[tuple[object, ...]]
) -> ReleasedTable:
    """Columns named as PostgreSQL would name them, typed from the sandbox engine's result."""
    columns = tuple(
        ResultColumn(
            name,
            _ENGINE_TYPES.get(_without_modifier(type_name), _decimal_or_text(type_name)),
            _SPECIFIC_OIDS.get(_without_modifier(type_name)),
        )
        for name, (_, type_name) in zip(names, description, strict=True)
    )
    decimals = [i for i, (_, type_name) in enumerate(description) if _is_decimal(type_name)]
    return ReleasedTable(columns, [_plain(row, decimals) for row in rows] if decimals else list(rows))


# Engine types more specific than their column type's, sent as PostgreSQL sends them: integers narrower
# than int8 (node-postgres, for one, turns int8 into a JavaScript string but int4 into a number), and a
# timestamp with time zone — the engines give it in UTC, an aware value, which the wire sends with its
# offset (`2026-01-02 03:04:05+00`), as PostgreSQL does with TimeZone = UTC.
_SPECIFIC_OIDS = {
    "INTEGER": pgtypes.INT4,
    "int4": pgtypes.INT4,
    "SMALLINT": pgtypes.INT2,
    "int2": pgtypes.INT2,
    "TIMESTAMP WITH TIME ZONE": pgtypes.TIMESTAMPTZ,
    "timestamptz": pgtypes.TIMESTAMPTZ,
}


def _literal_oid(value: object) -> int | None:
    """PostgreSQL types an integer literal int4 when it fits, else int8."""
    if isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31:
        return pgtypes.INT4
    return None


def _without_modifier(type_name: str) -> str:
    """PostgreSQL describes a column declared ``timestamp(3)`` so: it is a timestamp all the same."""
    return type_name.split("(", 1)[0]


def _is_decimal(type_name: str) -> bool:
    """DuckDB's ``DECIMAL(18,3)``; PostgreSQL's ``numeric``, or ``numeric(10,2)`` for a column declared so."""
    return type_name.startswith(("DECIMAL", "numeric(")) or type_name == "numeric"


def _decimal_or_text(type_name: str) -> ColumnType:
    return ColumnType.REAL if _is_decimal(type_name) else ColumnType.TEXT


def _plain(row: tuple[object, ...], decimals: list[int]) -> tuple[object, ...]:
    """Decimals (DuckDB DECIMAL, PostgreSQL numeric) become floats; only those columns are looked at,
    so a large result of other types passes through untouched."""
    values = list(row)
    for i in decimals:
        if isinstance(values[i], Decimal):
            values[i] = float(values[i])  # type: ignore[arg-type]
    return tuple(values)
