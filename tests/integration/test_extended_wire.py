"""The extended query protocol message by message, from a raw socket: what Veil answers to each of
Parse, Bind, Describe, Execute, Close, Sync and Flush, in which order, and how it recovers from an
error. Real drivers (tests/clients/test_extended_protocol.py) exercise the same paths as a whole;
here each rule of the protocol is pinned down on its own, against ``veil serve`` over DuckDB."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest

from budget.audit import Decision
from budget.ledger import Ledger
from tests.conftest import Admin, Analyst, Demo, RunningServer
from tests.unit.wire.test_wire_scram import Client as ScramClient

PROTOCOL_3 = 196608
INT4, INT8, TEXT = 23, 20, 25
Message = tuple[bytes, bytes]


def cstring(text: str) -> bytes:
    return text.encode() + b"\0"


def message(type_byte: bytes, payload: bytes = b"") -> bytes:
    return type_byte + struct.pack("!i", len(payload) + 4) + payload


def parse(query: str, name: str = "", types: tuple[int, ...] = ()) -> bytes:
    return message(b"P", cstring(name) + cstring(query) + struct.pack(f"!h{len(types)}I", len(types), *types))


def bind(
    values: tuple[bytes | None, ...] = (),
    *,
    portal: str = "",
    statement: str = "",
    formats: tuple[int, ...] = (),
    results: tuple[int, ...] = (),
) -> bytes:
    encoded = b"".join(struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v for v in values)
    return message(
        b"B",
        cstring(portal)
        + cstring(statement)
        + struct.pack(f"!h{len(formats)}h", len(formats), *formats)
        + struct.pack("!h", len(values))
        + encoded
        + struct.pack(f"!h{len(results)}h", len(results), *results),
    )


def describe(kind: str, name: str = "") -> bytes:
    return message(b"D", kind.encode() + cstring(name))


def execute(portal: str = "", max_rows: int = 0) -> bytes:
    return message(b"E", cstring(portal) + struct.pack("!i", max_rows))


def close(kind: str, name: str) -> bytes:
    return message(b"C", kind.encode() + cstring(name))


SYNC = message(b"S")
FLUSH = message(b"H")


def query(sql: str) -> bytes:
    return message(b"Q", cstring(sql))


class WireClient:
    """A connection that speaks the protocol byte by byte (SCRAM with the test suite's own client)."""

    def __init__(self, server: RunningServer, analyst: Analyst) -> None:
        self.sock = socket.create_connection((server.host, server.port), timeout=10)
        self.data = b""
        parameters = cstring("user") + cstring(analyst.name) + cstring("database") + cstring("demo") + b"\0"
        body = struct.pack("!i", PROTOCOL_3) + parameters
        self.sock.sendall(struct.pack("!i", len(body) + 4) + body)
        scram = ScramClient(analyst.password.encode())
        self.receive()  # AuthenticationSASL
        first = scram.client_first()
        self.send(message(b"p", cstring("SCRAM-SHA-256") + struct.pack("!i", len(first)) + first))
        _, server_first = self.receive()
        self.send(message(b"p", scram.client_final(server_first[4:])))
        self.until(b"Z")

    def send(self, *messages: bytes) -> None:
        self.sock.sendall(b"".join(messages))

    def receive(self) -> Message:
        while len(self.data) < 5 or len(self.data) < 1 + struct.unpack("!i", self.data[1:5])[0]:
            chunk = self.sock.recv(65536)
            assert chunk, f"the server closed the connection; unread: {self.data!r}"
            self.data += chunk
        length = struct.unpack("!i", self.data[1:5])[0]
        received = (self.data[:1], self.data[5 : 1 + length])
        self.data = self.data[1 + length :]
        return received

    def until(self, last: bytes) -> list[Message]:
        """Every message up to and including the first of type ``last``, notices left out."""
        received: list[Message] = []
        while True:
            item = self.receive()
            if item[0] != b"N":
                received.append(item)
            if item[0] == last:
                return received

    def close(self) -> None:
        self.sock.close()


def types_of(messages: list[Message]) -> str:
    return "".join(type_byte.decode() for type_byte, _ in messages)


def fields(error: Message) -> dict[str, str]:
    assert error[0] == b"E", error
    return {f[:1].decode(): f[1:].decode() for f in error[1].rstrip(b"\0").split(b"\0")}


def row(data_row: Message) -> list[bytes | None]:
    assert data_row[0] == b"D", data_row
    count, position, values = struct.unpack("!h", data_row[1][:2])[0], 2, []
    for _ in range(count):
        length = struct.unpack("!i", data_row[1][position : position + 4])[0]
        position += 4
        values.append(None if length == -1 else data_row[1][position : position + length])
        position += max(length, 0)
    return values


def columns(row_description: Message) -> list[tuple[str, int, int]]:
    """(name, type OID, format code) of each column."""
    assert row_description[0] == b"T", row_description
    payload, described = row_description[1], []
    position = 2
    for _ in range(struct.unpack("!h", payload[:2])[0]):
        end = payload.index(b"\0", position)
        _, _, oid, _, _, code = struct.unpack("!IhIhih", payload[end + 1 : end + 19])
        described.append((payload[position:end].decode(), oid, code))
        position = end + 19
    return described


def command_tag(complete: Message) -> str:
    assert complete[0] == b"C", complete
    return complete[1].rstrip(b"\0").decode()


@pytest.fixture
def analyst(admin: Admin) -> Analyst:
    return admin.add_analyst(1.0, prefix="wire")


@pytest.fixture
def client(veil_server: RunningServer, analyst: Analyst) -> Iterator[WireClient]:
    connection = WireClient(veil_server, analyst)
    yield connection
    connection.close()


def test_a_parameterized_query_is_answered_in_protocol_order(client: WireClient) -> None:
    client.send(parse("SELECT $1::int + 1 AS n"), bind((b"41",)), describe("P"), execute(), SYNC)
    answer = client.until(b"Z")
    assert types_of(answer) == "12TDCZ"
    assert columns(answer[2]) == [("n", INT4, 0)]  # int + int is int4, as PostgreSQL types it
    assert row(answer[3]) == [b"42"]
    assert command_tag(answer[4]) == "SELECT 1"


def test_describing_a_statement_reports_parameter_types_and_columns_and_spends_nothing(
    client: WireClient, admin: Admin, analyst: Analyst
) -> None:
    client.send(parse("SELECT region, COUNT(*) FROM patients WHERE age > $1 GROUP BY region", "s"))
    client.send(describe("S", "s"), SYNC)
    answer = client.until(b"Z")
    assert types_of(answer) == "1tTZ"
    assert struct.unpack("!hI", answer[1][1]) == (1, INT8)  # inferred from the column age
    assert columns(answer[2]) == [("region", TEXT, 0), ("count", INT8, 0)]
    assert admin.balance(analyst)["spent_epsilon"] == 0


def test_a_statement_without_rows_is_described_as_no_data(client: WireClient) -> None:
    client.send(parse("SET application_name = 'wire'"), describe("S"), SYNC)
    assert types_of(client.until(b"Z")) == "1tnZ"


def test_an_empty_query_is_answered_with_empty_query_response(client: WireClient) -> None:
    client.send(parse(""), bind(), describe("P"), execute(), SYNC)
    assert types_of(client.until(b"Z")) == "12nIZ"


def test_binary_results_are_sent_as_bind_asks(client: WireClient) -> None:
    client.send(
        parse("SELECT 7::bigint AS n, 'x' AS t"), bind(results=(1, 0)), describe("P"), execute(), SYNC
    )
    answer = client.until(b"Z")
    assert columns(answer[2]) == [("n", INT8, 1), ("t", TEXT, 0)]
    assert row(answer[3]) == [struct.pack("!q", 7), b"x"]


def test_binary_parameters_are_read_as_their_types(client: WireClient) -> None:
    client.send(parse("SELECT $1 + 1", types=(INT8,)), bind((struct.pack("!q", 41),), formats=(1,)))
    client.send(execute(), SYNC)
    answer = client.until(b"Z")
    assert row(answer[2]) == [b"42"]


def test_execute_with_a_row_limit_suspends_and_resumes_the_portal(client: WireClient) -> None:
    client.send(query("SHOW ALL"))
    settings = [row(item)[0] for item in client.until(b"Z") if item[0] == b"D"]
    client.send(query("BEGIN"))
    client.until(b"Z")
    client.send(parse("SHOW ALL"), bind(portal="c"), execute("c", 3), SYNC)
    first = client.until(b"Z")
    assert types_of(first) == "12DDDsZ"
    assert first[-1][1] == b"T"  # inside the transaction block, the portal lives on after Sync
    left = len(settings) - 3
    client.send(execute("c", left - 1), execute("c", left - 1), SYNC)
    rest = client.until(b"Z")
    assert types_of(rest) == "D" * (left - 1) + "s" + "DCZ"
    assert command_tag(rest[-2]) == "SHOW"
    assert [row(item)[0] for item in first + rest if item[0] == b"D"] == settings
    client.send(query("COMMIT"))
    client.until(b"Z")


def test_portals_end_with_the_implicit_transaction_at_sync(client: WireClient) -> None:
    client.send(parse("SHOW ALL"), bind(portal="p"), execute("p", 1), SYNC)
    assert types_of(client.until(b"Z")) == "12DsZ"
    client.send(execute("p", 1), SYNC)
    error, ready = client.until(b"Z")
    assert fields(error)["C"] == "34000" and fields(error)["M"] == 'portal "p" does not exist'
    assert ready == (b"Z", b"I")


def test_pipelined_statements_are_answered_in_order(client: WireClient) -> None:
    client.send(parse("SELECT 1", "one"), parse("SELECT 2", "two"))
    client.send(bind(statement="two"), execute(), bind(statement="one"), execute(), SYNC)
    answer = client.until(b"Z")
    assert types_of(answer) == "112DC2DCZ"
    assert [row(item) for item in answer if item[0] == b"D"] == [[b"2"], [b"1"]]


def test_after_an_error_messages_are_discarded_until_sync(client: WireClient) -> None:
    client.send(parse("SELECT 1"), bind(), execute(), parse("SELECT FROM WHERE"), bind(), execute())
    client.send(query("SELECT 3"), SYNC)
    answer = client.until(b"Z")
    assert types_of(answer) == "12DCEZ"  # nothing for the Bind, Execute and Query after the error
    assert fields(answer[4])["C"] == "42601"
    client.send(parse("SELECT 4"), bind(), execute(), SYNC)  # the next batch is served
    assert row(client.until(b"Z")[2]) == [b"4"]


def test_an_error_is_sent_at_once_without_waiting_for_sync(client: WireClient) -> None:
    """asyncpg sends Parse, Describe, Flush — and only sends Sync once it has read the error."""
    client.send(parse("SELECT * FROM patients"), describe("S"), FLUSH)
    assert types_of(client.until(b"E")) == "1E"
    client.send(SYNC)
    assert client.until(b"Z") == [(b"Z", b"I")]


def test_flush_sends_what_is_pending(client: WireClient) -> None:
    client.send(parse("SELECT 1"), FLUSH)
    assert client.receive() == (b"1", b"")
    client.send(SYNC)
    client.until(b"Z")


@pytest.mark.parametrize(
    ("messages", "sqlstate", "text"),
    [
        ((parse("SELECT 1", "s"), parse("SELECT 2", "s")), "42P05", 'prepared statement "s" already exists'),
        ((bind(statement="nope"),), "26000", 'prepared statement "nope" does not exist'),
        ((describe("S", "nope"),), "26000", 'prepared statement "nope" does not exist'),
        ((execute("nope"),), "34000", 'portal "nope" does not exist'),
        ((parse("SELECT 1"), bind(portal="p"), bind(portal="p")), "42P03", 'portal "p" already exists'),
        (
            (parse("SELECT 1; SELECT 2"),),
            "42601",
            "cannot insert multiple commands into a prepared statement",
        ),
        ((parse("SELECT $1 + 1", types=(INT8,)), bind((b"x",))), "22P02", 'for type bigint: "x"'),
        ((parse("SELECT $1 + 1", types=(INT8,)), bind((b"x",), formats=(1,))), "22P03", "takes 8 bytes"),
        ((parse("SELECT $1, $2"), bind((b"1",))), "08P01", "supplies 1 parameters, but prepared statement"),
        ((parse("SELECT 1"), bind(results=(0, 1)), execute()), "08P01", "2 format codes for 1 columns"),
    ],
)
def test_protocol_errors_carry_postgres_sqlstates_and_the_session_goes_on(
    client: WireClient, messages: tuple[bytes, ...], sqlstate: str, text: str
) -> None:
    client.send(*messages, SYNC)
    answer = client.until(b"Z")
    error = next(item for item in answer if item[0] == b"E")
    assert fields(error)["C"] == sqlstate
    assert text in fields(error)["M"]
    assert answer[-1] == (b"Z", b"I")
    client.send(query("SELECT 1"))
    assert types_of(client.until(b"Z")) == "TDCZ"


def test_closing_a_statement_frees_its_name_and_closing_a_missing_one_is_no_error(client: WireClient) -> None:
    client.send(parse("SELECT 1", "s"), close("S", "s"), close("S", "s"), close("P", "nope"))
    client.send(parse("SELECT 2", "s"), bind(statement="s"), execute(), SYNC)
    answer = client.until(b"Z")
    assert types_of(answer) == "13331" + "2DCZ"
    assert row(answer[6]) == [b"2"]


def test_a_private_query_described_then_executed_twice_is_charged_once(
    client: WireClient, admin: Admin, analyst: Analyst, demo: Demo
) -> None:
    sql = "SELECT COUNT(*) FROM patients WHERE age >= $1"
    client.send(parse(sql), bind((b"61",)), describe("P"), execute(), execute(), SYNC)
    answer = client.until(b"Z")
    assert types_of(answer) == "12TDCCZ"
    assert command_tag(answer[4]) == "SELECT 1" and command_tag(answer[5]) == "SELECT 0"
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.1)
    (entry,) = Ledger.open(demo.ledger).audit_log.entries(analyst=analyst.name)
    assert (entry.decision, entry.epsilon) == (Decision.ANSWERED, pytest.approx(0.1))
    assert (
        entry.statement == "SELECT COUNT(*) FROM patients WHERE age >= 61"
    )  # the values, as they were bound


DESCRIBED_QUERIES = [
    "SELECT COUNT(*) FROM patients WHERE age > {}",
    "SELECT region, AVG(income), COUNT(*) * 2 AS twice FROM patients WHERE age > {} GROUP BY region ORDER BY 1",
    "SELECT MEDIAN(age), STDDEV_SAMP(income) FROM patients WHERE age > {}",
    "SELECT sex, COUNT(*) FROM patients WHERE age > {} GROUP BY sex HAVING COUNT(*) > 10",
    "SELECT FLOOR(age / 10) * 10 AS decade, SUM(age) FROM patients WHERE age > {} GROUP BY FLOOR(age / 10) * 10",
    "SELECT date_trunc('year', visit_date) AS y, COUNT(*) FROM visits WHERE visit_id > {} GROUP BY 1",
    "SELECT date_trunc('year', visit_date) AS y, COUNT(*) + 1 FROM visits WHERE visit_id > {} GROUP BY 1",
    "SELECT remaining_epsilon > {} AS ok, dataset FROM veil.budget",
    "WITH p AS (SELECT patient_id, COUNT(*) AS n FROM visits WHERE visit_id > {} GROUP BY patient_id)"
    " SELECT AVG(n), MEDIAN(n) FROM p",
    "SELECT COUNT(*) FILTER (WHERE age > {}) AS old, COUNT(*) AS n FROM patients"
    " UNION ALL SELECT AVG(income), COUNT(*) FROM patients",
    "SELECT 'all' AS region, COUNT(*) AS n FROM patients WHERE age > {}"
    " UNION ALL SELECT region, COUNT(*) FROM patients GROUP BY region ORDER BY n DESC LIMIT 3",
    "SELECT {} + 1 AS n, 'x' AS t, DATE '2024-01-01' AS d, 1.5 AS r, TRUE AS b",
]


@pytest.mark.parametrize("sql", DESCRIBED_QUERIES)
def test_a_statement_is_described_with_the_columns_its_answer_has(
    veil_server: RunningServer, admin: Admin, sql: str
) -> None:
    """Describe plans a private query without running it; the answer must then come with exactly the
    described column types, or a binary client (asyncpg) would misread it."""
    analyst = Analyst(f"described{DESCRIBED_QUERIES.index(sql)}", "pw-described")
    admin.check("analyst", "add", analyst.name, "--password-stdin", input=analyst.password + "\n")
    admin.check("budget", "grant", analyst.name, "demo", "1.0", "--delta", "1e-5")
    client = WireClient(veil_server, analyst)
    try:
        client.send(query("SET veil.epsilon = 1; SET veil.delta = 1e-6"))  # years pass τ: rows exist
        client.until(b"Z")
        client.send(parse(sql.format("$1")), describe("S"), SYNC)
        described = columns(client.until(b"Z")[2])
        assert admin.balance(analyst)["spent_epsilon"] == 0
        client.send(query(sql.format("1")))
        answered = columns(client.until(b"Z")[0])
    finally:
        client.close()
    assert described == answered


def test_refusals_are_audited_with_the_statement(client: WireClient, analyst: Analyst, demo: Demo) -> None:
    client.send(parse("SELECT * FROM patients WHERE age > $1"), bind((b"3",)), execute(), SYNC)
    error = client.until(b"Z")[2]
    assert fields(error)["C"] == "42501"
    (entry,) = Ledger.open(demo.ledger).audit_log.entries(analyst=analyst.name)
    assert (entry.decision, entry.sqlstate) == (Decision.REFUSED, "42501")
    assert entry.statement == "SELECT * FROM patients WHERE age > 3"


def test_a_failed_transaction_block_refuses_until_rollback(client: WireClient) -> None:
    client.send(query("BEGIN"))
    client.until(b"Z")
    client.send(parse("SELECT * FROM patients"), bind(), execute(), SYNC)
    assert client.until(b"Z")[-1] == (b"Z", b"E")
    client.send(parse("SELECT 1"), bind(), execute(), SYNC)
    error, ready = client.until(b"Z")
    assert fields(error)["C"] == "25P02" and ready == (b"Z", b"E")
    client.send(parse("ROLLBACK"), bind(), execute(), SYNC)
    assert client.until(b"Z")[-1] == (b"Z", b"I")


def test_an_unknown_message_type_ends_the_connection_with_a_fatal_error(client: WireClient) -> None:
    client.send(message(b"F", b"\0\0\0\0"))
    fatal = fields(client.receive())
    assert (fatal["S"], fatal["C"]) == ("FATAL", "08P01")
