"""The extended query protocol through real drivers: psycopg 3 (server-side parameters with its default
prepare settings, named prepared statements, binary results, pipeline mode), asyncpg (``$n`` parameters,
prepared statements, binary everything, cursors that fetch with Execute row limits), pg8000 and — for
contrast, since it interpolates on the client and speaks only the simple protocol — psycopg2.

Each test runs on both engines (``[duckdb]``, ``[postgres]``, see ``conftest.py``). Noisy counts are
checked against the exact count in the demo file with a bound the noise exceeds with probability below
1e-6 (discrete Laplace of scale 1/ε: P(|noise| > t) <= exp(-t ε)); budgets are checked to the exact
charge, which shows that each executed DP query is debited once — not at Describe, not twice.
"""

from __future__ import annotations

import asyncio
import datetime
import math
from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal
from typing import Any, TypeVar

import asyncpg
import duckdb
import pg8000.native
import psycopg
import psycopg2
import psycopg2.errors
import pytest

from proxy.cli.demo import AGE_BOUNDS
from tests.conftest import Admin, Analyst, Demo, RunningServer

pytestmark = pytest.mark.client

T = TypeVar("T")
EPSILON = 1.0  # every test sets it: small noise, exact charges
NOISE_BOUND = math.log(1e6) / EPSILON  # a count's noise exceeds this with probability below 1e-6


def exact_count(demo: Demo, minimum_age: int) -> int:
    with duckdb.connect(str(demo.database), read_only=True) as db:
        (count,) = db.execute("SELECT COUNT(*) FROM patients WHERE age > ?", [minimum_age]).fetchone()  # type: ignore[misc]
    return int(count)


def spent(admin: Admin, analyst: Analyst) -> float:
    return float(admin.balance(analyst)["spent_epsilon"])


@pytest.fixture
def psycopg_connect(veil_server: RunningServer) -> Iterator[Callable[..., psycopg.Connection[Any]]]:
    """psycopg connections with psycopg's own defaults (prepare_threshold=5, server-side binding)."""
    opened: list[psycopg.Connection[Any]] = []

    def connect(analyst: Analyst, **options: Any) -> psycopg.Connection[Any]:
        connection = psycopg.connect(veil_server.conninfo(analyst), autocommit=True, **options)
        connection.execute(f"SET veil.epsilon = {EPSILON}")
        opened.append(connection)
        return connection

    yield connect
    for connection in opened:
        connection.close()


# --- psycopg 3 ---------------------------------------------------------------------------------------------


def test_psycopg_binds_parameters_on_the_server(
    psycopg_connect: Callable[..., psycopg.Connection[Any]], admin: Admin, demo: Demo
) -> None:
    analyst = admin.add_analyst(5.0, prefix="pg3param")
    connection = psycopg_connect(analyst)
    notices: list[str] = []
    connection.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))
    (count,) = connection.execute("SELECT COUNT(*) FROM patients WHERE age > %s", [30]).fetchone()  # type: ignore[misc]
    assert isinstance(count, int)
    assert abs(count - exact_count(demo, 30)) <= NOISE_BOUND
    assert len(notices) == 1 and notices[0].startswith("differential privacy: this answer spent ε=1")
    assert spent(admin, analyst) == pytest.approx(EPSILON)


def test_psycopg_prepares_a_repeated_query_and_each_execution_is_charged_once(
    psycopg_connect: Callable[..., psycopg.Connection[Any]], admin: Admin, demo: Demo
) -> None:
    """After 5 unnamed executions psycopg prepares the query as ``_pg3_0`` and binds that from then on."""
    analyst = admin.add_analyst(10.0, prefix="pg3prep")
    connection = psycopg_connect(analyst)
    ages = [20, 25, 30, 35, 40, 45, 50]
    counts = [
        connection.execute("SELECT COUNT(*) FROM patients WHERE age > %s", [age]).fetchone()[0]  # type: ignore[index]
        for age in ages
    ]
    assert all(
        abs(count - exact_count(demo, age)) <= NOISE_BOUND for count, age in zip(counts, ages, strict=True)
    )
    assert len(ages) > (connection.prepare_threshold or 0)  # the last two run the prepared statement
    assert spent(admin, analyst) == pytest.approx(len(ages) * EPSILON)


def test_psycopg_named_prepared_statement_answers_each_binding(
    psycopg_connect: Callable[..., psycopg.Connection[Any]], admin: Admin
) -> None:
    analyst = admin.add_analyst(5.0, prefix="pg3named")
    connection = psycopg_connect(analyst)
    sql = "SELECT COUNT(*) FROM patients WHERE age > %s AND region = %s"
    north = connection.execute(sql, [40, "north"], prepare=True).fetchone()
    south = connection.execute(sql, [40, "south"], prepare=True).fetchone()
    again = connection.execute(sql, [40, "north"], prepare=True).fetchone()
    assert north == again  # the same question: the stored answer, for free
    assert south is not None and isinstance(south[0], int)
    assert spent(admin, analyst) == pytest.approx(2 * EPSILON)


def test_psycopg_binary_results_decode_to_the_same_types(
    psycopg_connect: Callable[..., psycopg.Connection[Any]], admin: Admin
) -> None:
    analyst = admin.add_analyst(5.0, prefix="pg3binary")
    connection = psycopg_connect(analyst)
    cursor = connection.cursor(binary=True)
    rows = cursor.execute(
        "SELECT region, COUNT(*), AVG(age) FROM patients WHERE age BETWEEN %s AND %s GROUP BY region",
        [18, 65],
    ).fetchall()
    assert [column.type_code for column in cursor.description or []] == [25, 20, 701]
    assert len(rows) == 7
    assert all(isinstance(region, str) and isinstance(n, int) for region, n, _ in rows)
    # A noisy average is never NULL and lies in the column's declared bounds, not the WHERE range:
    # the clamp is post-processing of what was measured, and the filter's range is not a declared bound.
    low, high = AGE_BOUNDS
    assert all(isinstance(average, float) and low <= average <= high for _, _, average in rows)
    constants = cursor.execute(
        "SELECT %s::date, %s::boolean, %s::float8, %s::text, %s::bigint",
        [datetime.date(2024, 2, 29), True, 1.5, "é", -(2**40)],
    ).fetchone()
    assert constants == (datetime.date(2024, 2, 29), True, 1.5, "é", -(2**40))
    assert spent(admin, analyst) == pytest.approx(EPSILON)


def test_psycopg_sends_python_values_as_typed_parameters(
    psycopg_connect: Callable[..., psycopg.Connection[Any]], admin: Admin
) -> None:
    connection = psycopg_connect(admin.add_analyst(1.0, prefix="pg3types"))
    row = connection.execute(
        "SELECT %s + 1, %s * 2, %s, %s IS NULL, %s",
        [41, Decimal("1.25"), "it's", None, datetime.date(2020, 1, 2)],
    ).fetchone()
    assert row == (42, 2.5, "it's", True, datetime.date(2020, 1, 2))


def test_psycopg_date_and_text_parameters_filter_a_dp_query(
    psycopg_connect: Callable[..., psycopg.Connection[Any]], admin: Admin
) -> None:
    """A date is bound as ``CAST('2024-06-01' AS DATE)`` — a cast of a constant, allowed on both engines —
    and so is the text '2024-06-01' sent untyped, since the column it is compared with is a date: the two
    are the same question, and the second gets the stored answer."""
    analyst = admin.add_analyst(5.0, prefix="pg3dates")
    connection = psycopg_connect(analyst)
    sql = "SELECT COUNT(*) FROM visits WHERE visit_date >= %s AND diagnosis = %s"
    (as_date,) = connection.execute(sql, [datetime.date(2024, 6, 1), "asthma"]).fetchone()  # type: ignore[misc]
    (as_text,) = connection.execute(sql, ["2024-06-01", "asthma"]).fetchone()  # type: ignore[misc]
    assert isinstance(as_date, int) and as_text == as_date
    assert spent(admin, analyst) == pytest.approx(EPSILON)


def test_psycopg_pipeline_answers_in_order_and_stops_at_a_refusal(
    psycopg_connect: Callable[..., psycopg.Connection[Any]], admin: Admin
) -> None:
    analyst = admin.add_analyst(5.0, prefix="pg3pipe")
    connection = psycopg_connect(analyst)
    with connection.pipeline():
        first = connection.execute("SELECT COUNT(*) FROM patients WHERE age > %s", [50])
        second = connection.execute("SELECT %s::int * 2", [21])
    assert isinstance(first.fetchone()[0], int)  # type: ignore[index]
    assert second.fetchone() == (42,)
    assert spent(admin, analyst) == pytest.approx(EPSILON)

    with pytest.raises(psycopg.errors.InsufficientPrivilege), connection.pipeline():
        connection.execute("SELECT 1")
        connection.execute("SELECT * FROM patients WHERE age > %s", [50])
        connection.execute("SELECT COUNT(*) FROM patients WHERE age > %s", [51])  # discarded: never run
    assert spent(admin, analyst) == pytest.approx(EPSILON)
    assert connection.execute("SELECT %s", ["after"]).fetchone() == ("after",)


def test_psycopg_a_refused_query_then_a_good_one_on_the_same_connection(
    psycopg_connect: Callable[..., psycopg.Connection[Any]], admin: Admin
) -> None:
    analyst = admin.add_analyst(5.0, prefix="pg3refused")
    connection = psycopg_connect(analyst)
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match='column "age" is private'):
        connection.execute("SELECT age FROM patients WHERE age > %s", [30])
    with pytest.raises(psycopg.errors.InvalidTextRepresentation, match='for type bigint: "thirty"'):
        connection.execute("SELECT COUNT(*) FROM patients WHERE age > %s", ["thirty"])  # typed as age is
    assert spent(admin, analyst) == 0
    (count,) = connection.execute("SELECT COUNT(*) FROM patients WHERE age > %s", [31]).fetchone()  # type: ignore[misc]
    assert isinstance(count, int)
    assert spent(admin, analyst) == pytest.approx(EPSILON)


def test_psycopg_transaction_block_fails_after_an_error_until_rollback(
    psycopg_connect: Callable[..., psycopg.Connection[Any]], admin: Admin
) -> None:
    connection = psycopg_connect(admin.add_analyst(1.0, prefix="pg3tx"))
    connection.autocommit = False
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        connection.execute("SELECT * FROM patients WHERE age > %s", [1])
    with pytest.raises(psycopg.errors.InFailedSqlTransaction):
        connection.execute("SELECT %s", [1])
    connection.rollback()
    assert connection.execute("SELECT %s::int", [1]).fetchone() == (1,)


# --- asyncpg -----------------------------------------------------------------------------------------------


def run(coroutine: Awaitable[T]) -> T:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=30))  # type: ignore[arg-type]


def with_asyncpg(
    server: RunningServer, analyst: Analyst, work: Callable[[asyncpg.Connection], Awaitable[T]]
) -> T:
    async def main() -> T:
        connection = await asyncpg.connect(
            host=server.host,
            port=server.port,
            user=analyst.name,
            password=analyst.password,
            database="demo",
            ssl=False,
            timeout=10,
        )
        try:
            await connection.execute(f"SET veil.epsilon = {EPSILON}")
            return await work(connection)
        finally:
            await connection.close()

    return run(main())


def test_asyncpg_fetch_with_parameters_answers_a_dp_count(
    veil_server: RunningServer, admin: Admin, demo: Demo
) -> None:
    analyst = admin.add_analyst(5.0, prefix="apgfetch")

    async def work(connection: asyncpg.Connection) -> list[asyncpg.Record]:
        return await connection.fetch("SELECT COUNT(*) AS n FROM patients WHERE age > $1", 30)

    (record,) = with_asyncpg(veil_server, analyst, work)
    assert abs(record["n"] - exact_count(demo, 30)) <= NOISE_BOUND
    assert spent(admin, analyst) == pytest.approx(EPSILON)  # described (planned) then executed: charged once


def test_asyncpg_prepared_statement_reports_types_before_anything_is_spent(
    veil_server: RunningServer, admin: Admin
) -> None:
    analyst = admin.add_analyst(5.0, prefix="apgprep")

    async def work(
        connection: asyncpg.Connection,
    ) -> tuple[list[str], list[tuple[str, str]], float, list[int]]:
        statement = await connection.prepare(
            "SELECT region, COUNT(*), AVG(income) FROM patients WHERE age > $1 GROUP BY region"
        )
        parameters = [parameter.name for parameter in statement.get_parameters()]
        attributes = [(attribute.name, attribute.type.name) for attribute in statement.get_attributes()]
        before = spent(admin, analyst)
        counts = [len(await statement.fetch(age)) for age in (30, 40)]
        return parameters, attributes, before, counts

    parameters, attributes, before, counts = with_asyncpg(veil_server, analyst, work)
    assert parameters == ["int8"]  # inferred from the column age
    assert attributes == [("region", "text"), ("count", "int8"), ("avg", "float8")]
    assert before == 0
    assert counts == [7, 7]
    assert spent(admin, analyst) == pytest.approx(2 * EPSILON)


def test_asyncpg_binary_parameters_and_results_of_every_common_type(
    veil_server: RunningServer, admin: Admin
) -> None:
    values = (True, 7, -(2**40), 2.5, Decimal("1.25"), "naïve", datetime.date(2024, 2, 29))

    async def work(connection: asyncpg.Connection) -> asyncpg.Record:
        return await connection.fetchrow(
            "SELECT $1::boolean, $2::int4, $3::int8, $4::float8, $5::numeric, $6::text, $7::date", *values
        )

    record = with_asyncpg(veil_server, admin.add_analyst(1.0, prefix="apgtypes"), work)
    assert tuple(record) == (True, 7, -(2**40), 2.5, 1.25, "naïve", datetime.date(2024, 2, 29))


def test_asyncpg_cursor_fetches_with_execute_row_limits(veil_server: RunningServer, admin: Admin) -> None:
    async def work(connection: asyncpg.Connection) -> tuple[list[tuple[Any, ...]], list[str], list[str]]:
        async with connection.transaction():
            prefetched = [
                tuple(r) async for r in connection.cursor("SELECT code, zone FROM zones", prefetch=3)
            ]
            cursor = await connection.cursor(
                "SELECT code FROM zones WHERE zone <> $1 ORDER BY code", "overseas"
            )
            first = [r["code"] for r in await cursor.fetch(4)]
            rest = [r["code"] for r in await cursor.fetch(10)]
        return prefetched, first, rest

    prefetched, first, rest = with_asyncpg(veil_server, admin.add_analyst(1.0, prefix="apgcursor"), work)
    assert len(prefetched) == 8 and ("overseas", "overseas") in prefetched
    assert len(first) == 4 and len(rest) == 3 and first + rest == sorted(first + rest)


def test_asyncpg_cursor_over_a_dp_answer_is_charged_once(veil_server: RunningServer, admin: Admin) -> None:
    """The first Execute runs the query; the next ones send the rows left of the same noisy answer."""
    analyst = admin.add_analyst(5.0, prefix="apgdpcursor")

    async def work(connection: asyncpg.Connection) -> list[list[str]]:
        async with connection.transaction():
            cursor = await connection.cursor(
                "SELECT region, COUNT(*) FROM patients WHERE age > $1 GROUP BY region", 20
            )
            return [[r["region"] for r in await cursor.fetch(3)] for _ in range(3)]

    batches = with_asyncpg(veil_server, analyst, work)
    assert [len(batch) for batch in batches] == [3, 3, 1]
    regions = [region for batch in batches for region in batch]
    assert sorted(regions) == sorted(["capital", "north", "south", "east", "west", "coast", "islands"])
    assert spent(admin, analyst) == pytest.approx(EPSILON)


def test_asyncpg_a_refused_query_then_a_good_one(veil_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(5.0, prefix="apgrefused")

    async def work(connection: asyncpg.Connection) -> int:
        with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError) as refused:
            await connection.fetch("SELECT * FROM patients WHERE age > $1", 30)
        assert refused.value.sqlstate == "42501"
        with pytest.raises(asyncpg.exceptions.UndefinedTableError):
            await connection.fetchval("SELECT COUNT(*) FROM nowhere WHERE x > $1", 1)
        return await connection.fetchval("SELECT COUNT(*) FROM patients WHERE age > $1", 44)

    assert isinstance(with_asyncpg(veil_server, analyst, work), int)
    assert spent(admin, analyst) == pytest.approx(EPSILON)


# --- pg8000 and psycopg2 -------------------------------------------------------------------------------------


def test_pg8000_parameters_refusal_then_answer(veil_server: RunningServer, admin: Admin, demo: Demo) -> None:
    analyst = admin.add_analyst(5.0, prefix="pg8000")
    connection = pg8000.native.Connection(
        analyst.name, host=veil_server.host, port=veil_server.port, password=analyst.password, database="demo"
    )
    try:
        connection.run(f"SET veil.epsilon = {EPSILON}")
        with pytest.raises(pg8000.native.DatabaseError) as refused:
            connection.run("SELECT * FROM patients WHERE age > :age", age=30)
        assert refused.value.args[0]["C"] == "42501"
        ((count,),) = connection.run("SELECT COUNT(*) FROM patients WHERE age > :age", age=30)
        assert abs(count - exact_count(demo, 30)) <= NOISE_BOUND
        assert connection.run("SELECT :a::int + 1", a=1) == [[2]]
    finally:
        connection.close()
    assert spent(admin, analyst) == pytest.approx(EPSILON)


def test_psycopg2_interpolates_on_the_client_and_is_answered(
    veil_server: RunningServer, admin: Admin, demo: Demo
) -> None:
    analyst = admin.add_analyst(5.0, prefix="psycopg2")
    connection = psycopg2.connect(veil_server.conninfo(analyst))
    try:
        connection.autocommit = True
        cursor = connection.cursor()
        cursor.execute(f"SET veil.epsilon = {EPSILON}")
        with pytest.raises(psycopg2.errors.InsufficientPrivilege):
            cursor.execute("SELECT * FROM patients WHERE age > %s", [30])
        cursor.execute("SELECT COUNT(*) FROM patients WHERE age > %s", [30])
        ((count,),) = cursor.fetchall()
    finally:
        connection.close()
    assert abs(count - exact_count(demo, 30)) <= NOISE_BOUND
    assert spent(admin, analyst) == pytest.approx(EPSILON)
