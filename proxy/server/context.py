"""What every session of one server shares."""

from __future__ import annotations

import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from budget.ledger import Ledger
from proxy.config import (
    DEFAULT_AUTH_FAILURE_DELAY_MS,
    DEFAULT_AUTH_FAILURE_MAX_DELAY_MS,
    DEFAULT_AUTHENTICATION_TIMEOUT_S,
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_MAX_STATEMENTS_PER_ANALYST,
)
from proxy.federation.exchange import FederationGateway
from proxy.query.service import QueryService
from proxy.server.analysis_pool import AnalysisPool
from proxy.server.audit_trail import AuditWriter
from proxy.server.cancel_keys import CancelKeys
from proxy.server.cancel_routing import CancelRouter
from proxy.server.statement_slots import StatementSlots
from proxy.server.throttle import LoginThrottle


@dataclass(frozen=True)
class SessionContext:
    """What every session shares: the ledger and its audit writer, one query service per dataset, the
    server's limits, its TLS context (None: SSLRequest is answered 'N') and the keys that route a
    CancelRequest to the session it names."""

    ledger: Ledger
    services: Mapping[str, QueryService]
    audit: AuditWriter  # appends to the ledger's audit log, on a thread of its own
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    authentication_timeout: float = DEFAULT_AUTHENTICATION_TIMEOUT_S  # seconds from connect to logged in
    tls: ssl.SSLContext | None = None
    require_tls_for_remote: bool = False  # clients not on loopback must have negotiated TLS
    cancel_keys: CancelKeys = field(default_factory=CancelKeys)
    cancel_router: CancelRouter | None = None  # with worker processes: where other workers' keys go
    # Fixed for the server's lifetime: an unknown analyst gets the same fake salt on every attempt,
    # so retrying cannot tell a missing name from a wrong password.
    mock_salt_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    statement_slots: StatementSlots = field(
        default_factory=lambda: StatementSlots(DEFAULT_MAX_STATEMENTS_PER_ANALYST)
    )
    analysis_pool: AnalysisPool | None = None  # None: long texts are analysed in threads
    federation: FederationGateway | None = None  # this site's federations (proxy/federation/)
    throttle: LoginThrottle = field(
        default_factory=lambda: LoginThrottle(
            base=DEFAULT_AUTH_FAILURE_DELAY_MS / 1000, ceiling=DEFAULT_AUTH_FAILURE_MAX_DELAY_MS / 1000
        )
    )
