"""Failed logins slow down per (client address, role) (proxy/server/throttle.py)."""

from __future__ import annotations

import os

import pytest

from proxy.server.throttle import MAX_TRACKED, LocalFailures, LoginThrottle, SharedFailures


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["local", "shared"])
def throttle(clock: Clock, request: pytest.FixtureRequest) -> LoginThrottle:
    store = LocalFailures() if request.param == "local" else SharedFailures()
    return LoginThrottle(base=0.1, ceiling=1.0, forget_after=60, clock=clock, store=store)


def test_each_failure_in_a_row_doubles_the_delay_up_to_the_ceiling(throttle: LoginThrottle) -> None:
    delays = [throttle.failed("10.0.0.1", "alice") for _ in range(6)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


def test_a_success_starts_over(throttle: LoginThrottle) -> None:
    throttle.failed("10.0.0.1", "alice")
    throttle.failed("10.0.0.1", "alice")
    throttle.succeeded("10.0.0.1", "alice")
    assert throttle.failed("10.0.0.1", "alice") == pytest.approx(0.1)


def test_a_quiet_spell_starts_over(throttle: LoginThrottle, clock: Clock) -> None:
    throttle.failed("10.0.0.1", "alice")
    clock.now = 30
    assert throttle.failed("10.0.0.1", "alice") == pytest.approx(0.2)
    clock.now = 91
    assert throttle.failed("10.0.0.1", "alice") == pytest.approx(0.1)


def test_addresses_and_roles_are_counted_apart(throttle: LoginThrottle) -> None:
    throttle.failed("10.0.0.1", "alice")
    assert throttle.failed("10.0.0.2", "alice") == pytest.approx(0.1)
    assert throttle.failed("10.0.0.1", "nobody") == pytest.approx(0.1)  # unknown roles alike
    assert throttle.failed("10.0.0.1", "alice") == pytest.approx(0.2)


def test_a_zero_base_turns_it_off() -> None:
    assert LoginThrottle(base=0, ceiling=0).failed("10.0.0.1", "alice") == 0


def test_memory_is_bounded(clock: Clock) -> None:
    throttle = LoginThrottle(base=0.1, ceiling=1.0, forget_after=60, clock=clock)
    throttle.failed("first", "alice")
    for i in range(MAX_TRACKED):
        throttle.failed(f"10.{i}", "alice")
    assert throttle.failed("first", "alice") == pytest.approx(0.1)  # the oldest was forgotten


def test_workers_forked_after_the_shared_table_count_each_others_failures() -> None:
    """``veil serve --workers N`` spreads one client's connections over the workers: failures counted
    in one worker must slow the next attempt in another, or a guesser gets N times the attempts."""
    store = SharedFailures()
    throttle = LoginThrottle(base=0.1, ceiling=10.0, store=store)
    throttle.failed("10.0.0.1", "alice")
    pid = os.fork()
    if pid == 0:  # another worker: two more failures of the same pair
        LoginThrottle(base=0.1, ceiling=10.0, store=store).failed("10.0.0.1", "alice")
        os._exit(
            0 if LoginThrottle(base=0.1, ceiling=10.0, store=store).failed("10.0.0.1", "alice") == 0.4 else 1
        )
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert throttle.failed("10.0.0.1", "alice") == pytest.approx(0.8)  # the fourth in a row, across processes


def test_a_shared_slot_is_never_less_strict_than_its_pairs() -> None:
    """Pairs that share a slot share one count: each is throttled at least as much as alone."""
    throttle = LoginThrottle(base=0.1, ceiling=10.0, store=SharedFailures(slots=1))
    throttle.failed("10.0.0.1", "alice")
    assert throttle.failed("10.0.0.2", "bob") == pytest.approx(0.2)
