"""A real Spark Connect server for the tests marked ``spark``: pyspark's own
``sbin/start-connect-server.sh --wait`` (the ``spark-connect`` jar ships in pyspark's ``jars/``), run in
the foreground in a process group of its own on a free port, with ``local[2]`` and its logs in a
temporary directory. Started once per test session by the ``spark_connect`` fixture (tests/conftest.py)
and stopped at its end — one JVM of about 1 GB for every Connect test.

The tests talk to it only from subprocesses (``veil serve``, ``veil materialize``): pyspark switches a
whole process to Spark Connect once it has a remote session, and the test process keeps its local one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

READY = "Spark Connect server started at"
START_TIMEOUT_S = 300.0  # a hang guard, not a speed check: a loaded 2-core machine starts it in 15–60 s
STOP_TIMEOUT_S = 30.0


class ConnectUnavailable(RuntimeError):
    """Why no server can be started here (no pyspark, no launcher script or jar, no Java)."""


def connect_launcher() -> Path:
    """pyspark's ``start-connect-server.sh``, after checking that the server jar and Java are there."""
    try:
        import pyspark
    except ImportError as error:
        raise ConnectUnavailable("pyspark is not installed") from error
    home = Path(pyspark.__file__).parent
    script = home / "sbin" / "start-connect-server.sh"
    if not script.exists():
        raise ConnectUnavailable(f"pyspark has no {script.relative_to(home)}")
    if not any((home / "jars").glob("spark-connect_*.jar")):
        raise ConnectUnavailable("pyspark has no jars/spark-connect_*.jar")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise ConnectUnavailable("Java is not installed (no java on the PATH, no JAVA_HOME)")
    return script


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def connect_server(directory: Path) -> Iterator[str]:
    """A running server's ``sc://127.0.0.1:PORT``; the server's log is ``directory/server.log``."""
    script = connect_launcher()
    port = free_port()
    log = directory / "server.log"
    environment = {
        **os.environ,
        "SPARK_HOME": str(script.parent.parent),
        "SPARK_LOG_DIR": str(directory),
        "SPARK_PID_DIR": str(directory),
    }
    environment.pop("SPARK_CONNECT_MODE_ENABLED", None)
    arguments = [
        *("--master", "local[2]"),
        *("--conf", f"spark.connect.grpc.binding.port={port}"),
        *("--conf", "spark.connect.grpc.binding.address=127.0.0.1"),
        *("--conf", "spark.ui.enabled=false"),
        *("--conf", "spark.driver.memory=1g"),
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            ["bash", str(script), "--wait", *arguments],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM is stopped with the script
        )
    try:
        _wait_until_ready(process, log)
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop(process)


def _wait_until_ready(process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if READY in text:
            return
        if process.poll() is not None:
            raise ConnectUnavailable(
                f"the Spark Connect server exited ({process.returncode}):\n{text[-3000:]}"
            )
        time.sleep(0.2)
    raise ConnectUnavailable(f"the Spark Connect server did not start:\n{log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group (the script and its JVM), SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
