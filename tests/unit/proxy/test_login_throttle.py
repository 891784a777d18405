"""Failed logins slow down per (client address, role) (proxy/server/throttle.py)."""

from __future__ import annotations

import pytest

from proxy.server.throttle import MAX_TRACKED, LoginThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def throttle(clock: Clock) -> LoginThrottle:
    return LoginThrottle(base=0.1, ceiling=1.0, forget_after=60, clock=clock)


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


def test_memory_is_bounded(throttle: LoginThrottle) -> None:
    throttle.failed("first", "alice")
    for i in range(MAX_TRACKED):
        throttle.failed(f"10.{i}", "alice")
    assert throttle.failed("first", "alice") == pytest.approx(0.1)  # the oldest was forgotten
