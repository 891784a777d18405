"""asyncpg against ``veil serve``: its startup, the simple protocol, and errors.

``execute`` without arguments uses the simple protocol; ``fetch``/``fetchval`` and prepared statements
use the extended protocol and are tested in ``test_extended_protocol.py``. asyncpg sends
``client_encoding='utf-8'`` (quoted) at startup, which Veil accepts as PostgreSQL does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
import pytest

from tests.conftest import ALICE, Admin, Analyst, RunningServer

pytestmark = pytest.mark.client

T = TypeVar("T")


def run(coroutine: Awaitable[T]) -> T:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=30))  # type: ignore[arg-type]


async def connect(
    server: RunningServer, analyst: Analyst = ALICE, *, database: str = "demo", **kwargs: Any
) -> asyncpg.Connection:
    return await asyncpg.connect(
        host=server.host,
        port=server.port,
        user=analyst.name,
        password=analyst.password,
        database=database,
        ssl=False,
        timeout=10,
        **kwargs,
    )


async def with_connection(
    server: RunningServer, work: Callable[[asyncpg.Connection], Awaitable[T]], **kwargs: Any
) -> T:
    connection = await connect(server, **kwargs)
    try:
        return await work(connection)
    finally:
        await connection.close()


def test_asyncpg_connects_with_its_default_startup_parameters(veil_server: RunningServer) -> None:
    async def main() -> str:
        connection = await connect(veil_server)
        try:
            return await connection.execute("SELECT 1")
        finally:
            await connection.close()

    assert run(main()) == "SELECT 1"


def test_simple_protocol_execute_works(veil_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="asyncpg")
    notices: list[str] = []

    async def work(connection: asyncpg.Connection) -> tuple[str, str]:
        connection.add_log_listener(lambda _, message: notices.append(message.message))
        constant = await connection.execute("SELECT 1")
        private = await connection.execute("SELECT COUNT(*) FROM patients")
        await asyncio.sleep(0)  # log listeners are called soon after the message
        return constant, private

    assert run(with_connection(veil_server, work, analyst=analyst)) == ("SELECT 1", "SELECT 1")
    assert len(notices) == 1 and notices[0].startswith("differential privacy: this answer spent ε=0.1")
    assert admin.balance(analyst)["spent_epsilon"] == 0.1


def test_policy_refusals_arrive_as_typed_exceptions(veil_server: RunningServer) -> None:
    async def work(connection: asyncpg.Connection) -> str:
        with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError) as refused:
            await connection.execute("SELECT * FROM visits")
        assert refused.value.sqlstate == "42501"
        return await connection.execute("SELECT 1")

    assert run(with_connection(veil_server, work)) == "SELECT 1"


def test_wrong_password_is_28P01(veil_server: RunningServer) -> None:
    with pytest.raises(asyncpg.exceptions.InvalidPasswordError) as refused:
        run(connect(veil_server, Analyst("alice", "wrong")))
    assert refused.value.sqlstate == "28P01"
    assert 'password authentication failed for user "alice"' in str(refused.value)


def test_unknown_database_is_3D000(veil_server: RunningServer) -> None:
    with pytest.raises(asyncpg.exceptions.InvalidCatalogNameError) as refused:
        run(connect(veil_server, database="nowhere"))
    assert refused.value.sqlstate == "3D000"
