"""The ``veil`` command line: set up, serve and administer a Veil proxy.

Domain errors become one clear line (and a hint) at this edge; nothing below knows about click.
Secrets come only from prompts, stdin or environment variables read here.

Tables and JSON come from proxy/cli/support.py (``veil audit`` also prints CSV); ``veil materialize``
lives in proxy/cli/materialize.py and ``veil risk`` in proxy/cli/risk.py.

``veil --help`` loads click and this module only: each command imports what it runs on — the policy
(``load_config``), the ledger, SCRAM, JSON, CSV, logging — and the heavy commands load as a whole when
they run (``LazyGroup``). tests/unit/test_cli_startup.py keeps it so.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from budget.errors import InvalidBudgetError, UnknownAnalystError
from budget.renewals import RENEWALS
from proxy import __version__
from proxy.cli.lazy import LazyGroup
from proxy.cli.support import (
    Column,
    as_records,
    config_option,
    declared_dataset,
    echo_json,
    emit,
    emit_one,
    friendly_errors,
    json_option,
    print_table,
)

if TYPE_CHECKING:  # the ledger, the audit log and SCRAM load when a command uses them, not for --help
    from budget.ledger import Balance, DatasetCap, Ledger
    from proxy.config import ColumnPolicy, DatasetPolicy, TablePolicy, VeilConfig

if TYPE_CHECKING:  # imported when the command runs: duckdb and psycopg load slowly
    from proxy.cli.importer import ImportPlan

DEMO_ANALYST = "alice"
DEMO_PASSWORD = "veil-demo"
DEMO_EPSILON = 10.0
DEMO_DELTA = 1e-5  # so that SET veil.delta (keys from the data, Gaussian noise) works in the demo too
NEVER = "never"  # --renew never: the grant stops renewing
IMPORT_ENCODINGS = ("utf-8", "utf-16", "latin-1")  # proxy/cli/import_source.py ENCODINGS (not imported: lazy)

password_stdin_option = click.option(
    "--password-stdin", is_flag=True, help="Read the password from standard input (for scripts)."
)
password_env_option = click.option(
    "--password-env",
    metavar="VAR",
    default=None,
    help="Read the password from the environment variable VAR (for scripts).",
)
# A negative amount must reach the command's own check (one clear line), not be taken for an option.
NUMBERS_MAY_BE_NEGATIVE = {"ignore_unknown_options": True}


def load_config(path: Path) -> VeilConfig:
    """The policy file, read and checked. proxy.config (TOML, every policy dataclass, the budget stores it
    names) loads here, when a command reads the policy: ``veil --help`` never does."""
    from proxy.config import load_config as read_policy

    return read_policy(path)


def _ledger(config: VeilConfig, *, create: bool = False) -> Ledger:
    """The policy's ledger, closed when the command ends (however it ends)."""
    from proxy.ledger_access import open_ledger

    ledger = open_ledger(config, os.environ, create=create)
    click.get_current_context().call_on_close(ledger.close)
    if ledger.upgrade_note is not None:
        click.echo(ledger.upgrade_note, err=True)
    return ledger


def _epsilon(value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise InvalidBudgetError(f"epsilon must be a finite number greater than 0, got {value:g}")
    return value


def _delta(value: float) -> float:
    if not (math.isfinite(value) and 0 <= value < 1):
        raise InvalidBudgetError(
            f"delta must be at least 0 and less than 1, got {value:g}",
            hint="δ is a probability of failure: keep it far below 1/(number of people), e.g. 1e-6",
        )
    return value


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    lazy={
        "materialize": (
            "proxy.cli.materialize:materialize",
            "Export an anonymized copy of a table (no budget spent).",
        ),
        "risk": (
            "proxy.cli.risk:risk",
            "Score a released table: simulated attack and classic risk measures.",
        ),
        "reconstruct": (
            "proxy.cli.reconstruct:reconstruct",
            "Estimate a cross-tabulation from a sensitive-QID release.",
        ),
        "federate": ("proxy.cli.federate:federate", "Federations: joint counts with another Veil site."),
    },
)
@click.version_option(__version__, prog_name="veil")
def main() -> None:
    """Veil: a PostgreSQL-compatible proxy that answers SQL aggregates with differential privacy.

    \b
    Quick start:
      veil init-demo demo                 # synthetic data, policy, ledger and an analyst
      veil serve --config demo/veil.toml  # then connect with psql

    \b
    Administration (each command has --help with examples):
      veil policy validate                # is everything the policy names there?
      veil analyst add bob                # analysts: add, list, passwd, remove
      veil budget grant bob demo 1.0      # budgets: grant, revoke, cap, show, history
      veil audit --since 2025-01-01       # every statement analysts sent
    """


@main.command("init-demo", short_help="Build a synthetic demo: data, policy, ledger, analyst.")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False), default="demo")
@click.option(
    "--people", type=click.IntRange(min=100), default=100_000, show_default=True, help="Number of people."
)
@friendly_errors
def init_demo(directory: Path, people: int) -> None:
    """Write a synthetic health dataset, its policy, a ledger and a demo analyst into DIRECTORY.

    \b
    Example:
      veil init-demo demo && veil serve --config demo/veil.toml
    """
    from budget.loss import PrivacyLoss
    from proxy.cli.demo import build_demo
    from proxy.wire.scram import make_scram_verifier

    layout = build_demo(directory, people=people)
    ledger = _ledger(load_config(layout.config_path), create=True)
    ledger.add_analyst(DEMO_ANALYST, make_scram_verifier(DEMO_PASSWORD))
    ledger.grant(DEMO_ANALYST, layout.dataset, PrivacyLoss(DEMO_EPSILON, DEMO_DELTA))
    click.echo(f"built a synthetic dataset of {people:,} people: {layout.database_path}")
    click.echo(f"wrote {layout.config_path} and {layout.ledger_path}")
    click.echo(
        f"analyst {DEMO_ANALYST!r} (password {DEMO_PASSWORD!r}) has ε = {DEMO_EPSILON:g} and "
        f"δ = {DEMO_DELTA:g} on dataset {layout.dataset!r}"
    )
    click.echo(f"next: veil serve --config {layout.config_path}")


@main.command(short_help="Serve the datasets over the PostgreSQL wire protocol.")
@config_option
@click.option("--host", default=None, help="Address to listen on (default: server.host, else 127.0.0.1).")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port (default: server.port, else 5433; 0 picks a free one).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="Server log verbosity (stderr).",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="PEM certificate (chain) for TLS; with --tls-key, overrides server.tls_cert.",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="PEM private key (unencrypted) of --tls-cert; overrides server.tls_key.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=None,
    help="Worker processes answering on the port (default: one per core, at most 8); they share the "
    "ledger and the answer cache. Connection limits apply per worker.",
)
@friendly_errors
def serve(
    config_path: Path,
    host: str | None,
    port: int | None,
    log_level: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    workers: int | None,
) -> None:
    """Serve the datasets of a policy file over the PostgreSQL wire protocol.

    With a certificate (--tls-cert/--tls-key, or server.tls_cert/tls_key in the policy), clients may
    connect with TLS (sslmode=require); without one, they are told TLS is not available.

    \b
    Example:
      veil serve --config demo/veil.toml --port 5433
      psql "postgresql://alice@127.0.0.1:5433/demo"
      veil serve --config demo/veil.toml --tls-cert server.crt --tls-key server.key
      psql "postgresql://alice@127.0.0.1:5433/demo?sslmode=require"
      veil serve --config demo/veil.toml --workers 4
    """
    import logging

    from proxy.server.listener import run_server
    from proxy.server.workers import Supervisor, WorkerSeat, default_workers

    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    logging.basicConfig(
        level=log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )

    def policy() -> VeilConfig:
        """The policy file with the command line's TLS files, read at start and again on SIGHUP."""
        loaded = load_config(config_path)
        if tls_cert is None:
            return loaded
        return dataclasses.replace(
            loaded, server=dataclasses.replace(loaded.server, tls_cert=tls_cert, tls_key=tls_key)
        )

    config = policy()
    bind_host = host or config.server.host
    bind_port = config.server.port if port is None else port

    def ready(bound: int) -> None:
        click.echo(f"veil {__version__} listening on {bind_host}:{bound}", err=True)
        if config.server.tls_cert is not None:
            click.echo(f"TLS available with certificate {config.server.tls_cert}", err=True)
        for name in config.datasets:
            click.echo(f'connect with: psql "postgresql://ANALYST@{bind_host}:{bound}/{name}"', err=True)
        click.echo("press Ctrl+C to stop; kill -HUP reloads the policy file", err=True)

    def run_worker(seat: WorkerSeat | None, on_ready: Callable[[int], None]) -> None:
        run_server(
            config,
            host=bind_host,
            port=bind_port,
            on_ready=on_ready,
            environ=os.environ,
            reload_config=policy,
            seat=seat,
        )

    count = default_workers() if workers is None else workers
    try:
        if count == 1:
            run_worker(None, ready)
        elif Supervisor(count, run_worker).serve(bind_host, bind_port, ready):
            click.echo("stopped", err=True)
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
    except OSError as error:
        from proxy.errors import ConfigError

        raise ConfigError(
            f"cannot listen on {bind_host}:{bind_port}: {error.strerror}",
            hint="choose another --port (with `make demo`: make demo PORT=5544); another PostgreSQL may hold it",
        ) from None


@main.command("import", short_help="Load a CSV or Parquet file into a dataset.")
@click.argument("source", type=click.Path(path_type=Path, exists=True))
@config_option
@click.option("--dataset", required=True, help="Dataset to load into (its DuckDB file or PostgreSQL schema).")
@click.option("--table", required=True, help="Name of the new table.")
@click.option(
    "--privacy-unit",
    default=None,
    help='Column naming the person, or "row" if each row is one person (required unless --public-table: '
    "guessing wrong weakens privacy).",
)
@click.option(
    "--max-contributions",
    type=click.IntRange(min=1),
    default=None,
    help="Rows kept per person at query time (required with a privacy-unit column).",
)
@click.option(
    "--public",
    "public",
    multiple=True,
    metavar="COL=v1,v2,…",
    help="Declare a column public with its value list (repeatable).",
)
@click.option(
    "--bounds",
    "bounds",
    multiple=True,
    metavar="COL=lo:hi",
    help="Clamping bounds of a numeric column, or the first and last day of a date or timestamp column "
    "(day=2024-01-01:2025-12-31; a timestamp column's range ends at the last day's 23:59:59) (repeatable).",
)
@click.option(
    "--public-table",
    is_flag=True,
    help="Import a public lookup table (a code list, a calendar): every row is public knowledge, read "
    "exactly by any query, no privacy unit.",
)
@click.option(
    "--key",
    metavar="COL",
    default=None,
    help="With --public-table: the unique column private tables join on (checked unique in the file).",
)
@click.option(
    "--encoding",
    type=click.Choice(IMPORT_ENCODINGS, case_sensitive=False),
    default=None,
    help="Text encoding of a CSV file [default: utf-8]; convert any other with iconv first.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the column types and the policy section the import would write; change nothing.",
)
@json_option
@friendly_errors
def import_command(
    source: Path,
    config_path: Path,
    dataset: str,
    table: str,
    privacy_unit: str | None,
    max_contributions: int | None,
    public: tuple[str, ...],
    bounds: tuple[str, ...],
    public_table: bool,
    key: str | None,
    encoding: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Load a CSV or Parquet file into a dataset and declare it in the policy.

    Columns not named with --public stay private. The CSV dialect and column types are detected by
    DuckDB; the whole file is read and checked before anything is written, and the table and its
    policy are written both or neither. The policy file keeps its comments and layout.
    Stop `veil serve` first: the dataset file is locked while it serves. SOURCE may be a directory of
    Parquet files; a Spark dataset reads it where it is (only the policy is written, with the path in
    the dataset's sources).

    \b
    Example:
      veil import people.csv --dataset demo --table people --privacy-unit person_id \\
          --max-contributions 1 --public sex=female,male --bounds age=0:100
      veil import lake/visits/ --dataset lake --table visits --privacy-unit patient_id \\
          --max-contributions 10
      veil import regions.csv --dataset demo --table regions --public-table --key code --dry-run
    """
    from proxy.cli.importer import (
        apply_import,
        option_conflict,
        parse_bounds_option,
        parse_public_option,
        plan_import,
    )

    public_values = dict(parse_public_option(item) for item in public)
    conflict = option_conflict(
        privacy_unit=privacy_unit,
        max_contributions=max_contributions,
        public=public_values,
        public_table=public_table,
        key=key,
    )
    if conflict is not None:
        raise click.UsageError(conflict)
    plan = plan_import(
        config_path,
        dataset=dataset,
        table=table,
        source=source,
        privacy_unit=privacy_unit,
        public=public_values,
        bounds=dict(parse_bounds_option(item) for item in bounds),
        max_contributions=max_contributions,
        public_table=public_table,
        key=key,
        encoding=encoding.lower() if encoding else None,
        environ=None if dry_run else os.environ,
    )
    if not dry_run:
        apply_import(plan)
    if as_json:
        echo_json(_import_record(plan, dry_run=dry_run))
        return
    if dry_run:
        _print_import_plan(plan)
        return
    public_columns = [name for name, column in plan.entry["columns"].items() if column.get("public")]
    kind = (
        "a public lookup table" if plan.public_table else f"public: {', '.join(public_columns) or '(none)'}"
    )
    click.echo(
        f"imported {source} as {plan.dataset.name}.{plan.table}: {_rows(plan.rows)}, {len(plan.columns)} columns, "
        f"{kind}; policy updated in {config_path}"
    )


def _import_record(plan: ImportPlan, *, dry_run: bool) -> dict[str, Any]:
    """``veil import --json``: what was (or, with --dry-run, would be) imported and declared."""
    from proxy.cli.import_policy import entry_json

    return {
        "dry_run": dry_run,
        "source": str(plan.source.path),
        "format": plan.source.format,
        "encoding": plan.source.encoding,
        "delimiter": plan.source.delimiter,
        "rows": plan.rows,
        "dataset": plan.dataset.name,
        "backend": plan.dataset.backend,
        "table": plan.table,
        "public_table": plan.public_table,
        "columns": [
            {"name": c.name, "file_type": c.source_type, "type": c.type.value, "stored_as": c.storage.name}
            for c in plan.columns
        ],
        "policy": entry_json(plan.entry),
        "policy_toml": plan.section(),
        "config": str(plan.config_path),
    }


def _print_import_plan(plan: ImportPlan) -> None:
    source = plan.source
    dialect = f", delimiter {source.delimiter!r}, {source.encoding}" if source.format == "CSV" else ""
    click.echo(
        f"dry run: nothing was changed; {source.path} ({source.format}{dialect}) has {_rows(plan.rows)}"
    )
    click.echo()
    settings = plan.entry["columns"]
    rows = [
        {
            "column": c.name,
            "file type": c.source_type,
            "type": c.type.value,
            f"stored as ({plan.dataset.backend})": c.storage.name,
            "policy": _column_role(plan.entry, c.name, settings[c.name]),
        }
        for c in plan.columns
    ]
    print_table(rows, list(rows[0]))
    click.echo()
    click.echo(f"it would add to {plan.config_path}:")
    click.echo()
    click.echo(plan.section(), nl=False)


def _rows(count: int) -> str:
    return f"{count} row" if count == 1 else f"{count} rows"


def _column_role(entry: Mapping[str, Any], name: str, column: Mapping[str, Any]) -> str:
    roles = []
    if entry.get("public"):
        roles.append("lookup key" if entry.get("key") == name else "public (lookup table)")
    elif entry.get("privacy_unit") == name:
        roles.append("privacy unit")
    elif column.get("public"):
        roles.append(f"public, {len(column['values'])} values")
    else:
        roles.append("private")
    if "lower" in column:
        roles.append(f"bounds {column['lower']}:{column['upper']}")
    return ", ".join(roles)


# --- analysts ---------------------------------------------------------------------------------------------


@main.group()
def analyst() -> None:
    """Manage analysts: add, list, passwd, remove.

    Analysts are the people who connect and spend budget; the ledger stores a SCRAM verifier of
    their password, never the password."""


def _has_terminal() -> bool:
    return sys.stdin.isatty()


def _read_password(password_stdin: bool, password_env: str | None) -> str:
    """From VAR (--password-env), standard input (--password-stdin), or a prompt asked twice."""
    if password_stdin and password_env is not None:
        raise click.ClickException("give --password-stdin or --password-env, not both")
    if password_env is not None:
        password = os.environ.get(password_env, "")
        if not password:
            raise click.ClickException(f"the environment variable {password_env} is not set or empty")
    elif password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    elif not _has_terminal():  # getpass would warn, then read the password visibly
        raise click.UsageError(
            "no terminal to ask the password on: give --password-stdin or --password-env VAR"
        )
    else:
        password = click.prompt("password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.ClickException("the password must not be empty")
    return password


def _require_analyst(ledger: Ledger, name: str) -> None:
    """Before asking for a password or a confirmation, so that a typo fails at once."""
    if name not in {analyst.name for analyst in ledger.list_analysts()}:
        raise UnknownAnalystError(
            f'analyst "{name}" does not exist', hint="`veil analyst list` shows the analysts"
        )


@analyst.command("add")
@click.argument("name")
@config_option
@password_stdin_option
@password_env_option
@friendly_errors
def analyst_add(name: str, config_path: Path, password_stdin: bool, password_env: str | None) -> None:
    """Add an analyst.

    Creates analyst NAME; only a SCRAM-SHA-256 verifier of the password is stored. The first analyst creates the ledger (an SQLite file, or the tables of a PostgreSQL ledger).

    \b
    Example:
      veil analyst add bob                                  # asks for the password twice
      echo "$PASSWORD" | veil analyst add bob --password-stdin
      veil analyst add bob --password-env BOB_PASSWORD
    """
    from budget.ledger import check_name
    from proxy.wire.scram import make_scram_verifier

    check_name(name, "analyst")
    ledger = _ledger(load_config(config_path), create=True)
    password = _read_password(password_stdin, password_env)
    ledger.add_analyst(name, make_scram_verifier(password))
    click.echo(f"analyst {name} added; grant budget with: veil budget grant {name} DATASET EPSILON")


@analyst.command("list")
@config_option
@json_option
@friendly_errors
def analyst_list(config_path: Path, as_json: bool) -> None:
    """List the analysts and when they were added.

    Never their password verifiers.

    \b
    Example:
      veil analyst list
      veil analyst list --json
    """
    records = as_records(_ledger(load_config(config_path)).list_analysts())
    emit(records, ["name", "created_at"], as_json=as_json)


@analyst.command("passwd")
@click.argument("name")
@config_option
@password_stdin_option
@password_env_option
@friendly_errors
def analyst_passwd(name: str, config_path: Path, password_stdin: bool, password_env: str | None) -> None:
    """Set a new password for an analyst.

    New connections of NAME need the new password; connections already open stay open.

    \b
    Example:
      veil analyst passwd bob                               # asks for the password twice
      veil analyst passwd bob --password-env BOB_PASSWORD
    """
    from proxy.wire.scram import make_scram_verifier

    ledger = _ledger(load_config(config_path))
    _require_analyst(ledger, name)
    ledger.set_verifier(name, make_scram_verifier(_read_password(password_stdin, password_env)))
    click.echo(f"password of analyst {name} changed")


@analyst.command("remove")
@click.argument("name")
@config_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def analyst_remove(name: str, config_path: Path, yes: bool) -> None:
    """Remove an analyst: they can no longer connect.

    Deletes NAME's password verifier. Their grants, spends and audit entries stay on record, so what they spent is never forgotten:
    an analyst added again under the same name finds the same balances (revoke first with
    `veil budget revoke NAME DATASET` if that is not what you want).

    \b
    Example:
      veil analyst remove bob
      veil analyst remove bob --yes      # in scripts
    """
    ledger = _ledger(load_config(config_path))
    _require_analyst(ledger, name)
    if not yes:
        click.confirm(
            f"remove analyst {name}? (their grants and spends stay on record)",
            default=False,
            abort=True,
            err=True,
        )
    ledger.remove_analyst(name)
    click.echo(f"analyst {name} removed; their grants and spends stay on record")


# --- budgets ----------------------------------------------------------------------------------------------


@main.group()
def budget() -> None:
    """Grant, revoke, cap and show privacy budgets.

    A budget is an (ε, δ) grant per analyst and dataset, optionally renewing; a cap bounds what all
    analysts together may spend on a dataset."""


BALANCE_COLUMNS = (
    "analyst",
    "dataset",
    Column("granted_epsilon", "granted ε"),
    Column("spent_epsilon", "spent ε"),
    Column("remaining_epsilon", "remaining ε"),
    Column("granted_delta", "granted δ", optional=True),
    Column("spent_delta", "spent δ", optional=True),
    Column("remaining_delta", "remaining δ", optional=True),
    "accountant",
    Column("renewal", optional=True),
    Column("period_start", "period from", optional=True),
    Column("cap_epsilon", "dataset cap ε", optional=True),
    Column("cap_remaining_epsilon", "left under cap", optional=True),
    Column("reserved_epsilon", "in flight ε", optional=True),
)


def _balance_record(balance: Balance, cap: DatasetCap | None, reserved: float = 0.0) -> dict[str, Any]:
    """What ``veil budget show --json`` prints per analyst and dataset (the names of ``veil.budget``,
    which analysts query), with ``reserved_epsilon``: the part of the spent ε still in flight (or
    left in flight by a crash: ``veil budget reservations``)."""
    record = dataclasses.asdict(balance)
    summary = {} if cap is None else _cap_record(cap)
    record["cap_epsilon"] = summary.get("cap_epsilon")
    record["cap_delta"] = summary.get("cap_delta")
    record["cap_remaining_epsilon"] = summary.get("remaining_epsilon")
    record["reserved_epsilon"] = reserved or None
    return record


def _renewal(ledger: Ledger, analyst_name: str, dataset: str, renew: str | None) -> str | None:
    """--renew, or, without it, the pair's current renewal (a top-up does not stop a monthly grant)."""
    if renew == NEVER:
        return None
    if renew is not None:
        return renew
    return ledger.balance(analyst_name, dataset).renewal


@budget.command("grant", context_settings=NUMBERS_MAY_BE_NEGATIVE)
@click.argument("analyst_name", metavar="ANALYST")
@click.argument("dataset")
@click.argument("epsilon", type=float)
@click.option(
    "--delta",
    type=float,
    default=0.0,
    show_default=True,
    help="Also grant this δ (for Gaussian noise and τ-thresholded GROUP BY keys).",
)
@click.option(
    "--renew",
    type=click.Choice([*RENEWALS, NEVER]),
    default=None,
    help="Grant the amount afresh every day, week or month (UTC calendar periods); "
    "never: stop renewing. Default: keep the grant's current renewal.",
)
@config_option
@json_option
@friendly_errors
def budget_grant(
    analyst_name: str,
    dataset: str,
    epsilon: float,
    delta: float,
    renew: str | None,
    config_path: Path,
    as_json: bool,
) -> None:
    """Add ε (and δ) to an analyst's budget on a dataset.

    Adds EPSILON (and --delta) to what ANALYST may spend on DATASET; grants accumulate. With --renew the grant is per period: spends count against the period they were made in, and
    each new period starts with the whole amount again. Prints the new balance.

    \b
    Example:
      veil budget grant alice demo 1.0
      veil budget grant alice demo 0.5 --delta 1e-6
      veil budget grant bob clinic 2 --renew month      # 2 ε every calendar month
    """
    from budget.loss import PrivacyLoss
    from proxy.ledger_access import dataset_accountant

    config = load_config(config_path)
    policy = declared_dataset(config, dataset)
    loss = PrivacyLoss(_epsilon(epsilon), _delta(delta))
    ledger = _ledger(config)
    accountant = dataset_accountant(policy)
    renewal = _renewal(ledger, analyst_name, policy.name, renew)
    balance = ledger.grant(analyst_name, policy.name, loss, renewal=renewal, accountant=accountant)
    cap = ledger.cap(policy.name, accountant=accountant)
    emit_one(_balance_record(balance, cap), BALANCE_COLUMNS, as_json=as_json)


@budget.command("revoke", context_settings=NUMBERS_MAY_BE_NEGATIVE)
@click.argument("analyst_name", metavar="ANALYST")
@click.argument("dataset")
@click.option("--epsilon", type=float, default=None, help="Take back this much ε (at most what is left).")
@click.option("--delta", type=float, default=None, help="Take back this much δ (at most what is left).")
@config_option
@json_option
@friendly_errors
def budget_revoke(
    analyst_name: str,
    dataset: str,
    epsilon: float | None,
    delta: float | None,
    config_path: Path,
    as_json: bool,
) -> None:
    """Take back budget that is not yet spent.

    Takes --epsilon and/or --delta back from ANALYST on DATASET, or, with neither, everything not
    yet spent. What was spent stays spent. Prints the new balance.

    \b
    Example:
      veil budget revoke alice demo --epsilon 0.5
      veil budget revoke alice demo                     # all that is left, ε and δ
    """
    from budget.loss import PrivacyLoss
    from proxy.ledger_access import dataset_accountant

    config = load_config(config_path)
    policy = declared_dataset(config, dataset)
    loss = None
    if epsilon is not None or delta is not None:
        loss = PrivacyLoss(
            0.0 if epsilon is None else _epsilon(epsilon), 0.0 if delta is None else _delta(delta)
        )
    ledger = _ledger(config)
    accountant = dataset_accountant(policy)
    balance = ledger.revoke(analyst_name, policy.name, loss, accountant=accountant)
    cap = ledger.cap(policy.name, accountant=accountant)
    emit_one(_balance_record(balance, cap), BALANCE_COLUMNS, as_json=as_json)


CAP_COLUMNS = (
    "dataset",
    Column("cap_epsilon", "cap ε"),
    Column("cap_delta", "cap δ", optional=True),
    Column("spent_epsilon", "spent ε (all analysts)"),
    Column("spent_delta", "spent δ", optional=True),
    Column("remaining_epsilon", "remaining ε"),
    Column("remaining_delta", "remaining δ", optional=True),
    "accountant",
)


def _cap_record(cap: DatasetCap) -> dict[str, Any]:
    record = dataclasses.asdict(cap)
    record["remaining_epsilon"] = record["remaining_delta"] = None
    if cap.cap_epsilon is not None:
        record["remaining_epsilon"] = max(0.0, cap.cap_epsilon - cap.spent_epsilon)
        record["remaining_delta"] = max(0.0, (cap.cap_delta or 0.0) - cap.spent_delta)
    order = ["dataset", "cap_epsilon", "cap_delta", "spent_epsilon", "spent_delta"]
    order += ["remaining_epsilon", "remaining_delta", "accountant"]
    return {key: record[key] for key in order}


@budget.command("cap", context_settings=NUMBERS_MAY_BE_NEGATIVE)
@click.argument("dataset", required=False)
@click.option(
    "--epsilon", type=float, default=None, help="Cap the ε all analysts together may spend on DATASET."
)
@click.option("--delta", type=float, default=None, help="Cap δ as well (default 0 with --epsilon).")
@click.option("--remove", is_flag=True, help="Remove DATASET's cap.")
@config_option
@json_option
@friendly_errors
def budget_cap(
    dataset: str | None,
    epsilon: float | None,
    delta: float | None,
    remove: bool,
    config_path: Path,
    as_json: bool,
) -> None:
    """Cap what all analysts together may spend on a dataset.

    A cap bounds the privacy loss of the dataset's people however many analysts there are (and
    whether or not they collude); it never renews. A cap below what was already spent refuses every
    further query. Without --epsilon or --remove, shows DATASET's cap and what was spent, or every
    dataset's without DATASET.

    \b
    Example:
      veil budget cap demo --epsilon 20
      veil budget cap demo --epsilon 20 --delta 1e-5
      veil budget cap demo --remove
      veil budget cap                                   # every dataset
    """
    from budget.loss import PrivacyLoss
    from proxy.ledger_access import accountants, dataset_accountant

    config = load_config(config_path)
    ledger = _ledger(config)
    accountant_of = accountants(config)
    if epsilon is None and delta is None and not remove:
        capped = {cap.dataset for cap in ledger.caps()}
        if dataset is not None and config.dataset(dataset) is None and dataset not in capped:
            declared_dataset(config, dataset)
        names = [dataset.lower()] if dataset is not None else sorted(set(config.datasets) | capped)
        caps = [_cap_record(ledger.cap(name, accountant=accountant_of(name))) for name in names]
        emit(caps, CAP_COLUMNS, as_json=as_json)
        return
    if dataset is None:
        raise click.ClickException("name the DATASET to cap: veil budget cap DATASET --epsilon E")
    if remove and (epsilon is not None or delta is not None):
        raise click.ClickException("give --epsilon (and --delta) or --remove, not both")
    if epsilon is None and not remove:
        raise click.ClickException("a cap needs --epsilon (--delta alone caps nothing)")
    policy = declared_dataset(config, dataset)
    cap_loss = None if epsilon is None else PrivacyLoss(_epsilon(epsilon), _delta(delta or 0.0))
    ledger.set_cap(policy.name, cap_loss)
    cap = ledger.cap(policy.name, accountant=dataset_accountant(policy))
    emit_one(_cap_record(cap), CAP_COLUMNS, as_json=as_json)


@budget.command("show")
@click.argument("analyst_name", metavar="[ANALYST]", required=False)
@config_option
@json_option
@friendly_errors
def budget_show(analyst_name: str | None, config_path: Path, as_json: bool) -> None:
    """Show granted, spent and remaining ε and δ.

    One row per analyst and dataset with a grant (ANALYST's only, if given). Spent counts committed and reserved spends, composed by the dataset's accountant; with a
    renewing grant, those of the current period. The JSON has, per analyst and dataset:
    granted_epsilon, spent_epsilon, remaining_epsilon, the same for delta, accountant, renewal,
    period_start, releases, the dataset's cap_epsilon, cap_delta and cap_remaining_epsilon (what
    all analysts together may still spend; null without a cap), reserved_epsilon: the part of
    spent_epsilon still in flight — after a crash, left in flight (see veil budget reservations) —
    and partitions: per value of a partition column the analyst's statements were charged to
    (parallel composition), what statements pinned to it spent and may still spend (value null: any
    other value). The text output lists those in a second table.

    \b
    Example:
      veil budget show
      veil budget show alice --json
    """
    from proxy.ledger_access import accountants

    config = load_config(config_path)
    ledger = _ledger(config)
    accountant_of = accountants(config)
    balances = ledger.balances(analyst_name, accountant=accountant_of)
    caps = {name: ledger.cap(name, accountant=accountant_of(name)) for name in {b.dataset for b in balances}}
    in_flight: dict[tuple[str, str], float] = {}
    for spend in ledger.reservations():
        key = (spend.analyst, spend.dataset)
        in_flight[key] = math.fsum((in_flight.get(key, 0.0), spend.epsilon))
    records = [
        _balance_record(
            balance, caps[balance.dataset], in_flight.get((balance.analyst, balance.dataset), 0.0)
        )
        for balance in balances
    ]
    partitions = {
        (b.analyst, b.dataset): as_records(
            ledger.partition_balances(b.analyst, b.dataset, accountant=accountant_of(b.dataset))
        )
        for b in balances
    }
    for record in records:
        record["partitions"] = partitions[(record["analyst"], record["dataset"])]
    if as_json:
        echo_json(records)
        return
    print_table(records, BALANCE_COLUMNS)
    rows = [_partition_row(row) for record in records for row in record["partitions"]]
    if rows:
        click.echo("\nstatements pinned to a partition (parallel composition):")
        print_table(rows, PARTITION_COLUMNS)


PARTITION_COLUMNS = (
    "analyst",
    "dataset",
    Column("partition", width=60),
    Column("spent_epsilon", "spent ε"),
    Column("remaining_epsilon", "remaining ε"),
    Column("spent_delta", "spent δ", optional=True),
    Column("remaining_delta", "remaining δ", optional=True),
    "releases",
)


def _partition_row(record: dict[str, Any]) -> dict[str, Any]:
    """One partition value for the text table: ``patients.region = 'north'``, or ``= (any other)``."""
    from budget.partitions import Partition

    value = record["value"]
    shown = "(any other value)" if value is None else Partition(record["column"], (value,)).describe()
    return {**record, "partition": shown if value is not None else f"{record['column']} {shown}"}


HISTORY_COLUMNS = (
    "id",
    "dataset",
    Column("epsilon", "ε"),
    Column("delta", "δ", optional=True),
    "state",
    "created_at",
    Column("partition", optional=True, width=40),
    Column("statement", width=80),
)


@budget.command("history")
@click.argument("analyst_name", metavar="ANALYST")
@click.option("--dataset", default=None, help="Only this dataset.")
@config_option
@json_option
@friendly_errors
def budget_history(analyst_name: str, dataset: str | None, config_path: Path, as_json: bool) -> None:
    """List every spend of an analyst.

    Every spend of ANALYST, oldest first: ε, δ, state (reserved, committed, cancelled), time, the
    partition a statement was charged to (parallel composition; in the JSON, its column and values,
    null for an ordinary statement) and the SQL. Only committed and reserved spends count; `veil
    audit` also shows free and refused statements.

    \b
    Example:
      veil budget history alice
      veil budget history alice --dataset demo --json
    """
    spends = _ledger(load_config(config_path)).history(analyst_name, dataset.lower() if dataset else None)
    if as_json:
        echo_json(as_records(spends))
        return
    records = as_records(spends)
    for record, spend in zip(records, spends, strict=True):
        record["partition"] = spend.partition.describe() if spend.partition is not None else None
    print_table(records, HISTORY_COLUMNS)


RESERVATION_COLUMNS = (
    "id",
    "analyst",
    "dataset",
    Column("epsilon", "ε"),
    Column("delta", "δ", optional=True),
    "created_at",
    Column("statement", width=80),
)


@budget.command("reservations")
@click.option("--dataset", default=None, help="Only this dataset.")
@config_option
@json_option
@friendly_errors
def budget_reservations(dataset: str | None, config_path: Path, as_json: bool) -> None:
    """List spends still reserved.

    While veil serve runs, these are the statements running now. After a crash they are the
    statements that were in flight: they count as spent (an answer may have left before the crash)
    until you decide with `veil budget resolve`.

    \b
    Example:
      veil budget reservations --dataset demo
      veil budget resolve 42 --keep
    """
    spends = _ledger(load_config(config_path)).reservations(dataset.lower() if dataset else None)
    emit(as_records(spends), RESERVATION_COLUMNS, as_json=as_json)


@budget.command("resolve")
@click.argument("reservation_id", metavar="ID", type=int)
@click.option(
    "--release", "decision", flag_value="release", help="Give the budget back: nothing was delivered."
)
@click.option("--keep", "decision", flag_value="keep", help="Keep it spent: an answer may have left.")
@config_option
@json_option
@friendly_errors
def budget_resolve(reservation_id: int, decision: str | None, config_path: Path, as_json: bool) -> None:
    """Decide about a reservation a crash left behind.

    Only for a veil serve that is no longer running it: a statement still running would lose its
    answer. --release cancels it (its ε is spent no more), --keep commits it; either is recorded in
    the audit log, under the analyst, with the outcome "released after a crash" or "kept after a
    crash". Without a decision nothing changes: the default stays fail-closed.

    \b
    Example:
      veil budget resolve 42 --release
    """
    from budget.audit import AuditEntry, Decision

    if decision is None:
        raise click.UsageError("say --release or --keep")
    config = load_config(config_path)
    ledger = _ledger(config)
    spend = ledger.resolve(reservation_id, release=decision == "release")
    outcome = "released after a crash" if decision == "release" else "kept after a crash"
    ledger.audit_log.append(
        AuditEntry(
            at=ledger.now(),
            analyst=spend.analyst,
            client="veil budget resolve",
            dataset=spend.dataset,
            statement=spend.statement,
            decision=Decision.FAILED,
            epsilon=0.0 if decision == "release" else spend.epsilon,
            delta=0.0 if decision == "release" else spend.delta,
            outcome=outcome,
        )
    )
    emit_one(
        {**as_records([spend])[0], "outcome": outcome},
        (*RESERVATION_COLUMNS, "state", "outcome"),
        as_json=as_json,
    )


# --- policy -----------------------------------------------------------------------------------------------


@main.group()
def policy() -> None:
    """Validate and show the policy file."""


@policy.command("validate")
@config_option
@json_option
@friendly_errors
def policy_validate(config_path: Path, as_json: bool) -> None:
    """Check that everything the policy file names is there.

    Validates the policy file, then opens every dataset and the ledger as `veil serve` would: checks that each DuckDB file exists, each PostgreSQL server answers (5 s timeout) and has the
    dataset's schema, that every declared table and column is there, and that the ledger opens and
    its running totals agree with its spends. One line per dataset and one for the ledger; exit
    status 1 if anything is wrong.

    \b
    Example:
      veil policy validate --config veil.toml
    """
    config = load_config(config_path)
    from proxy.cli.policy_report import check_policy

    checks = check_policy(config, os.environ)
    if as_json:
        echo_json(as_records(checks))
    else:
        records = [{**dataclasses.asdict(c), "status": "ok" if c.ok else "PROBLEM"} for c in checks]
        print_table(records, [Column("subject", "check"), "status", "detail"])
    problems = [check for check in checks if not check.ok]
    if problems:
        first = problems[0]
        hint = f"\nhint: {first.subject}: {first.hint}" if first.hint else ""
        raise click.ClickException(f"{config.path}: {len(problems)} of {len(checks)} checks failed{hint}")


@policy.command("show")
@config_option
@json_option
@friendly_errors
def policy_show(config_path: Path, as_json: bool) -> None:
    """Print the policy in effect.

    With every default filled in: server, ledger, and per dataset its engine, ε per query, accountant, answer cache, tables, privacy units, contribution bounds, clamping
    bounds and public domains. Never a secret: connection strings are shown without passwords, and
    dsn_env by the variable's name only.

    \b
    Example:
      veil policy show
      veil policy show --json | jq '.datasets.demo.tables'
    """
    from proxy.ledger_access import describe_ledger

    config = load_config(config_path)
    if as_json:
        from proxy.cli.policy_report import effective_policy

        echo_json(effective_policy(config))
        return
    server = config.server
    click.echo(f"policy  {config.path}")
    click.echo(f"ledger  {describe_ledger(config.ledger)}")
    click.echo(f"server  {server.host}:{server.port}, at most {server.max_connections} connections")
    for dataset in config.datasets.values():
        _print_dataset(dataset)


SHOWN_VALUES = 6  # of a public column's values, in the table (--json has them all)
TABLE_COLUMNS = (
    "table",
    "kind",
    Column("privacy_unit", "privacy unit"),
    Column("max_contributions", "rows per person (L)"),
)
COLUMN_COLUMNS = (
    "table",
    "column",
    "type",
    "role",
    Column("bounds", optional=True),
    Column("values", "public values", optional=True),
)


def _print_dataset(dataset: DatasetPolicy) -> None:
    from proxy.config import POSTGRES, SPARK
    from proxy.ledger_access import mask_dsn

    if dataset.backend == POSTGRES:
        source = (
            f"the connection string in ${dataset.dsn_env}" if dataset.dsn is None else mask_dsn(dataset.dsn)
        )
        where = f"postgres {source}, schema {dataset.schema}"
    elif dataset.backend == SPARK:
        sources = ", ".join(f"{name} = {source.location}" for name, source in dataset.sources.items())
        where = f"spark {dataset.spark_remote or dataset.spark_master}" + (f" ({sources})" if sources else "")
    else:
        where = f"duckdb {dataset.path}"
    click.echo(f"\ndataset {dataset.name}: {where}")
    click.echo(
        f"  ε per query {dataset.default_epsilon:g} (at most {dataset.max_epsilon:g}); "
        f"accountant {dataset.accountant}; answer cache {'on' if dataset.answer_cache else 'off'}\n"
    )
    if not dataset.tables:
        click.echo("(no tables)")
        return
    print_table([_table_row(table) for table in dataset.tables.values()], TABLE_COLUMNS)
    click.echo()
    rows = [
        _column_row(table, column) for table in dataset.tables.values() for column in table.columns.values()
    ]
    print_table(rows, COLUMN_COLUMNS)


def _table_row(table: TablePolicy) -> dict[str, Any]:
    if table.public:
        return {"table": table.name, "kind": "public lookup"}
    rows = f"auto (≤ {table.max_contributions})" if table.auto_contributions else str(table.max_contributions)
    unit = table.privacy_unit or "row"
    return {"table": table.name, "kind": "private", "privacy_unit": unit, "max_contributions": rows}


def _column_row(table: TablePolicy, column: ColumnPolicy) -> dict[str, Any]:
    if table.public:
        role = "key" if column.name == table.key else "public"
    elif column.name == table.privacy_unit:
        role = "privacy unit"
    else:
        role = "public" if column.public else "private"
    values = None
    if column.values is not None:
        values = ", ".join(str(value) for value in column.values[:SHOWN_VALUES])
        if len(column.values) > SHOWN_VALUES:
            values += f", … ({len(column.values)} values)"
    bounds = f"{_bound(column.lower)} … {_bound(column.upper)}" if column.has_bounds else None
    return {
        "table": table.name,
        "column": column.name,
        "type": column.type.value,
        "role": role,
        "bounds": bounds,
        "values": values,
    }


def _bound(value: object) -> str:
    """A number as %g; a date column's bound as the date."""
    return format(value, "g") if isinstance(value, int | float) else str(value)


# --- audit ------------------------------------------------------------------------------------------------

AUDIT_COLUMNS = (
    "id",
    "at",
    "analyst",
    "client",
    "dataset",
    "decision",
    Column("outcome", optional=True),
    Column("epsilon", "ε"),
    Column("delta", "δ", optional=True),
    Column("accountant", optional=True),
    Column("mechanisms", optional=True),
    Column("sqlstate", optional=True),
    Column("statement", width=60),
    Column("error", optional=True, width=60),
)
AUDIT_FIELDS = [
    "id", "at", "analyst", "client", "dataset", "decision", "outcome", "epsilon", "delta",
    "accountant", "mechanisms", "sqlstate", "statement", "error",
]  # fmt: skip


def _csv_value(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime.datetime) else value


def _since(text: str | None) -> datetime.datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise click.ClickException(
            f"--since: {text!r} is not an ISO 8601 date or date-time (e.g. 2025-05-01 or 2025-05-01T12:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC)


@main.command()
@click.option("--analyst", "analyst_name", default=None, help="Only this analyst's statements.")
@click.option(
    "--since",
    default=None,
    metavar="WHEN",
    help="Only statements at or after WHEN: an ISO 8601 date or date-time (UTC unless it has an offset).",
)
@click.option("--limit", type=int, default=None, help="Only the N most recent of those statements.")
@config_option
@json_option
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV, with a header row, instead of a table.")
@friendly_errors
def audit(
    analyst_name: str | None,
    since: str | None,
    limit: int | None,
    config_path: Path,
    as_json: bool,
    as_csv: bool,
) -> None:
    """Export the audit log of every statement analysts sent.

    Oldest first, with each statement's time, client address, normalized SQL, decision (answered, cached, refused, failed), what ended a
    failed one (outcome: engine error, timed out, deadline missed, cancelled, disconnected — each charged once the engine had started), the ε
    and δ charged, the accountant and mechanisms, and the error of a refused or failed statement.

    \b
    Example:
      veil audit --since 2025-05-01
      veil audit --analyst alice --limit 20
      veil audit --since 2025-05-01T00:00+02:00 --csv > audit.csv
    """
    if as_json and as_csv:
        raise click.ClickException("give --json or --csv, not both")
    if limit is not None and limit < 1:
        raise click.ClickException(f"--limit must be at least 1, got {limit}")
    moment = _since(since)
    log = _ledger(load_config(config_path)).audit_log
    entries = log.entries(analyst=analyst_name, since=moment)
    if limit is not None:
        entries = entries[-limit:]
    records = [{field: getattr(entry, field) for field in AUDIT_FIELDS} for entry in entries]
    if as_csv:
        import csv
        import io

        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=AUDIT_FIELDS, lineterminator="\n")
        writer.writeheader()
        for record in records:
            writer.writerow({k: _csv_value(v) for k, v in record.items()})
        click.echo(buffer.getvalue(), nl=False)
        return
    emit(records, AUDIT_COLUMNS, as_json=as_json)


@main.command(short_help="Show how a query would be answered, without spending.")
@click.argument("sql")
@config_option
@click.option("--dataset", required=True, help="Dataset the query would run against.")
@click.option(
    "--epsilon", type=float, default=None, help="ε per query (default: the dataset's default_epsilon)."
)
@click.option(
    "--delta", type=float, default=0.0, show_default=True, help="δ for GROUP BY keys taken from the data."
)
@click.option(
    "--mechanism",
    type=click.Choice(["laplace", "gaussian"]),
    default="laplace",
    show_default=True,
    help="Noise for counts and sums (gaussian needs --delta), as SET veil.mechanism.",
)
@click.option("--other-row", is_flag=True, help='Price the "(other)" row too, as SET veil.other_row = on.')
@json_option
@friendly_errors
def explain(
    sql: str,
    config_path: Path,
    dataset: str,
    epsilon: float | None,
    delta: float,
    mechanism: str,
    other_row: bool,
    as_json: bool,
) -> None:
    """Show how Veil would answer SQL — engine query, mechanisms, price, error bounds — without spending.

    \b
    Example:
      veil explain "SELECT region, COUNT(*) FROM visits GROUP BY region" --dataset demo
    """
    from proxy.backends import open_backend
    from proxy.query.explain import explain_query

    policy = declared_dataset(load_config(config_path), dataset)
    backend = open_backend(policy, environ=os.environ)
    try:
        explanation = explain_query(
            policy,
            sql,
            backend=backend,
            epsilon=epsilon,
            delta=delta,
            gaussian=mechanism == "gaussian",
            other_row=other_row,
        )
    finally:
        backend.close()
    if as_json:
        import json

        click.echo(json.dumps(dataclasses.asdict(explanation), indent=2))
        return
    if explanation.engine_sql is not None:
        click.echo(f"engine query:\n  {explanation.engine_sql}\n")
    for column, sql in explanation.histogram_sql.items():
        click.echo(f"histogram of {column} (for quantiles):\n  {sql}\n")
    rows = "data-derived keys" if explanation.cells is None else f"{explanation.cells} released row(s)"
    delta = f", δ = {explanation.delta:g}" if explanation.delta else ""
    click.echo(f"charge: ε = {explanation.epsilon:g}{delta} over {rows}")
    if explanation.partition is not None:
        click.echo(
            f"charged to the partition {explanation.partition} only (parallel composition): statements"
            " pinned to other values do not add to it"
        )
    if explanation.threshold is not None:
        click.echo(
            f"keys released only if their noisy number of people exceeds τ = {explanation.threshold:.4g}"
        )
    print_table([_measurement_row(m) for m in explanation.measurements], list(MEASUREMENT_COLUMNS))
    for note in explanation.notes:
        click.echo(f"note: {note}")


def _measurement_row(measurement: object) -> dict[str, object]:
    """A measurement for the table: what depends on the data says so rather than printing nothing."""
    row = dataclasses.asdict(measurement)  # type: ignore[call-overload]
    return {key: "data-dependent" if value is None else value for key, value in row.items()}


MEASUREMENT_COLUMNS = ("quantity", "mechanism", "sensitivity", "epsilon", "noise_scale", "error_bound_95")
