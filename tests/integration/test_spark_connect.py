"""``veil serve`` on a Spark dataset whose session is a real Spark Connect server (``spark_remote =
"sc://127.0.0.1:PORT"``, the ``spark_connect`` fixture): DP answers through psycopg, charged; the
guesses of tests/integration/test_side_channels.py answered either way (the server's sessions run with
ANSI mode off, which Veil sets over Connect); and an engine failure that is charged and quotes nothing
of Spark. (``veil materialize kanon`` over Connect: tests/integration/test_materialize_cli.py.)

Marked ``spark``: skipped without pyspark, its Connect jar and Java unless VEIL_REQUIRE_SPARK=1.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from tests.conftest import ALICE, Admin, RunningServer
from tests.integration.test_side_channels import GUESSES, VICTIM, outcome
from tests.integration.test_spark_end_to_end import EPSILON, spark_demo

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def connect_demo(spark_connect: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo on Spark Connect; table ``visits`` reads a file that is not Parquet."""
    directory = tmp_path_factory.mktemp("connect") / "demo"
    config = spark_demo(directory, remote=spark_connect)
    (directory / "parquet" / "visits.parquet").write_text("not a Parquet file\n")
    return config


@pytest.fixture
def server(connect_demo: Path, serve: Callable[[Path], RunningServer]) -> RunningServer:
    return serve(connect_demo)


@pytest.fixture
def connection(server: RunningServer) -> Callable[..., psycopg.Connection[Any]]:

    def open_as(analyst: Any = ALICE) -> psycopg.Connection[Any]:
        return psycopg.connect(server.conninfo(analyst), autocommit=True, prepare_threshold=None)

    return open_as


def test_psycopg_gets_dp_answers_over_spark_connect(
    connect_demo: Path, connection: Callable[..., psycopg.Connection[Any]]
) -> None:
    with duckdb.connect(str(connect_demo.parent / "demo.duckdb"), read_only=True) as exact:
        (patients,) = exact.execute("SELECT COUNT(*) FROM patients").fetchone() or (0,)
    admin = Admin(connect_demo)
    before = admin.balance(ALICE)
    with connection() as client:
        client.execute(f"SET veil.epsilon = {EPSILON / 2}")
        (count,) = client.execute("SELECT COUNT(*) FROM patients").fetchone() or (None,)
        assert isinstance(count, int) and abs(count - patients) <= 20 / (EPSILON / 2), (count, patients)
        with pytest.raises(psycopg.Error, match="no_such_column") as refused:
            client.execute("SELECT AVG(no_such_column) FROM patients")
        assert refused.value.sqlstate == "42703"  # refused by Veil before Spark runs anything: free
    after = admin.balance(ALICE)
    assert after["spent_epsilon"] - before["spent_epsilon"] == pytest.approx(EPSILON / 2)


@pytest.mark.parametrize("template", GUESSES.values(), ids=GUESSES.keys())
def test_a_guess_about_one_patient_is_answered_either_way_over_connect(
    connect_demo: Path, connection: Callable[..., psycopg.Connection[Any]], template: str
) -> None:
    """Division by zero and overflow, which raise in Spark 4's default ANSI mode, answer on Veil's
    Connect session whether the guess about patient 42 is right or wrong."""
    with duckdb.connect(str(connect_demo.parent / "demo.duckdb"), read_only=True) as exact:
        (age,) = exact.execute("SELECT age FROM patients WHERE patient_id = ?", [VICTIM]).fetchone() or (0,)
    analyst = Admin(connect_demo).add_analyst(1.0, prefix="guess")
    with connection(analyst) as client:
        right = outcome(client, template.format(victim=VICTIM, age=age))
        wrong = outcome(client, template.format(victim=VICTIM, age=age + 1))
    assert (right, wrong) == ("answered", "answered")


def test_an_engine_failure_over_connect_is_charged_and_says_nothing_of_spark(
    connect_demo: Path, server: RunningServer, connection: Callable[..., psycopg.Connection[Any]]
) -> None:
    admin = Admin(connect_demo)
    analyst = admin.add_analyst(1.0, prefix="broken")
    with connection(analyst) as client, pytest.raises(psycopg.Error) as failed:
        client.execute("SELECT COUNT(*) FROM visits")
    assert failed.value.sqlstate == "58000"
    message = str(failed.value)
    assert message.startswith("the database engine failed while answering the query")
    assert "charged ε=0.1" in message
    assert not any(word in message for word in ("visits", "Spark", "TABLE_OR_VIEW", "Parquet"))
    assert [spend["state"] for spend in admin.history(analyst)] == ["committed"]
    assert "TABLE_OR_VIEW_NOT_FOUND" not in server.output()  # pyspark's own ERROR log of the query
