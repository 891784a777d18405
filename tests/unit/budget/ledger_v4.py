"""A version-4 ledger, as Veil made it before its amounts were exact, for the upgrade tests.

The DDL is a verbatim copy of ``create_statements`` of budget/schema.py at version 4 (commit
4e4cb53): grants, caps and spends hold ε and δ as floating point, the totals as decimal text. Keep it
as it is — it is what ledgers in the field look like, whatever today's schema becomes.

The rows are a small history with everything an upgrade must keep: grants and a revoke, a renewing
grant, a cap and a removed cap, committed, cancelled and reserved spends, a Gaussian spend (ρ), δ of
10⁻¹² and a third of 10⁻⁹, spends charged to partitions, an audit entry, a stored answer that names
its spend by id — and one spend of 10⁻³¹, below today's quantum, which the upgrade charges as one
quantum. The running totals are what version 4 stored: the exact part (releases, ε, δ, δ outside ρ)
as its 28-digit decimal text; the float statistics are rebuilt by every upgrade.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal

from budget.store import open_store

VERIFIER = "SCRAM-SHA-256$4096:c2FsdHNhbHQ=$c3RvcmVka2V5:c2VydmVya2V5"
AT = "2026-01-10T12:00:00+00:00"
PERIOD = "2026-01-01"  # bob's grant renews monthly; the tests' clock is in January 2026
REGION = "patients.region"

SQLITE = (
    """CREATE TABLE schema_version (application TEXT NOT NULL, version INTEGER NOT NULL)""",
    """CREATE TABLE analysts (
        name TEXT PRIMARY KEY,
        verifier TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE grants (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        analyst TEXT NOT NULL,
        dataset TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('grant', 'revoke')),
        epsilon REAL NOT NULL CHECK (epsilon >= 0),
        delta REAL NOT NULL CHECK (delta >= 0 AND delta < 1),
        renewal TEXT CHECK (renewal IN ('day', 'week', 'month')),
        created_at TEXT NOT NULL
    )""",
    """CREATE INDEX grants_by_pair ON grants (analyst, dataset)""",
    """CREATE TABLE caps (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        dataset TEXT NOT NULL,
        epsilon REAL CHECK (epsilon > 0),
        delta REAL CHECK (delta >= 0 AND delta < 1),
        created_at TEXT NOT NULL
    )""",
    """CREATE INDEX caps_by_dataset ON caps (dataset)""",
    """CREATE TABLE spends (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        analyst TEXT NOT NULL,
        dataset TEXT NOT NULL,
        period TEXT NOT NULL,
        epsilon REAL NOT NULL CHECK (epsilon > 0),
        delta REAL NOT NULL CHECK (delta >= 0 AND delta < 1),
        rho REAL CHECK (rho > 0),
        rho_delta REAL NOT NULL DEFAULT 0 CHECK (rho_delta >= 0 AND rho_delta < 1),
        statement TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('reserved', 'committed', 'cancelled')),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        partition_column TEXT NOT NULL DEFAULT '',
        partition_values TEXT NOT NULL DEFAULT ''
    )""",
    """CREATE INDEX spends_by_pair ON spends (analyst, dataset, state)""",
    """CREATE TABLE totals (
        analyst TEXT NOT NULL,
        dataset TEXT NOT NULL,
        period TEXT NOT NULL,
        releases INTEGER NOT NULL,
        epsilon TEXT NOT NULL,
        delta TEXT NOT NULL,
        epsilon_squares REAL NOT NULL,
        epsilon_expm1 REAL NOT NULL,
        rho REAL NOT NULL,
        zcdp_delta TEXT NOT NULL,
        PRIMARY KEY (analyst, dataset, period)
    )""",
    """CREATE TABLE partition_totals (
        analyst TEXT NOT NULL,
        dataset TEXT NOT NULL,
        period TEXT NOT NULL,
        partition_column TEXT NOT NULL,
        partition_value TEXT NOT NULL,
        releases INTEGER NOT NULL,
        epsilon TEXT NOT NULL,
        delta TEXT NOT NULL,
        epsilon_squares REAL NOT NULL,
        epsilon_expm1 REAL NOT NULL,
        rho REAL NOT NULL,
        zcdp_delta TEXT NOT NULL,
        PRIMARY KEY (analyst, dataset, period, partition_column, partition_value)
    )""",
    """CREATE TABLE audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        analyst TEXT NOT NULL,
        client TEXT NOT NULL,
        dataset TEXT NOT NULL,
        statement TEXT NOT NULL,
        decision TEXT NOT NULL CHECK (decision IN ('answered', 'cached', 'refused', 'failed')),
        epsilon REAL NOT NULL,
        delta REAL NOT NULL,
        accountant TEXT NOT NULL,
        mechanisms TEXT NOT NULL,
        sqlstate TEXT NOT NULL,
        error TEXT NOT NULL,
        outcome TEXT NOT NULL DEFAULT ''
    )""",
    """CREATE INDEX audit_by_time ON audit (at)""",
    """CREATE TABLE answers (
        analyst TEXT NOT NULL,
        dataset TEXT NOT NULL,
        data_version TEXT NOT NULL,
        query_key TEXT NOT NULL,
        answer TEXT NOT NULL,
        spend_id INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (analyst, dataset, data_version, query_key)
    )""",
    """CREATE TRIGGER grants_no_update BEFORE UPDATE ON grants
            BEGIN SELECT RAISE(ABORT, 'grants are append-only'); END""",
    """CREATE TRIGGER grants_no_delete BEFORE DELETE ON grants
            BEGIN SELECT RAISE(ABORT, 'grants are append-only'); END""",
    """CREATE TRIGGER caps_no_update BEFORE UPDATE ON caps
            BEGIN SELECT RAISE(ABORT, 'caps are append-only'); END""",
    """CREATE TRIGGER caps_no_delete BEFORE DELETE ON caps
            BEGIN SELECT RAISE(ABORT, 'caps are append-only'); END""",
    """CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
            BEGIN SELECT RAISE(ABORT, 'audit are append-only'); END""",
    """CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
            BEGIN SELECT RAISE(ABORT, 'audit are append-only'); END""",
    """CREATE TRIGGER spends_no_delete BEFORE DELETE ON spends
       BEGIN SELECT RAISE(ABORT, 'spends are append-only'); END""",
    """CREATE TRIGGER spends_only_close BEFORE UPDATE ON spends
       WHEN OLD.state <> 'reserved' OR NEW.state = 'reserved' OR NEW.id IS NOT OLD.id OR NEW.analyst IS NOT OLD.analyst OR NEW.dataset IS NOT OLD.dataset OR NEW.period IS NOT OLD.period OR NEW.epsilon IS NOT OLD.epsilon OR NEW.delta IS NOT OLD.delta OR NEW.rho IS NOT OLD.rho OR NEW.rho_delta IS NOT OLD.rho_delta OR NEW.statement IS NOT OLD.statement OR NEW.created_at IS NOT OLD.created_at OR NEW.partition_column IS NOT OLD.partition_column OR NEW.partition_values IS NOT OLD.partition_values
       BEGIN SELECT RAISE(ABORT, 'only a reserved spend may change, and only its state'); END""",
)

POSTGRES = (
    """CREATE TABLE schema_version (application TEXT COLLATE "C" NOT NULL, version INTEGER NOT NULL)""",
    """CREATE TABLE analysts (
        name TEXT COLLATE "C" PRIMARY KEY,
        verifier TEXT COLLATE "C" NOT NULL,
        created_at TEXT COLLATE "C" NOT NULL
    )""",
    """CREATE TABLE grants (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        analyst TEXT COLLATE "C" NOT NULL,
        dataset TEXT COLLATE "C" NOT NULL,
        kind TEXT COLLATE "C" NOT NULL CHECK (kind IN ('grant', 'revoke')),
        epsilon DOUBLE PRECISION NOT NULL CHECK (epsilon >= 0),
        delta DOUBLE PRECISION NOT NULL CHECK (delta >= 0 AND delta < 1),
        renewal TEXT COLLATE "C" CHECK (renewal IN ('day', 'week', 'month')),
        created_at TEXT COLLATE "C" NOT NULL
    )""",
    """CREATE INDEX grants_by_pair ON grants (analyst, dataset)""",
    """CREATE TABLE caps (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        dataset TEXT COLLATE "C" NOT NULL,
        epsilon DOUBLE PRECISION CHECK (epsilon > 0),
        delta DOUBLE PRECISION CHECK (delta >= 0 AND delta < 1),
        created_at TEXT COLLATE "C" NOT NULL
    )""",
    """CREATE INDEX caps_by_dataset ON caps (dataset)""",
    """CREATE TABLE spends (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        analyst TEXT COLLATE "C" NOT NULL,
        dataset TEXT COLLATE "C" NOT NULL,
        period TEXT COLLATE "C" NOT NULL,
        epsilon DOUBLE PRECISION NOT NULL CHECK (epsilon > 0),
        delta DOUBLE PRECISION NOT NULL CHECK (delta >= 0 AND delta < 1),
        rho DOUBLE PRECISION CHECK (rho > 0),
        rho_delta DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (rho_delta >= 0 AND rho_delta < 1),
        statement TEXT COLLATE "C" NOT NULL,
        state TEXT COLLATE "C" NOT NULL CHECK (state IN ('reserved', 'committed', 'cancelled')),
        created_at TEXT COLLATE "C" NOT NULL,
        updated_at TEXT COLLATE "C" NOT NULL,
        partition_column TEXT COLLATE "C" NOT NULL DEFAULT '',
        partition_values TEXT COLLATE "C" NOT NULL DEFAULT ''
    )""",
    """CREATE INDEX spends_by_pair ON spends (analyst, dataset, state)""",
    """CREATE TABLE totals (
        analyst TEXT COLLATE "C" NOT NULL,
        dataset TEXT COLLATE "C" NOT NULL,
        period TEXT COLLATE "C" NOT NULL,
        releases INTEGER NOT NULL,
        epsilon TEXT COLLATE "C" NOT NULL,
        delta TEXT COLLATE "C" NOT NULL,
        epsilon_squares DOUBLE PRECISION NOT NULL,
        epsilon_expm1 DOUBLE PRECISION NOT NULL,
        rho DOUBLE PRECISION NOT NULL,
        zcdp_delta TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (analyst, dataset, period)
    )""",
    """CREATE TABLE partition_totals (
        analyst TEXT COLLATE "C" NOT NULL,
        dataset TEXT COLLATE "C" NOT NULL,
        period TEXT COLLATE "C" NOT NULL,
        partition_column TEXT COLLATE "C" NOT NULL,
        partition_value TEXT COLLATE "C" NOT NULL,
        releases INTEGER NOT NULL,
        epsilon TEXT COLLATE "C" NOT NULL,
        delta TEXT COLLATE "C" NOT NULL,
        epsilon_squares DOUBLE PRECISION NOT NULL,
        epsilon_expm1 DOUBLE PRECISION NOT NULL,
        rho DOUBLE PRECISION NOT NULL,
        zcdp_delta TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (analyst, dataset, period, partition_column, partition_value)
    )""",
    """CREATE TABLE audit (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        at TEXT COLLATE "C" NOT NULL,
        analyst TEXT COLLATE "C" NOT NULL,
        client TEXT COLLATE "C" NOT NULL,
        dataset TEXT COLLATE "C" NOT NULL,
        statement TEXT COLLATE "C" NOT NULL,
        decision TEXT COLLATE "C" NOT NULL CHECK (decision IN ('answered', 'cached', 'refused', 'failed')),
        epsilon DOUBLE PRECISION NOT NULL,
        delta DOUBLE PRECISION NOT NULL,
        accountant TEXT COLLATE "C" NOT NULL,
        mechanisms TEXT COLLATE "C" NOT NULL,
        sqlstate TEXT COLLATE "C" NOT NULL,
        error TEXT COLLATE "C" NOT NULL,
        outcome TEXT COLLATE "C" NOT NULL DEFAULT ''
    )""",
    """CREATE INDEX audit_by_time ON audit (at)""",
    """CREATE TABLE answers (
        analyst TEXT COLLATE "C" NOT NULL,
        dataset TEXT COLLATE "C" NOT NULL,
        data_version TEXT COLLATE "C" NOT NULL,
        query_key TEXT COLLATE "C" NOT NULL,
        answer TEXT COLLATE "C" NOT NULL,
        spend_id BIGINT NOT NULL,
        created_at TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (analyst, dataset, data_version, query_key)
    )""",
    """CREATE FUNCTION veil_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION '% are append-only', TG_TABLE_NAME; END $$""",
    """CREATE TRIGGER grants_append_only BEFORE UPDATE OR DELETE ON grants
            FOR EACH ROW EXECUTE FUNCTION veil_append_only()""",
    """CREATE TRIGGER caps_append_only BEFORE UPDATE OR DELETE ON caps
            FOR EACH ROW EXECUTE FUNCTION veil_append_only()""",
    """CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
            FOR EACH ROW EXECUTE FUNCTION veil_append_only()""",
    """CREATE TRIGGER spends_no_delete BEFORE DELETE ON spends
       FOR EACH ROW EXECUTE FUNCTION veil_append_only()""",
    """CREATE OR REPLACE FUNCTION veil_spend_closes() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF OLD.state <> 'reserved' OR NEW.state = 'reserved'
            OR (NEW.id, NEW.analyst, NEW.dataset, NEW.period, NEW.epsilon, NEW.delta, NEW.rho, NEW.rho_delta, NEW.statement, NEW.created_at, NEW.partition_column, NEW.partition_values)
               IS DISTINCT FROM (OLD.id, OLD.analyst, OLD.dataset, OLD.period, OLD.epsilon, OLD.delta, OLD.rho, OLD.rho_delta, OLD.statement, OLD.created_at, OLD.partition_column, OLD.partition_values) THEN
           RAISE EXCEPTION 'only a reserved spend may change, and only its state';
         END IF;
         RETURN NEW;
       END $$""",
    """CREATE TRIGGER spends_only_close BEFORE UPDATE ON spends
       FOR EACH ROW EXECUTE FUNCTION veil_spend_closes()""",
)
ANALYSTS = [("alice", VERIFIER, AT), ("bob", VERIFIER, AT)]

# id, analyst, dataset, kind, epsilon, delta, renewal, created_at
GRANTS = [
    (1, "alice", "demo", "grant", 1.0, 1e-05, None, AT),
    (2, "alice", "demo", "grant", 0.3, 1e-12, None, AT),
    (3, "alice", "demo", "revoke", 0.1, 0.0, None, AT),
    (4, "bob", "demo", "grant", 2.0, 1e-09, "month", AT),
    (5, "alice", "tiny", "grant", 0.5, 0.0, None, AT),
]

# id, dataset, epsilon, delta, created_at
CAPS = [
    (1, "demo", 5.0, 1e-06, AT),
    (2, "tiny", 1.0, 0.0, AT),
    (3, "tiny", None, None, AT),  # the cap removed again
]


def _spend(
    id: int,
    epsilon: float,
    statement: str,
    state: str = "committed",
    *,
    analyst: str = "alice",
    dataset: str = "demo",
    period: str = "",
    delta: float = 0.0,
    rho: float | None = None,
    rho_delta: float = 0.0,
    partition: tuple[str, str] = ("", ""),
) -> tuple[object, ...]:
    """A row of ``spends``: id, analyst, dataset, period, epsilon, delta, rho, rho_delta, statement, state,
    created_at, updated_at, partition_column, partition_values."""
    return (
        id,
        analyst,
        dataset,
        period,
        epsilon,
        delta,
        rho,
        rho_delta,
        statement,
        state,
        AT,
        AT,
        *partition,
    )


SPENDS = [
    _spend(1, 0.1, "SELECT COUNT(*) FROM patients"),
    _spend(2, 0.1, "SELECT SUM(cost) FROM visits", delta=1e-12, rho=0.0125),
    _spend(3, 0.1, "SELECT AVG(age) FROM patients", "cancelled"),
    _spend(4, 0.25, "SELECT COUNT(*) FROM visits", "reserved"),
    _spend(5, 0.05, "SELECT 5", partition=(REGION, '["north"]')),
    _spend(6, 0.07, "SELECT 6", partition=(REGION, '["north", "south"]')),
    _spend(
        7,
        0.3333333333333333,
        "SELECT 7",
        analyst="bob",
        period=PERIOD,
        delta=3.3333333333333335e-10,
        rho_delta=3.3333333333333335e-10,
    ),
    _spend(8, 1e-31, "SELECT 8", dataset="tiny"),
]


# id, at, analyst, client, dataset, statement, decision, epsilon, delta, accountant, mechanisms,
# sqlstate, error, outcome
AUDIT = [
    (
        1,
        AT,
        "alice",
        "127.0.0.1:5000",
        "demo",
        "SELECT COUNT(*) FROM patients",
        "answered",
        0.1,
        0.0,
        "basic",
        "laplace",
        "",
        "",
        "",
    ),
]

# analyst, dataset, data_version, query_key, answer, spend_id, created_at
ANSWERS = [("alice", "demo", "v1", "count-patients", '{"rows": [[41]]}', 1, AT)]

COUNTING = ("reserved", "committed")
# The balances an administrator saw before the upgrade (basic composition, bob in January 2026):
# ε and δ granted, spent, and the releases counted.
BALANCES = {
    ("alice", "demo"): (1.2, 0.57, 1.0000001e-05, 1e-12, 5),  # 0.45 ordinary + 0.12 on 'north'
    ("alice", "tiny"): (0.5, 1e-31, 0.0, 0.0, 1),
    ("bob", "demo"): (2.0, 0.3333333333333333, 1e-09, 3.3333333333333335e-10, 1),
}


def _sum(values: Iterable[float]) -> Decimal:
    return sum((Decimal(repr(value)) for value in values), Decimal(0))


def _totals_row(spends: list[tuple[object, ...]]) -> tuple[object, ...]:
    """releases, ε, δ, Σε², Σε(e^ε−1), ρ, δ outside ρ — the exact part as version 4 wrote it."""
    outside = [spend[7] if spend[6] is not None else spend[5] for spend in spends]
    return (
        len(spends),
        str(_sum(spend[4] for spend in spends)),  # type: ignore[misc]
        str(_sum(spend[5] for spend in spends)),  # type: ignore[misc]
        0.0,
        0.0,
        0.0,
        str(_sum(outside)),  # type: ignore[arg-type]
    )


def totals() -> dict[tuple[str, ...], tuple[object, ...]]:
    """Every row of ``totals`` and ``partition_totals`` that version 4 kept for :data:`SPENDS`."""
    counting = [spend for spend in SPENDS if spend[9] in COUNTING]
    rows: dict[tuple[str, ...], tuple[object, ...]] = {}
    for dataset in {str(spend[2]) for spend in counting}:
        rows[("", dataset, "")] = _totals_row([s for s in counting if s[2] == dataset])
    for key in {(str(s[1]), str(s[2]), str(s[3])) for s in counting if not s[12]}:
        rows[key] = _totals_row([s for s in counting if (s[1], s[2], s[3]) == key and not s[12]])
    charged = [s for s in counting if s[12]]
    for value in ("north", "south"):
        key = ("alice", "demo", "", REGION, json.dumps(value))
        rows[key] = _totals_row([s for s in charged if value in json.loads(str(s[13]))])
    north = rows[("alice", "demo", "", REGION, '"north"')]
    rows[("alice", "demo", "", REGION, "")] = (len(charged), *north[1:])  # the widest value: north
    return rows


def make_version_4_ledger(location: str, schema: str | None) -> None:
    """Create the version-4 ledger at ``location`` (a file, or a DSN and ``schema``) with its rows."""
    store = open_store(location, create=True, schema=schema)
    try:
        with store.transaction(write=True) as tx:
            if store.dialect == "postgres":
                tx.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            for statement in SQLITE if store.dialect == "sqlite" else POSTGRES:
                tx.execute(statement)
            tx.execute("INSERT INTO schema_version VALUES ('veil-ledger', 4)")
            tables = {
                "analysts": ANALYSTS,
                "grants": GRANTS,
                "caps": CAPS,
                "spends": SPENDS,
                "audit": AUDIT,
                "answers": ANSWERS,
            }
            for table, rows in tables.items():
                for row in rows:
                    tx.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(row))})", row)
            for key, row in totals().items():
                table = "totals" if len(key) == 3 else "partition_totals"
                tx.execute(
                    f"INSERT INTO {table} VALUES ({', '.join('?' * (len(key) + len(row)))})", (*key, *row)
                )
            if store.dialect == "postgres":
                for table in ("grants", "caps", "spends", "audit"):
                    tx.execute(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), MAX(id)) FROM {table}"
                    )
    finally:
        store.close()
