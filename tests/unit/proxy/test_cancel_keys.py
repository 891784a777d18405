"""BackendKeyData keys: a CancelRequest finds its session only with the right secret, and only while
the session lives."""

from __future__ import annotations

import pytest

from proxy.backends.interrupts import Interrupter
from proxy.server.cancel_keys import MAX_WORKERS, CancelKeys, owner


def test_a_key_finds_its_session() -> None:
    keys, session = CancelKeys(), Interrupter()
    key = keys.issue(session)
    assert keys.find(key.process_id, key.secret_key) is session


def test_a_wrong_secret_or_an_unknown_process_finds_nothing() -> None:
    keys = CancelKeys()
    key = keys.issue(Interrupter())
    assert keys.find(key.process_id, key.secret_key ^ 1) is None
    assert keys.find(key.process_id ^ 1, key.secret_key) is None


def test_an_ended_session_cannot_be_cancelled() -> None:
    keys, session = CancelKeys(), Interrupter()
    key = keys.issue(session)
    keys.revoke(session)
    assert keys.find(key.process_id, key.secret_key) is None
    assert len(keys) == 0
    keys.revoke(session)  # a session that ends before its key was issued, or twice: no error


def test_process_ids_are_distinct_positive_int32s() -> None:
    keys = CancelKeys()
    issued = [keys.issue(Interrupter()) for _ in range(2000)]
    assert len({key.process_id for key in issued}) == len(keys) == 2000
    assert all(0 < key.process_id < 2**31 and 0 <= key.secret_key < 2**32 for key in issued)


def test_a_process_id_names_the_worker_that_issued_it() -> None:
    keys = [CancelKeys(worker=worker).issue(Interrupter()) for worker in (0, 5, MAX_WORKERS - 1)]
    assert [owner(key.process_id) for key in keys] == [0, 5, MAX_WORKERS - 1]
    assert all(0 < key.process_id < 2**31 for key in keys)


def test_a_worker_index_beyond_the_process_id_bits_is_refused() -> None:
    with pytest.raises(ValueError, match="below 64"):
        CancelKeys(worker=MAX_WORKERS)
