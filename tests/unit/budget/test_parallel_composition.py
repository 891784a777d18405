"""Parallel composition across statements in the ledger: spends charged to a *partition* — the rows where
one column holds one value — compose by the largest partition, not by their sum (docs/privacy.md,
"Accounting"). Exact decimals throughout, so the arithmetic is checked to the last digit.

Every test takes its ledgers from the ``ledgers`` fixture and runs on SQLite;
tests/postgres/test_parallel_composition_postgres.py imports them all and runs them on PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget.accountants import ACCOUNTANTS, get_accountant
from budget.amounts import as_decimal, charge_units, to_text
from budget.errors import BudgetExhaustedError, InvalidBudgetError, LedgerStoreError
from budget.ledger import Ledger, SpendState
from budget.loss import PrivacyLoss
from budget.partitions import Partition
from budget.totals import Release, Totals
from tests.unit.budget.test_ledger import (
    VERIFIER,
    Clock,
    Ledgers,
    behind_the_back,
    downgrade_to_version_3,
)

REGION = "patients.region"
NORTH = Partition(REGION, ("north",))
SOUTH = Partition(REGION, ("south",))
EAST = Partition(REGION, ("east",))


@pytest.fixture
def ledgers(tmp_path: Path) -> Iterator[Ledgers]:
    """SQLite ledgers, one file each (tests/postgres/test_parallel_composition_postgres.py overrides it)."""
    numbers = itertools.count()
    made = Ledgers(lambda: (str(tmp_path / f"ledger-{next(numbers)}.sqlite"), None))
    yield made
    made.close()


@pytest.fixture
def ledger(ledgers: Ledgers) -> Ledger:
    """alice holds ε = 1.0 (and δ = 1e-5) on dataset demo."""
    ledger = ledgers.new()
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.0, 1e-5))
    return ledger


def charge(
    ledger: Ledger,
    epsilon: float | Release,
    partition: Partition | None = None,
    *,
    analyst: str = "alice",
    accountant: str = "basic",
) -> int:
    cost = epsilon if isinstance(epsilon, Release) else PrivacyLoss(epsilon)
    return ledger.reserve(
        analyst,
        "demo",
        cost,
        statement="SELECT COUNT(*) FROM patients",
        partition=partition,
        accountant=get_accountant(accountant),
    )


def by_value(ledger: Ledger, analyst: str = "alice", accountant: str = "basic") -> dict[object, float]:
    """Remaining ε per partition value (None: any value not charged yet) of the region column."""
    return {
        row.value: row.remaining_epsilon
        for row in ledger.partition_balances(analyst, "demo", accountant=get_accountant(accountant))
        if row.column == REGION
    }


# -- the Partition value -------------------------------------------------------------------------


def test_a_partition_lists_each_value_once_in_a_fixed_order() -> None:
    assert Partition(REGION, ("south", "north", "south")).values == ("north", "south")
    assert Partition(REGION, ("b", "a")) == Partition(REGION, ("a", "b"))


@pytest.mark.parametrize(
    ("column", "values", "problem"),
    [
        ("", ("north",), "a partition needs a column"),
        (REGION, (), "a partition needs at least one value"),
        (REGION, (True,), "partition values are text or integers"),
        (REGION, (1.5,), "partition values are text or integers"),
    ],
)
def test_a_partition_refuses_what_names_no_rows(
    column: str, values: tuple[object, ...], problem: str
) -> None:
    with pytest.raises(InvalidBudgetError, match=problem):
        Partition(column, values)  # type: ignore[arg-type]


def test_a_partition_describes_itself_as_sql() -> None:
    assert NORTH.describe() == "patients.region = 'north'"
    assert Partition(REGION, ("o'neil", "north")).describe() == "patients.region IN ('north', 'o''neil')"
    assert Partition("visits.year", (2021, 2020)).describe() == "visits.year IN (2020, 2021)"


# -- basic composition: the largest partition, in exact decimals ------------------------------------


def test_disjoint_partitions_cost_the_largest_not_the_sum(ledger: Ledger) -> None:
    charge(ledger, 0.6, NORTH)
    charge(ledger, 0.6, SOUTH)
    charge(ledger, 0.4, EAST)
    balance = ledger.balance("alice", "demo")
    assert (balance.spent_epsilon, balance.remaining_epsilon, balance.releases) == (0.6, 0.4, 3)


def test_no_partition_value_gets_more_than_the_grant(ledger: Ledger) -> None:
    for _ in range(10):
        charge(ledger, 0.1, NORTH)
    with pytest.raises(
        BudgetExhaustedError,
        match=r"in partition patients\.region = 'north', but only epsilon 0\.0 (and delta [0-9.]+ )?remains there",
    ):
        charge(ledger, 0.1, NORTH)
    for _ in range(10):  # ten tenths are exactly one in decimals, though not in floats
        charge(ledger, 0.1, SOUTH)
    with pytest.raises(BudgetExhaustedError):
        charge(ledger, 0.1, SOUTH)
    assert ledger.balance("alice", "demo").spent_epsilon == 1.0


def test_a_refusal_in_a_partition_says_what_is_left_in_that_value_not_in_the_widest(ledger: Ledger) -> None:
    charge(ledger, 0.8, NORTH)
    charge(ledger, 0.2, SOUTH)
    with pytest.raises(
        BudgetExhaustedError, match=r"'south', but only epsilon 0\.8 and delta 0\.00001 remains there"
    ):
        charge(ledger, 0.9, SOUTH)


def test_ordinary_spends_count_in_every_partition(ledger: Ledger) -> None:
    charge(ledger, 0.3)
    for _ in range(7):
        charge(ledger, 0.1, NORTH)
    with pytest.raises(BudgetExhaustedError):
        charge(ledger, 0.1, NORTH)
    charge(ledger, 0.7, SOUTH)  # 0.3 + 0.7 = 1 exactly
    with pytest.raises(BudgetExhaustedError, match='on dataset "demo"'):
        charge(ledger, 0.001)  # an ordinary spend reaches everyone, north and south included
    assert by_value(ledger) == {"north": 0.0, "south": 0.0, None: 0.7}


def test_an_ordinary_spend_must_fit_beside_the_largest_partition(ledger: Ledger) -> None:
    charge(ledger, 0.8, NORTH)
    with pytest.raises(BudgetExhaustedError, match=r"only epsilon 0\.2 and delta 0\.00001 remains"):
        charge(ledger, 0.3)
    charge(ledger, 0.2)
    assert ledger.balance("alice", "demo").remaining_epsilon == 0.0


def test_an_in_list_is_charged_to_every_value_it_names(ledger: Ledger) -> None:
    charge(ledger, 0.5, Partition(REGION, ("north", "south")))
    charge(ledger, 0.5, EAST)
    with pytest.raises(BudgetExhaustedError):
        charge(ledger, 0.6, SOUTH)
    charge(ledger, 0.5, SOUTH)
    assert by_value(ledger) == {"east": 0.5, "north": 0.5, "south": 0.0, None: 1.0}


def test_a_value_named_twice_is_charged_once(ledger: Ledger) -> None:
    charge(ledger, 0.5, Partition(REGION, ("north", "north")))
    assert by_value(ledger)["north"] == 0.5
    assert ledger.balance("alice", "demo").releases == 1


def test_partitions_of_two_columns_add_up(ledger: Ledger) -> None:
    """A person has one region *and* one sex: the worst region and the worst sex may be the same person."""
    charge(ledger, 0.4, NORTH)
    charge(ledger, 0.3, Partition("patients.sex", ("female",)))
    charge(ledger, 0.1, Partition("patients.sex", ("male",)))
    assert ledger.balance("alice", "demo").spent_epsilon == 0.7
    with pytest.raises(BudgetExhaustedError):
        charge(ledger, 0.7, Partition("patients.sex", ("male",)))  # 0.4 (north) + 0.8 > 1
    charge(ledger, 0.6, SOUTH)  # replaces 0.4 as the worst region: 0.6 + 0.3 = 0.9
    assert ledger.balance("alice", "demo").spent_epsilon == 0.9


def test_the_same_column_of_two_tables_is_two_partition_columns(ledger: Ledger) -> None:
    """A person's region in patients need not be their region in visits."""
    charge(ledger, 0.5, NORTH)
    charge(ledger, 0.5, Partition("visits.region", ("south",)))
    assert ledger.balance("alice", "demo").spent_epsilon == 1.0
    with pytest.raises(BudgetExhaustedError):
        charge(ledger, 0.1)


def test_integer_values_are_their_own_partitions(ledger: Ledger) -> None:
    year = "patients.birth_year"
    charge(ledger, 0.9, Partition(year, (1980,)))
    charge(ledger, 0.9, Partition(year, (1981,)))
    assert {row.value for row in ledger.partition_balances("alice", "demo")} == {1980, 1981, None}


# -- cancel, renewal, the cap -----------------------------------------------------------------------


def test_cancel_gives_a_partition_spend_back(ledger: Ledger) -> None:
    north = charge(ledger, 0.7, NORTH)
    charge(ledger, 0.4, SOUTH)
    ledger.cancel(north)
    balance = ledger.balance("alice", "demo")
    assert (balance.spent_epsilon, balance.releases) == (0.4, 1)
    assert by_value(ledger) == {"south": 0.6, None: 1.0}
    charge(ledger, 1.0, NORTH)
    assert ledger.verify() == []


def test_cancel_of_an_in_list_spend_gives_back_every_value(ledger: Ledger) -> None:
    both = charge(ledger, 0.7, Partition(REGION, ("north", "south")))
    ledger.cancel(both)
    assert ledger.balance("alice", "demo").spent_epsilon == 0.0
    assert by_value(ledger) == {}


def test_committed_and_reserved_partition_spends_both_count(ledgers: Ledgers, ledger: Ledger) -> None:
    ledger.commit(charge(ledger, 0.5, NORTH))
    charge(ledger, 0.5, NORTH)  # reserved: counts, as after a crash
    reopened = ledgers.reopen(ledger)
    with pytest.raises(BudgetExhaustedError):
        charge(reopened, 0.1, NORTH)


def test_partition_spends_count_in_the_period_they_were_made(ledgers: Ledgers) -> None:
    clock = Clock(datetime(2024, 1, 31, 12, tzinfo=UTC))
    ledger = ledgers.new(clock=clock)
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.0), renewal="month")
    charge(ledger, 1.0, NORTH)
    with pytest.raises(BudgetExhaustedError):
        charge(ledger, 0.1, NORTH)
    clock.now += timedelta(days=1)
    charge(ledger, 1.0, NORTH)
    assert ledger.balance("alice", "demo").spent_epsilon == 1.0


def test_the_cap_counts_every_partition_spend_in_full(ledger: Ledger) -> None:
    """Per-partition cap totals would show which partitions other analysts query: the cap composes
    partition spends sequentially, which never undercharges."""
    ledger.add_analyst("bob", VERIFIER)
    ledger.grant("bob", "demo", PrivacyLoss(1.0))
    ledger.set_cap("demo", PrivacyLoss(1.0))
    charge(ledger, 0.6, NORTH)
    with pytest.raises(BudgetExhaustedError, match="capped"):
        charge(ledger, 0.6, SOUTH, analyst="bob")
    assert ledger.cap("demo").spent_epsilon == 0.6


# -- other accountants ------------------------------------------------------------------------------


def releases_of(*epsilons: float, rho: float | None = None) -> Totals:
    totals = Totals()
    for epsilon in epsilons:
        totals = totals.plus(Release(epsilon, 0.0, rho))
    return totals


@pytest.mark.parametrize("name", sorted(ACCOUNTANTS))
def test_every_accountant_charges_the_worst_partition_with_the_ordinary_spends(
    ledgers: Ledgers, name: str
) -> None:
    ledger = ledgers.new()
    ledger.add_analyst("alice", VERIFIER)
    grant = PrivacyLoss(10.0, 1e-5)
    ledger.grant("alice", "demo", grant)
    for _ in range(3):
        charge(ledger, 0.1, accountant=name)
    for _ in range(20):
        charge(ledger, 0.1, NORTH, accountant=name)
    for _ in range(5):
        charge(ledger, 0.1, SOUTH, accountant=name)
    accountant = get_accountant(name)
    balance = ledger.balance("alice", "demo", accountant=accountant)
    assert balance.releases == 28
    assert_close_above(
        balance.spent_epsilon, balance.spent_delta, accountant.spent(releases_of(*[0.1] * 23), grant=grant)
    )
    (row,) = [
        row
        for row in ledger.partition_balances("alice", "demo", accountant=accountant)
        if row.value == "south"
    ]
    assert_close_above(
        row.spent_epsilon, row.spent_delta, accountant.spent(releases_of(*[0.1] * 8), grant=grant)
    )
    assert row.accountant == name


def assert_close_above(epsilon: float, delta: float, exact: PrivacyLoss) -> None:
    """The ledger sums the ordinary spends and a partition's apart, rounding each float sum up: never
    below the bound of the releases taken together, and within a few ulps of it."""
    assert exact.epsilon <= epsilon <= exact.epsilon * (1 + 1e-12)
    assert delta == exact.delta


def test_the_worst_partition_is_taken_statistic_by_statistic(ledgers: Ledgers) -> None:
    """Under advanced composition north has the larger Σε² and south the larger Σε: the bound uses
    both maxima, an upper bound of either partition's own total."""
    ledger = ledgers.new()
    ledger.add_analyst("alice", VERIFIER)
    grant = PrivacyLoss(10.0, 1e-5)
    ledger.grant("alice", "demo", grant)
    charge(ledger, 1.0, NORTH, accountant="advanced")
    for _ in range(30):
        charge(ledger, 0.05, SOUTH, accountant="advanced")
    advanced = get_accountant("advanced")
    north, south = releases_of(1.0), releases_of(*[0.05] * 30)
    balance = ledger.balance("alice", "demo", accountant=advanced)
    worst_alone = max(advanced.spent(t, grant=grant).epsilon for t in (north, south))
    assert balance.spent_epsilon >= worst_alone
    assert balance.spent_epsilon <= advanced.spent(releases_of(1.0, *[0.05] * 30), grant=grant).epsilon


def test_zcdp_adds_rho_of_gaussian_answers_by_the_largest_partition(ledgers: Ledgers) -> None:
    ledger = ledgers.new()
    ledger.add_analyst("alice", VERIFIER)
    grant = PrivacyLoss(5.0, 1e-5)
    ledger.grant("alice", "demo", grant)
    gaussian = Release(0.5, 1e-7, rho=0.01)
    for partition in (NORTH, SOUTH, NORTH):
        charge(ledger, gaussian, partition, accountant="zcdp")
    zcdp = get_accountant("zcdp")
    expected = zcdp.spent(Totals().plus(gaussian).plus(gaussian), grant=grant)
    balance = ledger.balance("alice", "demo", accountant=zcdp)
    assert (balance.spent_epsilon, balance.spent_delta) == (expected.epsilon, expected.delta)


# -- what the ledger shows ------------------------------------------------------------------------


def test_history_shows_each_spends_partition(ledger: Ledger) -> None:
    charge(ledger, 0.1)
    charge(ledger, 0.2, Partition(REGION, ("south", "north")))
    history = ledger.history("alice")
    assert [spend.partition for spend in history] == [None, Partition(REGION, ("north", "south"))]
    assert history[1].state is SpendState.RESERVED


def test_partition_balances_list_each_charged_value_and_the_rest(ledger: Ledger) -> None:
    charge(ledger, 0.1)
    charge(ledger, 0.3, NORTH)
    rows = ledger.partition_balances("alice", "demo")
    assert [(r.column, r.value, r.spent_epsilon, r.remaining_epsilon, r.releases) for r in rows] == [
        (REGION, "north", 0.4, 0.6, 2),
        (REGION, None, 0.1, 0.9, 1),
    ]


def test_an_analyst_without_partition_spends_has_no_partition_rows(ledger: Ledger) -> None:
    charge(ledger, 0.1)
    assert ledger.partition_balances("alice", "demo") == []


def test_verify_checks_the_partition_totals(ledger: Ledger) -> None:
    charge(ledger, 0.3, NORTH)
    assert ledger.verify() == []
    behind_the_back(ledger, f"UPDATE partition_totals SET epsilon = '{to_text(charge_units(0.1))}'")
    assert any("north" in problem for problem in ledger.verify())
    ledger.rebuild_totals()
    assert ledger.verify() == []
    assert ledger.balance("alice", "demo").spent_epsilon == 0.3


def test_a_partition_spend_cannot_be_moved_behind_the_ledgers_back(ledger: Ledger) -> None:
    charge(ledger, 0.3, NORTH)
    for edit in ("partition_column = ''", "partition_values = '[\"south\"]'"):
        with pytest.raises(LedgerStoreError, match="only a reserved spend may change, and only its state"):
            behind_the_back(ledger, f"UPDATE spends SET {edit}")


# -- the upgrade from version 3 -------------------------------------------------------------------


def test_a_version_3_ledger_is_upgraded_with_its_balances(ledgers: Ledgers) -> None:
    """Version 3 had no partitions: every spend is ordinary (0.57 of alice's 1.2 on demo)."""
    location, schema = ledgers.version_4()
    downgrade_to_version_3(location, schema)
    upgraded = ledgers.open(location, schema)
    assert upgraded.balance("alice", "demo").spent_epsilon == 0.57
    assert all(spend.partition is None for spend in upgraded.history("alice"))
    charge(upgraded, 0.5, NORTH)
    charge(upgraded, 0.5, SOUTH)
    assert upgraded.balance("alice", "demo").spent_epsilon == 1.07
    assert upgraded.verify() == []
    with pytest.raises(LedgerStoreError, match="only a reserved spend may change"):
        behind_the_back(upgraded, "UPDATE spends SET partition_column = 'x'")


# -- no sequence of operations gives any partition more than the grant --------------------------------

VALUES = ("north", "south", "east")
operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("reserve"),
            st.sampled_from([(), ("north",), ("south",), ("north", "south"), ("east",), ("east", "east")]),
            st.sampled_from([0.05, 0.1, 0.2, 0.3, 0.45]),
        ),
        st.tuples(st.sampled_from(["commit", "cancel"]), st.just(()), st.integers(0, 30)),
    ),
    max_size=30,
)


@settings(
    max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=operations)
def test_no_sequence_of_operations_gives_a_partition_value_more_than_the_grant(
    ledgers: Ledgers, steps: list[tuple[str, tuple[str, ...], float]]
) -> None:
    """A model of the counting spends, in exact decimals: whoever lives in a region has lost at most the
    ordinary spends plus that region's; the ledger never lets that exceed the grant, reports the worst
    of them as spent, and refuses only what would exceed it."""
    ledger = ledgers.new()
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.0))
    counting: dict[int, tuple[tuple[str, ...], Decimal]] = {}
    made: list[int] = []
    still_open: set[int] = set()

    def loss_of(value: str) -> Decimal:
        return sum((e for values, e in counting.values() if not values or value in values), Decimal(0))

    for action, values, amount in steps:
        if action == "reserve":
            partition = Partition(REGION, values) if values else None
            targets = set(values) if values else set(VALUES)
            fits = all(loss_of(v) + as_decimal(amount) <= 1 for v in targets)
            try:
                reservation = charge(ledger, amount, partition)
            except BudgetExhaustedError:
                assert not fits, "refused although it fits"
                continue
            assert fits, "accepted although it does not fit"
            counting[reservation] = (values, as_decimal(amount))
            made.append(reservation)
            still_open.add(reservation)
        elif made:
            reservation = made[int(amount) % len(made)]
            if reservation in still_open:
                getattr(ledger, action)(reservation)
                still_open.remove(reservation)
                if action == "cancel":
                    del counting[reservation]
        worst = max(loss_of(v) for v in VALUES)
        assert worst <= 1
        assert as_decimal(ledger.balance("alice", "demo").spent_epsilon) == worst
    assert ledger.verify() == []


# -- the JSON of a spend -----------------------------------------------------------------------------


def test_a_partition_is_stored_as_json_values(ledger: Ledger) -> None:
    charge(ledger, 0.1, Partition("visits.year", (2021, 2020)))
    with ledger.store.transaction(write=False) as tx:
        ((column, values),) = tx.execute("SELECT partition_column, partition_values FROM spends")
    assert (column, json.loads(values)) == ("visits.year", [2020, 2021])


def test_a_partition_value_is_stored_as_written(ledger: Ledger) -> None:
    """The spends row holds a value as its totals key does (budget/partitions.py ``value_key``): an
    administrator reading the ledger sees ``Zürich``, not ``Z\\u00fcrich``."""
    charge(ledger, 0.1, Partition(REGION, ("Zürich",)))
    with ledger.store.transaction(write=False) as tx:
        ((values,),) = tx.execute("SELECT partition_values FROM spends")
        keys = {key for (key,) in tx.execute("SELECT partition_value FROM partition_totals")}
    assert values == '["Zürich"]'
    assert '"Zürich"' in keys


def test_partition_balances_are_plain_data(ledger: Ledger) -> None:
    charge(ledger, 0.1, NORTH)
    record = dataclasses.asdict(ledger.partition_balances("alice", "demo")[0])
    assert record["column"] == REGION and record["value"] == "north"


def test_partition_balances_name_the_analyst_the_dataset_and_the_accountant(ledger: Ledger) -> None:
    charge(ledger, 0.4, NORTH)
    rows = ledger.partition_balances("alice", "demo", accountant=get_accountant("zcdp"))
    assert {(row.analyst, row.dataset, row.column, row.accountant) for row in rows} == {
        ("alice", "demo", REGION, "zcdp")
    }
    assert [row.value for row in rows] == ["north", None]
