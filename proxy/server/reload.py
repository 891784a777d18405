"""``kill -HUP``: apply a changed policy file to a running ``veil serve``, as PostgreSQL administrators
expect, and log what changed and what needs a restart.

What applies at once: each served dataset's policy (tables, columns, bounds, ε limits, side-channel
settings, accountant) when its engine settings are unchanged; the TLS files; ``max_connections`` and the
limits every new connection gets. What needs a restart: a dataset added or removed, a dataset whose
engine moved (backend, path, DSN, schema, pool, statement timeout), the listening address, the ledger.
Analysts and budgets need nothing: they live in the ledger, read at every login and query. A policy
that does not load is logged and the running configuration kept. A statement already planned keeps the
table policy it was planned with."""

from __future__ import annotations

import dataclasses
import logging
import ssl
from collections.abc import Callable, Mapping

from proxy.config import DatasetPolicy, VeilConfig
from proxy.errors import ProxyError
from proxy.ledger_access import accountants
from proxy.query.service import QueryService
from proxy.server.context import SessionContext

log = logging.getLogger("veil.server")

_ENGINE_KEYS = ("backend", "path", "dsn", "dsn_env", "schema", "pool_size", "statement_timeout_ms")


def reload_policy(
    load: Callable[[], VeilConfig],
    running: VeilConfig,
    context: SessionContext,
    *,
    tls_context: Callable[[VeilConfig], ssl.SSLContext | None],
) -> tuple[VeilConfig, SessionContext] | None:
    """The configuration and session context after applying the file ``load`` reads; None (logged)
    when it does not load, and then nothing changes."""
    try:
        new = load()
        tls = tls_context(new)
    except ProxyError as error:
        log.error("reload failed, keeping the running configuration: %s", error.message)
        return None
    applied, restart = _apply_datasets(new, context.services)
    restart += [
        f"server.{key}"
        for key in ("host", "port")
        if getattr(new.server, key) != getattr(running.server, key)
    ]
    if new.ledger != running.ledger:
        restart.append("ledger")
    log.warning(  # PostgreSQL logs a reload at LOG level, which every default configuration shows
        "reloaded policy: applied %s; needs a restart: %s",
        ", ".join(applied) or "no dataset changes",
        ", ".join(restart) or "nothing",
    )
    updated = dataclasses.replace(
        context,
        tls=tls,
        max_message_size=new.server.max_message_size,
        authentication_timeout=new.server.authentication_timeout_s,
        require_tls_for_remote=new.server.require_tls_for_remote,
    )
    return new, updated


def _apply_datasets(new: VeilConfig, services: Mapping[str, QueryService]) -> tuple[list[str], list[str]]:
    applied: list[str] = []
    restart: list[str] = []
    accountant_of = accountants(new)
    for name, service in services.items():
        policy = new.dataset(name)
        if policy is None:
            restart.append(f"dataset {name} removed (still served)")
        elif _engine(policy) != _engine(service.dataset):
            restart.append(f"dataset {name} engine settings")
        elif policy != service.dataset:
            service.update_policy(policy, accountant=accountant_of(name))
            applied.append(f"dataset {name}")
    restart += [f"dataset {name} added" for name in new.datasets if name not in services]
    return applied, restart


def _engine(dataset: DatasetPolicy) -> tuple[object, ...]:
    return tuple(getattr(dataset, key) for key in _ENGINE_KEYS)
