"""Top-m genre combinations per user class under DP: Yamaguchi & Yoshiura (seed 004), Tables 3-12 shape.

The paper recommends, for each class of users, the m most "purchased" movie categories, where a purchase
is a rating >= 4 and a category is a *combination* of genres ("Action|Adventure|Sci-Fi"). It compares:

* (a) conventional: a noisy frequency table over every combination; the sensitivity is the number of
  combinations, because one person can purchase all of them;
* (b) reduced attributes, order i: only combinations of at most i genres are counted (sensitivity = how
  many such combinations exist), the others are ignored;
* (c) proposed: a noisy table of the basic genres (budget r*eps) plus a noisy "relationship" table
  saying how many of the m slots go to combinations of 1, 2, 3 genres (budget (1-r)*eps); the frequency
  of a combination is estimated as the mean of its genres' frequencies, r = 0.1.

* (d) top-k, not in the paper: Veil's DP top-k selection answers, per class, "the m categories with the
  most distinct purchasers" in one SQL query (ROW_NUMBER() OVER (PARTITION BY class ...) <= m): the
  exponential mechanism picks the m categories (each person moves a count by at most 1, whatever they
  purchased), then their counts get noise; ε per query, one query per m.

Accuracy is P@m against the non-private top-m. Every noisy table here is a SQL query answered by Veil's
QueryService in process (policy, ledger, contribution bounding, noise), so the privacy accounting is
Veil's own; only the estimation step of (c) is post-processing in Python. The policy turns Veil's answer
cache off, so every run is a fresh noisy draw that the ledger charges (with the cache on, runs 2… would
get run 1's stored answers for free); the script reports what the ledger charged in each run. See
docs/examples.md.

    .venv/bin/python examples/movielens_genres.py [--runs N] [--seed S] [--json] [--data PATH]

MovieLens ml-latest-small has no gender, age or occupation, so the user classes are per-user attributes
with fixed public cut-offs: activity (number of ratings), cohort (year of the first rating) and both.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.duckdb import DuckDBBackend
from proxy.cli.sources import progress_callback
from proxy.config import parse_config
from proxy.errors import UnsupportedQueryError
from proxy.query.service import Principal, QueryService
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "movielens_dslabs.csv"
DATASET = "movielens"

# The genre vocabulary: the 18 genres MovieLens documents plus IMAX, as this release writes them. Public
# metadata, not read from the ratings. "(no genres listed)" never combines with another label, so it is
# one more order-1 category.
NO_GENRES = "(no genres listed)"
GENRES = (
    "Action",
    "Adventure",
    "Animation",
    "Children",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Fantasy",
    "Film-Noir",
    "Horror",
    "IMAX",
    "Musical",
    "Mystery",
    "Romance",
    "Sci-Fi",
    "Thriller",
    "War",
    "Western",
)
VOCABULARY = (NO_GENRES, *GENRES)
MAX_ORDER = 3  # the paper's reduced-attributes and proposed methods go up to third-order categories
PURCHASE_RATING = 4.0  # "a user bought a category if they rated it 4 or 5"
EPSILONS = (1.0, 2.0)  # the paper's "strong" and "weak" anonymization
TOP_M = (10, 20)
RATIO = 0.1  # r: the basic table gets r*eps, the relationship table (1 - r)*eps

APPROACHES = ("exact", "conventional", "reduced1", "reduced2", "reduced3", "proposed", "topk")
PRIVATE_APPROACHES = APPROACHES[1:]
TOP_K = "topk"  # one query per m, each charged ε: its ledger accounts are topk10, topk20, …
NONE_LEVEL = "none"

# User classes: per-user attributes with fixed, public cut-offs (each user is in exactly one class).
ACTIVITY_SQL = "CASE WHEN n_ratings < 50 THEN 'light' WHEN n_ratings < 150 THEN 'medium' ELSE 'heavy' END"
COHORT_SQL = (
    "CASE WHEN first_year < 2000 THEN '-1999' WHEN first_year < 2005 THEN '2000-2004' "
    "WHEN first_year < 2010 THEN '2005-2009' ELSE '2010-' END"
)
ACTIVITY = ("light", "medium", "heavy")
COHORT = ("-1999", "2000-2004", "2005-2009", "2010-")


@dataclass(frozen=True)
class Experiment:
    column: str  # the public class column of the derived tables
    title: str
    classes: tuple[str, ...]


EXPERIMENTS = (
    Experiment(
        "activity", "activity: ratings < 50 / 50-149 / >= 150 (cf. gender x age, Tables 3-4)", ACTIVITY
    ),
    Experiment("cohort", "cohort: year of the first rating (cf. occupation, Tables 5-6)", COHORT),
    Experiment(
        "segment",
        "activity x cohort, 12 small classes (cf. gender x age x occupation, Tables 7-8)",
        tuple(f"{a}/{c}" for a in ACTIVITY for c in COHORT),
    ),
)


def combinations_up_to(order: int) -> tuple[str, ...]:
    """Every category of at most ``order`` genres, written as the data writes them (sorted, '|')."""
    combos = [NO_GENRES, *GENRES]
    for k in range(2, order + 1):
        combos += ["|".join(c) for c in itertools.combinations(GENRES, k)]
    return tuple(combos)


def combinations_of_order(order: int) -> tuple[str, ...]:
    if order == 1:
        return VOCABULARY
    return tuple("|".join(c) for c in itertools.combinations(GENRES, order))


# --------------------------------------------------------------------------------------------------------
# The data, in DuckDB


def build_database(data: Path, path: Path) -> tuple[str, ...]:
    """Derived tables for Veil (one row per person and purchased category, etc.) and the public catalog
    of genre combinations. Returns that catalog."""
    genres_sorted = "array_to_string(list_sort(string_split(genres, '|')), '|')"
    with duckdb.connect(str(path)) as connection:
        connection.execute(
            f"CREATE TABLE ratings AS SELECT CAST(userId AS BIGINT) AS user_id, CAST(movieId AS BIGINT) AS movie_id,"
            f" {genres_sorted} AS combo, CAST(rating AS DOUBLE) AS rating, CAST(timestamp AS BIGINT) AS ts"
            " FROM read_csv(?, header = true) WHERE genres IS NOT NULL",
            [str(data)],
        )
        connection.execute(
            "CREATE TABLE users AS SELECT user_id, n_ratings, first_year,"
            f" {ACTIVITY_SQL} AS activity, {COHORT_SQL} AS cohort,"
            f" ({ACTIVITY_SQL}) || '/' || ({COHORT_SQL}) AS segment"
            " FROM (SELECT user_id, COUNT(*) AS n_ratings, year(to_timestamp(MIN(ts))) AS first_year"
            " FROM ratings GROUP BY user_id)"
        )
        classes = "u.user_id, u.activity, u.cohort, u.segment"
        # (a)/(b): one row per person and purchased category (a person counts once per category)
        connection.execute(
            f"CREATE TABLE combos AS SELECT DISTINCT {classes}, r.combo,"
            " len(string_split(r.combo, '|')) AS n_genres"
            f" FROM ratings r JOIN users u USING (user_id) WHERE r.rating >= {PURCHASE_RATING}"
        )
        for order in range(1, MAX_ORDER + 1):  # same rows: Veil drops those outside the public domain
            connection.execute(f"CREATE TABLE combos_upto{order} AS SELECT * FROM combos")
        # (c) basic table: each purchased category split into its genres (Veil bounds a person's total)
        connection.execute(
            "CREATE TABLE purchase_genres AS SELECT user_id, activity, cohort, segment,"
            " unnest(string_split(combo, '|')) AS genre FROM combos"
        )
        # (c) relationship table: one indicator per person and order of the categories they purchased
        connection.execute(
            "CREATE TABLE purchase_orders AS SELECT DISTINCT user_id, activity, cohort, segment, n_genres"
            " FROM combos"
        )
        catalog = [
            row[0] for row in connection.execute("SELECT DISTINCT combo FROM ratings ORDER BY 1").fetchall()
        ]
    return tuple(catalog)


def _values(values: Iterable[object]) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def policy_toml(catalog: Sequence[str], *, max_epsilon: float) -> str:
    """One DuckDB dataset; every table's privacy unit is the user and its L (max_contributions) is the
    number of public cells of its key, which is the paper's sensitivity. In ``combos*`` and
    ``purchase_orders`` a person has at most one row per cell, so nobody is scaled down; in
    ``purchase_genres`` a person has one row per purchased category and genre, scaled to L = 20 in total."""
    classes = {e.column: e.classes for e in EXPERIMENTS}
    class_columns = "".join(
        f'{column} = {{ type = "text", public = true, values = {_values(values)} }}\n'
        for column, values in classes.items()
    )
    tables = {
        "combos": ("combo", "text", catalog),
        **{f"combos_upto{i}": ("combo", "text", combinations_up_to(i)) for i in range(1, MAX_ORDER + 1)},
        "purchase_genres": ("genre", "text", VOCABULARY),
        "purchase_orders": ("n_genres", "integer", range(1, MAX_ORDER + 1)),
    }
    text = f"""
[datasets.{DATASET}]
path = "movielens.duckdb"
default_epsilon = 1.0
max_epsilon = {max_epsilon!r}
answer_cache = false  # every run is a fresh noisy draw, charged (a cached answer would be free)
"""
    for table, (key, type_, domain) in tables.items():
        domain = list(domain)
        text += f"""
[datasets.{DATASET}.tables.{table}]
privacy_unit = "user_id"
max_contributions = {len(domain)}

[datasets.{DATASET}.tables.{table}.columns]
user_id = {{ type = "integer" }}
{class_columns}{key} = {{ type = "{type_}", public = true, values = {_values(domain)} }}
"""
    return text


# --------------------------------------------------------------------------------------------------------
# Exact (non-private) statistics, straight from DuckDB

Table = dict[str, dict[object, float]]  # class -> key -> count


def exact_table(connection: duckdb.DuckDBPyConnection, sql: str) -> Table:
    table: Table = {}
    for cls, key, value in connection.execute(sql).fetchall():
        table.setdefault(cls, {})[key] = float(value)
    return table


@dataclass
class ExactStatistics:
    combos: Table  # distinct purchasers per category
    basic: Table  # the basic table as Veil bounds it (each person's genre rows scaled to L = 20)
    orders: Table  # distinct purchasers per order 1..3
    records: dict[str, int]  # purchase records per class (the paper's weights, Table 13)


def exact_statistics(path: Path, experiment: Experiment) -> ExactStatistics:
    column = experiment.column
    bound = len(VOCABULARY)
    with duckdb.connect(str(path), read_only=True) as connection:
        combos = exact_table(connection, f"SELECT {column}, combo, COUNT(*) FROM combos GROUP BY ALL")
        basic = exact_table(
            connection,
            f"SELECT {column}, genre, SUM(w) FROM purchase_genres JOIN (SELECT user_id,"
            f" LEAST(1.0, {bound} / COUNT(*)) AS w FROM purchase_genres GROUP BY user_id) USING (user_id)"
            " GROUP BY ALL",
        )
        orders = exact_table(
            connection,
            f"SELECT {column}, n_genres, COUNT(*) FROM purchase_orders WHERE n_genres <= {MAX_ORDER} GROUP BY ALL",
        )
        records = dict(
            connection.execute(
                f"SELECT u.{column}, COUNT(*) FROM ratings r JOIN users u USING (user_id)"
                f" WHERE r.rating >= {PURCHASE_RATING} GROUP BY ALL"
            ).fetchall()
        )
    return ExactStatistics(combos, basic, orders, {c: int(records.get(c, 0)) for c in experiment.classes})


# --------------------------------------------------------------------------------------------------------
# Recommendations and P@m


def top(counts: Mapping[object, float], m: int, *, keep: Iterable[object] | None = None) -> list[object]:
    """The m largest counts, ties broken by the key (deterministic)."""
    keys = counts if keep is None else [k for k in keep if k in counts]
    return sorted(keys, key=lambda k: (-counts[k], str(k)))[:m]


def precision_at(recommended: Sequence[object], correct: Sequence[object], m: int) -> float:
    """P@m: the share of the correct top-m that the m recommendations hit (the paper's measure). A class
    with fewer than m purchased categories is scored against the ones it has; with none, 1.0."""
    targets = set(correct[:m])
    return len(set(recommended[:m]) & targets) / len(targets) if targets else 1.0


def allocate_slots(orders: Mapping[object, float], m: int) -> dict[int, int]:
    """The relationship table as slots: m split over orders 1..3 in proportion to the (noisy) counts,
    by largest remainder; negative noisy counts count as 0, and all-zero means an even split."""
    weights = {k: max(float(orders.get(k, 0.0)), 0.0) for k in range(1, MAX_ORDER + 1)}
    total = sum(weights.values())
    if total <= 0:
        weights, total = dict.fromkeys(weights, 1.0), float(len(weights))
    shares = {k: m * w / total for k, w in weights.items()}
    slots = {k: int(share) for k, share in shares.items()}
    for k in sorted(shares, key=lambda k: (-(shares[k] - slots[k]), k))[: m - sum(slots.values())]:
        slots[k] += 1
    return slots


CANDIDATES = {k: combinations_of_order(k) for k in range(1, MAX_ORDER + 1)}
REDUCED_DOMAINS = {k: combinations_up_to(k) for k in range(1, MAX_ORDER + 1)}


def proposed_top(basic: Mapping[object, float], orders: Mapping[object, float], m: int) -> list[str]:
    """(c): estimate f(A|B|...) as the mean of the basic frequencies and fill each order's slots."""
    picks: list[str] = []
    for k, slots in allocate_slots(orders, m).items():
        estimate = {c: sum(basic.get(g, 0.0) for g in c.split("|")) / k for c in CANDIDATES[k]}
        picks += [str(c) for c in top(estimate, slots)]
    return picks


def recommendations(
    approach: str, *, combos: Table, basic: Table, orders: Table, cls: str, m: int
) -> list[object]:
    if approach in ("exact", "conventional", TOP_K):
        return top(combos.get(cls, {}), m)
    if approach.startswith("reduced"):
        order = int(approach.removeprefix("reduced"))
        return top(combos.get(cls, {}), m, keep=REDUCED_DOMAINS[order])
    return list(proposed_top(basic.get(cls, {}), orders.get(cls, {}), m))


# --------------------------------------------------------------------------------------------------------
# Noisy tables, through Veil's SQL


class VeilSession:
    """Veil's QueryService in process: one analyst (ledger account) per approach."""

    def __init__(
        self,
        workdir: Path,
        catalog: Sequence[str],
        *,
        max_epsilon: float,
        seed: int,
        top_m: Sequence[int] = TOP_M,
        ledger: str = "ledger",
    ) -> None:
        config = parse_config(policy_toml(catalog, max_epsilon=max_epsilon), path=workdir / "veil.toml")
        dataset = config.dataset(DATASET)
        assert dataset is not None
        self.ledger = Ledger.create(workdir / f"{ledger}.sqlite")
        self.accounts = tuple(a for a in PRIVATE_APPROACHES if a != TOP_K) + tuple(
            top_k_account(m) for m in top_m
        )
        for name in self.accounts:
            self.ledger.add_analyst(name, make_scram_verifier(name, iterations=1))
            self.ledger.grant(name, DATASET, PrivacyLoss(1e9))
        # seeded for a reproducible example; `veil serve` uses the OS CSPRNG and cannot be seeded
        self.service = QueryService(
            dataset,
            backend=DuckDBBackend(workdir / "movielens.duckdb"),
            sandbox=DuckDBBackend.sandbox(),
            ledger=self.ledger,
            rng=random.Random(seed),
        )
        # (d) draws from its own seeded stream, so that (a)-(c) get the very noise they got before (d)
        # existed: their published figures reproduce exactly
        self.top_k_service = QueryService(
            dataset,
            backend=self.service.backend,
            sandbox=self.service.sandbox,
            ledger=self.ledger,
            rng=random.Random(f"top-k {seed}"),
        )
        # the paper's methods post-process raw noisy frequencies (sums, means, rankings): counts as drawn,
        # not clamped at 0 (docs/privacy.md, "Post-processing"), so the published results reproduce
        self.settings = {name: SessionSettings({"veil.raw_counts": "on"}) for name in self.accounts}

    def close(self) -> None:
        self.service.backend.close()

    def sql(
        self, principal: str, text: str, *, service: QueryService | None = None
    ) -> list[tuple[object, ...]]:
        service = service or self.service
        (tree,) = service.parse(text)
        outcome = service.run(tree, principal=Principal(principal), settings=self.settings[principal])
        return outcome.table.rows if outcome.table is not None else []

    def spent(self, principal: str) -> float:
        return self.ledger.balance(principal, DATASET).spent_epsilon

    def noisy_table(
        self, principal: str, experiment: Experiment, table: str, key: str, *, epsilon: float
    ) -> Table:
        """COUNT(*) per (class, key), all public cells. One GROUP BY over the classes (classes are
        disjoint in people, so this costs epsilon once); if Veil refuses that many cells (it answers at
        most 10,000, and a refusal spends nothing), one query per class, which the ledger charges each."""
        self.sql(principal, f"SET veil.epsilon = {epsilon!r}")
        column = experiment.column
        result: Table = {}
        try:
            rows = self.sql(
                principal, f"SELECT {column}, {key}, COUNT(*) FROM {table} GROUP BY {column}, {key}"
            )
        except UnsupportedQueryError:
            rows = []
            for cls in experiment.classes:
                query = f"SELECT {key}, COUNT(*) FROM {table} WHERE {column} = '{cls}' GROUP BY {key}"
                rows += [(cls, value, count) for value, count in self.sql(principal, query)]
        for cls, value, count in rows:
            result.setdefault(str(cls), {})[value] = float(count)
        return result

    def top_k_table(self, experiment: Experiment, m: int, *, epsilon: float) -> Table:
        """(d): the m categories with the most distinct purchasers in every class, one query for all
        classes: a DP top-m selection per class (docs/sql.md, "Top-k"), then noisy counts of those."""
        principal, service = top_k_account(m), self.top_k_service
        self.sql(principal, f"SET veil.epsilon = {epsilon!r}", service=service)
        result: Table = {}
        query = TOP_K_SQL.format(column=experiment.column, m=m)
        for cls, combo, count in self.sql(principal, query, service=service):
            result.setdefault(str(cls), {})[combo] = float(count)
        return result


TOP_K_SQL = (
    "SELECT {column}, combo, n FROM (SELECT {column}, combo, COUNT(DISTINCT user_id) AS n,"
    " ROW_NUMBER() OVER (PARTITION BY {column} ORDER BY COUNT(DISTINCT user_id) DESC) AS r"
    " FROM combos GROUP BY {column}, combo) AS ranked WHERE r <= {m}"
)


def top_k_account(m: int) -> str:
    return f"{TOP_K}{m}"


# --------------------------------------------------------------------------------------------------------
# The comparison


def level_name(epsilon: float) -> str:
    return f"eps={epsilon:g}"


@dataclass
class ExperimentResult:
    column: str
    title: str
    classes: tuple[str, ...]
    records: dict[str, int]
    exact_top: dict[str, list[str]]
    # level ("none" or "eps=1") -> approach -> m -> class -> mean P@m over runs
    precision: dict[str, dict[str, dict[int, dict[str, float]]]] = field(default_factory=dict)
    # level -> approach -> epsilon Veil's ledger charged in each run, in run order
    charged: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def weighted(self, level: str, approach: str, m: int) -> float:
        """Average over classes weighted by purchase records (the paper's "weighted average")."""
        values = self.precision[level][approach][m]
        total = sum(self.records.values())
        if total == 0:
            return statistics.fmean(values.values())
        return sum(values[c] * self.records[c] for c in self.classes) / total


@dataclass
class Results:
    data: str
    runs: int
    seed: int
    ratio: float
    epsilons: tuple[float, ...]
    top_m: tuple[int, ...]
    users: int
    purchases: int
    catalog_size: int
    experiments: list[ExperimentResult]
    seconds: float = 0.0


Precisions = dict[str, dict[int, dict[str, float]]]  # approach -> m -> class -> P@m


def _precisions(
    approaches: Iterable[str],
    *,
    correct: Mapping[int, Mapping[str, Sequence[object]]],
    combos: Table,
    basic: Table,
    orders: Table,
    classes: Sequence[str],
) -> Precisions:
    result: Precisions = {}
    for approach in approaches:
        for m, per_class in correct.items():
            for cls in classes:
                recommended = recommendations(
                    approach, combos=combos, basic=basic, orders=orders, cls=cls, m=m
                )
                result.setdefault(approach, {}).setdefault(m, {})[cls] = precision_at(
                    recommended, per_class[cls], m
                )
    return result


@dataclass(frozen=True)
class EpsilonJob:
    """All noisy runs at one epsilon: a fresh Veil session (own ledger, own seed), so the numbers do not
    depend on whether the jobs run one after the other or in parallel processes."""

    index: int
    epsilon: float
    workdir: Path
    catalog: tuple[str, ...]
    max_epsilon: float
    seed: int
    runs: int
    ratio: float
    experiments: tuple[Experiment, ...]
    correct: dict[str, dict[int, dict[str, list[object]]]]  # experiment -> m -> class -> exact top-m


def run_epsilon(job: EpsilonJob) -> dict[str, tuple[Precisions, dict[str, list[float]]]]:
    """experiment -> (mean P@m over the runs, epsilon Veil's ledger charged per approach in each run)."""
    top_m = sorted({m for per_m in job.correct.values() for m in per_m})
    session = VeilSession(
        job.workdir,
        job.catalog,
        max_epsilon=job.max_epsilon,
        seed=job.seed + job.index,
        top_m=top_m,
        ledger=f"ledger{job.index}",
    )
    try:
        return {
            e.column: _noisy_runs(
                session, e, job.correct[e.column], epsilon=job.epsilon, runs=job.runs, ratio=job.ratio
            )
            for e in job.experiments
        }
    finally:
        session.close()


def _noisy_runs(
    session: VeilSession,
    experiment: Experiment,
    correct: Mapping[int, Mapping[str, Sequence[object]]],
    *,
    epsilon: float,
    runs: int,
    ratio: float,
) -> tuple[Precisions, dict[str, list[float]]]:
    sums: Precisions = {}
    charged: dict[str, list[float]] = {a: [] for a in session.accounts}
    for _ in range(runs):
        before = {a: session.spent(a) for a in session.accounts}
        tables = {
            "conventional": (
                session.noisy_table("conventional", experiment, "combos", "combo", epsilon=epsilon),
                {},
                {},
            )
        }
        for order in range(1, MAX_ORDER + 1):
            noisy = session.noisy_table(
                f"reduced{order}", experiment, f"combos_upto{order}", "combo", epsilon=epsilon
            )
            tables[f"reduced{order}"] = (noisy, {}, {})
        # (c): the basic table with r*eps, the relationship table with (1 - r)*eps
        basic = session.noisy_table(
            "proposed", experiment, "purchase_genres", "genre", epsilon=ratio * epsilon
        )
        orders = session.noisy_table(
            "proposed", experiment, "purchase_orders", "n_genres", epsilon=(1 - ratio) * epsilon
        )
        tables["proposed"] = ({}, basic, orders)
        for approach, (combos, basic_table, orders_table) in tables.items():
            run = _precisions(
                [approach],
                correct=correct,
                combos=combos,
                basic=basic_table,
                orders=orders_table,
                classes=experiment.classes,
            )
            for m, per_class in run[approach].items():
                target = sums.setdefault(approach, {}).setdefault(m, {})
                for cls, value in per_class.items():
                    target[cls] = target.get(cls, 0.0) + value / runs
        for m, per_class in correct.items():  # (d): one top-m query per m
            noisy = session.top_k_table(experiment, m, epsilon=epsilon)
            run = _precisions(
                [TOP_K],
                correct={m: per_class},
                combos=noisy,
                basic={},
                orders={},
                classes=experiment.classes,
            )
            target = sums.setdefault(TOP_K, {}).setdefault(m, {})
            for cls, value in run[TOP_K][m].items():
                target[cls] = target.get(cls, 0.0) + value / runs
        for a in session.accounts:
            charged[a].append(session.spent(a) - before[a])
    return sums, charged


def compare(
    data: Path,
    *,
    runs: int = 20,
    seed: int = 0,
    epsilons: Sequence[float] = EPSILONS,
    top_m: Sequence[int] = TOP_M,
    ratio: float = RATIO,
    experiments: Sequence[str] | None = None,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> Results:
    """Run the paper's comparison on a MovieLens-style ratings CSV (userId, movieId, genres, rating,
    timestamp): P@m of every approach per class, averaged over ``runs`` noisy runs per epsilon.
    ``workers`` > 1 runs the epsilons in parallel processes (same numbers); ``progress(done, total)`` is
    called as each epsilon's runs finish."""
    started = time.perf_counter()
    chosen = tuple(e for e in EXPERIMENTS if experiments is None or e.column in experiments)
    with tempfile.TemporaryDirectory(prefix="veil-movielens-") as tmp:
        workdir = Path(tmp)
        database = workdir / "movielens.duckdb"
        catalog = build_database(data, database)
        with duckdb.connect(str(database), read_only=True) as connection:
            users, purchases = connection.execute(
                f"SELECT COUNT(DISTINCT user_id), COUNT(*) FILTER (rating >= {PURCHASE_RATING}) FROM ratings"
            ).fetchone() or (0, 0)
        exact = {e.column: exact_statistics(database, e) for e in chosen}
        correct = {
            e.column: {m: {c: top(exact[e.column].combos.get(c, {}), m) for c in e.classes} for m in top_m}
            for e in chosen
        }
        results = []
        for e in chosen:
            stats = exact[e.column]
            result = ExperimentResult(
                e.column,
                e.title,
                e.classes,
                stats.records,
                {c: [str(k) for k in correct[e.column][max(top_m)][c]] for c in e.classes},
            )
            result.precision[NONE_LEVEL] = _precisions(
                APPROACHES,
                correct=correct[e.column],
                combos=stats.combos,
                basic=stats.basic,
                orders=stats.orders,
                classes=e.classes,
            )
            results.append(result)
        jobs = [
            EpsilonJob(i, epsilon, workdir, catalog, max(epsilons), seed, runs, ratio, chosen, correct)
            for i, epsilon in enumerate(epsilons)
        ]
        outputs = []
        with ExitStack() as stack:
            mapper: Callable[..., Iterator[Any]] = map
            if workers > 1 and len(jobs) > 1:
                mapper = stack.enter_context(ProcessPoolExecutor(max_workers=min(workers, len(jobs)))).map
            for output in mapper(run_epsilon, jobs):
                outputs.append(output)
                if progress is not None:
                    progress(len(outputs), len(jobs))
        for epsilon, output in zip(epsilons, outputs, strict=True):
            for result in results:
                precision, charged = output[result.column]
                result.precision[level_name(epsilon)] = precision
                result.charged[level_name(epsilon)] = charged
    return Results(
        data=str(data),
        runs=runs,
        seed=seed,
        ratio=ratio,
        epsilons=tuple(epsilons),
        top_m=tuple(top_m),
        users=int(users),
        purchases=int(purchases),
        catalog_size=len(catalog),
        experiments=results,
        seconds=time.perf_counter() - started,
    )


# --------------------------------------------------------------------------------------------------------
# Output

COLUMNS = (
    ("conventional", "conv."),
    ("reduced1", "1st"),
    ("reduced2", "2nd"),
    ("reduced3", "3rd"),
    ("proposed", "proposed"),
    (TOP_K, "top-k"),
)


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _per_run(charges: Sequence[float]) -> str:
    """The ledger's charge per run: one number when every run cost the same, else the range."""
    low, high = min(charges, default=0.0), max(charges, default=0.0)
    return f"{low:g}" if math.isclose(low, high) else f"{low:g}-{high:g}"


def format_results(results: Results) -> str:
    lines = [
        f"MovieLens ratings: {results.data}",
        f"{results.users} users, {results.purchases} purchases (rating >= 4), "
        f"{results.catalog_size} genre combinations in the catalog; {results.runs} runs per epsilon, "
        f"seed {results.seed}, r = {results.ratio:g}; {results.seconds:.1f} s",
    ]
    levels = [(NONE_LEVEL, "none")] + [
        (level_name(e), f"{'strong' if e == min(results.epsilons) else 'weak'} eps={e:g}")
        for e in sorted(results.epsilons, reverse=True)
    ]
    for experiment in results.experiments:
        lines += ["", f"== {experiment.title}"]
        for m in results.top_m:
            lines.append(
                f"P@{m}, weighted by purchase records | w/o anon. | " + " | ".join(h for _, h in COLUMNS)
            )
            for level, label in levels:
                if level not in experiment.precision:
                    continue
                without = "100%" if level == NONE_LEVEL else "NG"
                cells = [_pct(experiment.weighted(level, a, m)) for a, _ in COLUMNS]
                lines.append(f"  {label:<34} | {without:>9} | " + " | ".join(cells))
        m = min(results.top_m)
        for epsilon in sorted(results.epsilons, reverse=True):
            level = level_name(epsilon)
            per_run = experiment.charged.get(level, {})
            charged = ", ".join(f"{a} {_per_run(v)}" for a, v in per_run.items())
            total = sum(map(sum, per_run.values()))
            lines.append(
                f"per class, P@{m} at eps={epsilon:g} (Veil's ledger charged per run: {charged};"
                f" {total:g} in all over {results.runs} runs)"
            )
            lines.append(f"  {'class':<18} {'records':>8} | " + " | ".join(h for _, h in COLUMNS[1:]))
            for cls in experiment.classes:
                cells = [_pct(experiment.precision[level][a][m][cls]) for a, _ in COLUMNS[1:]]
                lines.append(f"  {cls:<18} {experiment.records[cls]:>8} | " + " | ".join(cells))
        lines.append(f"exact top-{m} (distinct purchasers per category):")
        for cls in experiment.classes:
            lines.append(f"  {cls:<18} " + ", ".join(experiment.exact_top[cls][:m]))
    return "\n".join(lines)


def results_json(results: Results) -> str:
    document = asdict(results)
    for experiment, raw in zip(results.experiments, document["experiments"], strict=True):
        raw["weighted"] = {
            level: {a: {m: experiment.weighted(level, a, m) for m in results.top_m} for a in per_approach}
            for level, per_approach in experiment.precision.items()
        }
    return json.dumps(document, indent=2, ensure_ascii=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="MovieLens ratings CSV (dslabs layout)"
    )
    parser.add_argument("--runs", type=int, default=20, help="noisy runs per epsilon (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the noise (default 0)")
    parser.add_argument(
        "--ratio", type=float, default=RATIO, help="r, the basic table's share of eps (default 0.1)"
    )
    parser.add_argument(
        "--experiments", nargs="+", choices=[e.column for e in EXPERIMENTS], help="default: all three"
    )
    parser.add_argument("--workers", type=int, help="processes, one per epsilon (default: up to the CPUs)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(
            f"skipped: {args.data} not found; get MovieLens ml-latest-small "
            "(https://grouplens.org/datasets/movielens/, or the `movielens` data of the R package dslabs) "
            "as one CSV with columns userId, movieId, genres, rating, timestamp and pass --data PATH"
        )
        return 0
    if args.runs < 1 or not 0 < args.ratio < 1:
        parser.error("--runs must be >= 1 and --ratio in (0, 1)")
    workers = min(os.cpu_count() or 1, len(EPSILONS)) if args.workers is None else args.workers
    update, close = progress_callback("noisy runs, by epsilon", quiet=args.json, unit="epsilons")
    results = compare(
        args.data,
        runs=args.runs,
        seed=args.seed,
        ratio=args.ratio,
        experiments=args.experiments,
        workers=workers,
        progress=update,
    )
    close()
    print(results_json(results) if args.json else format_results(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
