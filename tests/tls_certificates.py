"""A self-signed test certificate for ``veil serve`` (``tls_cert``/``tls_key``), made with ``openssl``.

Clients use ``sslmode=require`` (or their equivalent), which encrypts without verifying the certificate.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import missing


def make_certificate(directory: Path) -> Path:
    """``server.crt`` and ``server.key`` in ``directory`` (created); → the directory.

    Skips the test without ``openssl`` (fails in CI, see ``tests.conftest.missing``).
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        missing("openssl is not installed: it makes the test certificate")
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(directory / "server.key"),
            "-out",
            str(directory / "server.crt"),
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
        ],
        check=True,
        capture_output=True,
    )
    return directory
