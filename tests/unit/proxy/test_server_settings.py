"""The ``[server]`` section: limits and TLS, each error naming its key; and the server's TLS context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proxy.config import ServerSettings, parse_config
from proxy.errors import ConfigError
from proxy.server.listener import tls_context
from proxy.server.login import is_loopback
from tests.unit.proxy.test_config import parse, valid_document


def server(tmp_path: Path, **keys: Any) -> ServerSettings:
    document = valid_document()
    document["server"] = keys
    settings: ServerSettings = parse(document, tmp_path).server
    return settings


def test_defaults_limit_messages_to_one_mebibyte_without_tls_or_timeout(tmp_path: Path) -> None:
    settings = parse_config('[ledger]\npath = "l.sqlite"\n', path=tmp_path / "veil.toml").server
    assert (settings.max_message_size, settings.statement_timeout_ms) == (1 << 20, None)
    assert (settings.tls_cert, settings.tls_key, settings.require_tls_for_remote) == (None, None, False)


def test_the_authentication_timeout_defaults_to_postgresqls_and_takes_fractions(tmp_path: Path) -> None:
    assert server(tmp_path).authentication_timeout_s == 60.0
    assert server(tmp_path, authentication_timeout_s=2.5).authentication_timeout_s == 2.5


def test_tls_files_are_relative_to_the_policy_file(tmp_path: Path) -> None:
    settings = server(tmp_path, tls_cert="tls/server.crt", tls_key="/etc/veil/server.key")
    assert settings.tls_cert == tmp_path / "tls" / "server.crt"
    assert settings.tls_key == Path("/etc/veil/server.key")


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"tls_cert": "server.crt"}, "server.tls_key: is needed too"),
        ({"tls_key": "server.key"}, "server.tls_cert: is needed too"),
        ({"tls_cert": "", "tls_key": "k"}, "server.tls_cert: must not be empty"),
        ({"require_tls_for_remote": True}, "server.require_tls_for_remote: needs tls_cert and tls_key"),
        ({"require_tls_for_remote": "yes"}, "server.require_tls_for_remote: must be true or false"),
        ({"max_message_size": 100}, "server.max_message_size: must be at least 1024"),
        ({"statement_timeout_ms": 0}, "server.statement_timeout_ms: must be a positive integer"),
        ({"max_connections": 0}, "server.max_connections: must be a positive integer"),
        ({"authentication_timeout_s": 0}, r"server.authentication_timeout_s: must be a number of seconds"),
        ({"authentication_timeout_s": 601}, r"server.authentication_timeout_s: must be a number of seconds"),
        ({"authentication_timeout_s": "1"}, r"server.authentication_timeout_s: must be"),
    ],
)
def test_rejects_invalid_server_keys(tmp_path: Path, keys: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        server(tmp_path, **keys)


def test_no_certificate_means_no_tls(tmp_path: Path) -> None:
    assert tls_context(server(tmp_path)) is None


def test_a_missing_certificate_stops_the_start_up(tmp_path: Path) -> None:
    settings = server(tmp_path, tls_cert="missing.crt", tls_key="missing.key")
    with pytest.raises(ConfigError, match="no such file"):
        tls_context(settings)


def test_a_file_that_is_not_a_certificate_stops_the_start_up(tmp_path: Path) -> None:
    (tmp_path / "server.crt").write_text("not a certificate")
    (tmp_path / "server.key").write_text("not a key")
    with pytest.raises(ConfigError, match="cannot load the certificate"):
        tls_context(server(tmp_path, tls_cert="server.crt", tls_key="server.key"))


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        (("127.0.0.1", 5433), True),
        (("127.8.9.10", 5433), True),
        (("::1", 5433, 0, 0), True),
        (("::ffff:127.0.0.1", 5433, 0, 0), True),
        (("192.0.2.7", 5433), False),
        (("::ffff:192.0.2.7", 5433, 0, 0), False),
        (("2001:db8::1", 5433, 0, 0), False),
        ("/run/veil/.s.PGSQL.5433", True),
    ],
)
def test_knows_which_peers_are_on_this_host(address: object, loopback: bool) -> None:
    assert is_loopback(address) is loopback
