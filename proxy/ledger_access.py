"""The ledger a policy file names, opened the same way by ``veil serve`` and the admin commands, and
the accountant each dataset's policy chooses.

The ledger is an SQLite file (``[ledger] path``) or a PostgreSQL database shared by several hosts
(``dsn``, or ``dsn_env`` naming the environment variable that holds the connection string with its
password). The environment is passed in by the caller (``cli.py``); nothing here reads ``os.environ``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from budget.accountants import Accountant, get_accountant
from budget.ledger import Ledger
from proxy.config import (
    COARSE_CAP_STEP,
    DEFAULT_ACCOUNTANT,
    LEDGER_DSN_HINT,
    DatasetPolicy,
    LedgerSettings,
    VeilConfig,
    is_ledger_dsn,
)
from proxy.errors import ConfigError


def open_ledger(config: VeilConfig, environ: Mapping[str, str], *, create: bool = False) -> Ledger:
    """Open the policy's ledger; with ``create``, make it first if it does not exist (an SQLite file,
    or the ledger's schema and tables in PostgreSQL). Raises ``ConfigError`` for an unset
    ``dsn_env`` and ``budget.errors.LedgerStoreError`` when the ledger cannot be opened."""
    settings = config.ledger
    location = settings.resolve_location(environ)
    if settings.shared and not is_ledger_dsn(str(location)):
        # The store would take a connection string without a database for an SQLite file name.
        raise ConfigError(
            f"ledger.dsn_env: the connection string in {settings.dsn_env} does not name a database",
            hint=LEDGER_DSN_HINT,
        )
    schema = settings.schema if settings.shared else None
    if not create and settings.path is not None and not settings.path.exists():
        raise ConfigError(
            f"there is no ledger at {settings.path} yet",
            hint=f"the first `veil analyst add NAME` creates it, or set ledger.path in {config.path} "
            "to an existing ledger",
        )
    timeout = settings.lock_timeout_s
    if create:
        return Ledger.create(location, schema=schema, lock_timeout=timeout)
    return Ledger.open(location, schema=schema, lock_timeout=timeout)


def describe_ledger(settings: LedgerSettings) -> str:
    """Where the ledger is, for people: never a password."""
    if settings.path is not None:
        return f"SQLite file {settings.path}"
    where = (
        mask_dsn(settings.dsn)
        if settings.dsn is not None
        else f"the connection string in ${settings.dsn_env}"
    )
    return f"PostgreSQL {where}, schema {settings.schema}"


def mask_dsn(dsn: str) -> str:
    """The connection string with any password replaced by ``********`` (the policy file refuses
    passwords, so this is a second line of defence)."""
    import psycopg  # only policies with a DSN pay for importing it
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parameters = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "(an invalid connection string)"
    if not parameters.get("password"):
        return dsn
    parameters["password"] = "********"
    return make_conninfo(**parameters)  # type: ignore[arg-type]


def dataset_accountant(policy: DatasetPolicy | None) -> Accountant:
    """The accountant ``policy.accountant`` names (budget/accountants.py); ``basic`` for a dataset
    that is no longer in the policy."""
    return get_accountant(DEFAULT_ACCOUNTANT if policy is None else policy.accountant)


def accountants(config: VeilConfig) -> Callable[[str], Accountant]:
    """Dataset name → its accountant, for ``Ledger.balances(accountant=…)``."""
    return lambda dataset: dataset_accountant(config.dataset(dataset))


def cap_steps(config: VeilConfig) -> Callable[[str], float | None]:
    """Dataset name → the step in which analysts see its cap; coarse for a dataset no longer in the
    policy (what a name no longer configured may show is the least)."""
    return lambda dataset: COARSE_CAP_STEP if (policy := config.dataset(dataset)) is None else policy.cap_step
