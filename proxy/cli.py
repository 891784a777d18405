"""The ``veil`` command line: set up, serve and administer a Veil proxy.

Domain errors become one clear line (and a hint) at this edge; nothing below knows about click.
Secrets come only from prompts, stdin or environment variables read here.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click

from budget.errors import BudgetError
from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy import __version__
from proxy.config import VeilConfig, load_config
from proxy.errors import ConfigError, ProxyError
from proxy.wire.scram import make_scram_verifier

P = ParamSpec("P")
R = TypeVar("R")

DEMO_ANALYST = "alice"
DEMO_PASSWORD = "veil-demo"
DEMO_EPSILON = 10.0

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default="veil.toml",
    show_default=True,
    envvar="VEIL_CONFIG",
    help="Policy file (also from the VEIL_CONFIG environment variable).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def friendly_errors(function: Callable[P, R]) -> Callable[P, R]:
    """Turn Veil's domain errors into one line on stderr and exit status 1."""

    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except (ProxyError, BudgetError) as error:
            detail = f"\ndetail: {error.detail}" if getattr(error, "detail", None) else ""
            hint = f"\nhint: {error.hint}" if error.hint else ""
            raise click.ClickException(f"{error.message}{detail}{hint}") from None

    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    return wrapper


def _ledger(config: VeilConfig) -> Ledger:
    return Ledger.open(config.ledger_path)


def _print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """An aligned plain-text table (numbers right-aligned), like psql's."""
    cells = [[_cell(row[c]) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row[c], int | float) for row in rows) for c in columns]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo(
            "  ".join(
                v.rjust(w) if n else v.ljust(w) for v, w, n in zip(row, widths, numeric, strict=True)
            ).rstrip()
        )
    if not rows:
        click.echo("(no rows)")


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _records(items: Iterable[Any]) -> list[dict[str, Any]]:
    return [
        {k: (v.isoformat() if hasattr(v, "isoformat") else str(v) if hasattr(v, "value") else v)
         for k, v in dataclasses.asdict(item).items()}
        for item in items
    ]  # fmt: skip


def _emit(records: list[dict[str, Any]], columns: Sequence[str], *, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(records, indent=2))
    else:
        _print_table(records, columns)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="veil")
def main() -> None:
    """Veil: a PostgreSQL-compatible proxy that answers SQL aggregates with differential privacy.

    \b
    Quick start:
      veil init-demo demo                 # synthetic data, policy, ledger and an analyst
      veil serve --config demo/veil.toml  # then connect with psql
    """


@main.command("init-demo")
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
    from proxy.demo import build_demo

    layout = build_demo(directory, people=people)
    ledger = Ledger.create(layout.ledger_path)
    ledger.add_analyst(DEMO_ANALYST, make_scram_verifier(DEMO_PASSWORD))
    ledger.grant(DEMO_ANALYST, layout.dataset, PrivacyLoss(DEMO_EPSILON))
    click.echo(f"built a synthetic dataset of {people:,} people: {layout.database_path}")
    click.echo(f"wrote {layout.config_path} and {layout.ledger_path}")
    click.echo(
        f"analyst {DEMO_ANALYST!r} (password {DEMO_PASSWORD!r}) has ε = {DEMO_EPSILON:g} on dataset {layout.dataset!r}"
    )
    click.echo(f"next: veil serve --config {layout.config_path}")


@main.command()
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
@friendly_errors
def serve(config_path: Path, host: str | None, port: int | None, log_level: str) -> None:
    """Serve the datasets of a policy file over the PostgreSQL wire protocol.

    \b
    Example:
      veil serve --config demo/veil.toml --port 5433
      psql "postgresql://alice@127.0.0.1:5433/demo"
    """
    from proxy.server import run_server

    logging.basicConfig(
        level=log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    config = load_config(config_path)
    bind_host = host or config.server.host
    bind_port = config.server.port if port is None else port

    def ready(bound: int) -> None:
        click.echo(f"veil {__version__} listening on {bind_host}:{bound}", err=True)
        for name in config.datasets:
            click.echo(f'connect with: psql "postgresql://ANALYST@{bind_host}:{bound}/{name}"', err=True)
        click.echo("press Ctrl+C to stop", err=True)

    try:
        run_server(config, host=bind_host, port=bind_port, on_ready=ready, environ=os.environ)
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
    except OSError as error:
        raise ConfigError(
            f"cannot listen on {bind_host}:{bind_port}: {error.strerror}", hint="choose another --port"
        ) from None


@main.command("import")
@click.argument("source", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@config_option
@click.option("--dataset", required=True, help="Dataset to load into (its DuckDB file or PostgreSQL schema).")
@click.option("--table", required=True, help="Name of the new table.")
@click.option(
    "--privacy-unit",
    required=True,
    help='Column naming the person, or "row" if each row is one person (required: guessing wrong weakens privacy).',
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
    help="Clamping bounds of a numeric column (repeatable).",
)
@friendly_errors
def import_command(
    source: Path,
    config_path: Path,
    dataset: str,
    table: str,
    privacy_unit: str,
    max_contributions: int | None,
    public: tuple[str, ...],
    bounds: tuple[str, ...],
) -> None:
    """Load a CSV or Parquet file into a dataset and declare it in the policy.

    Columns not named with --public stay private. The CSV dialect is detected by DuckDB.
    Stop `veil serve` first: the dataset file is locked while it serves.

    \b
    Example:
      veil import people.csv --dataset demo --table people --privacy-unit person_id \\
          --max-contributions 1 --public sex=female,male --bounds age=0:100
    """
    from proxy.importer import import_table, parse_bounds_option, parse_public_option

    policy = import_table(
        config_path,
        dataset=dataset,
        table=table,
        source=source,
        privacy_unit=privacy_unit,
        public=dict(parse_public_option(item) for item in public),
        bounds=dict(parse_bounds_option(item) for item in bounds),
        max_contributions=max_contributions,
        environ=os.environ,
    )
    public_columns = [c.name for c in policy.columns.values() if c.public]
    click.echo(
        f"imported {source} as {dataset}.{policy.name}: {len(policy.columns)} columns, "
        f"public: {', '.join(public_columns) or '(none)'}; policy updated in {config_path}"
    )


@main.group()
def analyst() -> None:
    """Manage analysts (the people who connect and spend budget)."""


@analyst.command("add")
@click.argument("name")
@config_option
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input (for scripts).")
@friendly_errors
def analyst_add(name: str, config_path: Path, password_stdin: bool) -> None:
    """Create analyst NAME; only a SCRAM-SHA-256 verifier of the password is stored.

    \b
    Example:
      veil analyst add bob
      echo "$PASSWORD" | veil analyst add bob --password-stdin
    """
    ledger = Ledger.create(load_config(config_path).ledger_path)  # the first analyst creates the ledger
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt("password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.ClickException("the password must not be empty")
    ledger.add_analyst(name, make_scram_verifier(password))
    click.echo(f"analyst {name} added; grant budget with: veil budget grant {name} DATASET EPSILON")


@analyst.command("list")
@config_option
@json_option
@friendly_errors
def analyst_list(config_path: Path, as_json: bool) -> None:
    """List analysts."""
    records = _records(_ledger(load_config(config_path)).list_analysts())
    _emit(records, ["name", "created_at"], as_json=as_json)


@main.group()
def budget() -> None:
    """Grant and inspect privacy budgets (epsilon per analyst and dataset)."""


@budget.command("grant")
@click.argument("analyst_name", metavar="ANALYST")
@click.argument("dataset")
@click.argument("epsilon", type=float)
@click.option(
    "--delta",
    type=float,
    default=0.0,
    show_default=True,
    help="Also grant this delta (for τ-thresholded GROUP BY).",
)
@config_option
@json_option
@friendly_errors
def budget_grant(
    analyst_name: str, dataset: str, epsilon: float, delta: float, config_path: Path, as_json: bool
) -> None:
    """Add EPSILON (and --delta) to ANALYST's budget on DATASET (grants accumulate).

    \b
    Example:
      veil budget grant alice demo 1.0
      veil budget grant alice demo 0 --delta 1e-5
    """
    config = load_config(config_path)
    if config.dataset(dataset) is None:
        raise ConfigError(
            f'dataset "{dataset}" is not declared in {config.path}',
            hint=f"datasets: {', '.join(config.datasets)}",
        )
    balance = _ledger(config).grant(analyst_name, dataset, PrivacyLoss(epsilon, delta))
    _emit(_records([balance]), BALANCE_COLUMNS, as_json=as_json)


BALANCE_COLUMNS = ["analyst", "dataset", "granted_epsilon", "spent_epsilon", "remaining_epsilon"]


@budget.command("show")
@click.argument("analyst_name", metavar="[ANALYST]", required=False)
@config_option
@json_option
@friendly_errors
def budget_show(analyst_name: str | None, config_path: Path, as_json: bool) -> None:
    """Show granted, spent and remaining epsilon (and delta) per analyst and dataset."""
    balances = _ledger(load_config(config_path)).balances(analyst_name)
    _emit(_records(balances), BALANCE_COLUMNS, as_json=as_json)


@budget.command("history")
@click.argument("analyst_name", metavar="ANALYST")
@click.option("--dataset", default=None, help="Only this dataset.")
@config_option
@json_option
@friendly_errors
def budget_history(analyst_name: str, dataset: str | None, config_path: Path, as_json: bool) -> None:
    """List every spend of ANALYST: epsilon, state (reserved, committed, cancelled) and the engine SQL."""
    spends = _ledger(load_config(config_path)).history(analyst_name, dataset)
    _emit(_records(spends), ["id", "dataset", "epsilon", "state", "created_at", "statement"], as_json=as_json)


@main.command()
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
    from proxy.explain import explain_query

    config = load_config(config_path)
    policy = config.dataset(dataset)
    if policy is None:
        raise ConfigError(
            f'dataset "{dataset}" is not declared in {config.path}',
            hint=f"datasets: {', '.join(config.datasets)}",
        )
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
        click.echo(json.dumps(dataclasses.asdict(explanation), indent=2))
        return
    if explanation.engine_sql is not None:
        click.echo(f"engine query:\n  {explanation.engine_sql}\n")
    for column, sql in explanation.histogram_sql.items():
        click.echo(f"histogram of {column} (for quantiles):\n  {sql}\n")
    rows = "data-derived keys" if explanation.cells is None else f"{explanation.cells} released row(s)"
    delta = f", δ = {explanation.delta:g}" if explanation.delta else ""
    click.echo(f"charge: ε = {explanation.epsilon:g}{delta} over {rows}")
    if explanation.threshold is not None:
        click.echo(
            f"keys released only if their noisy number of people exceeds τ = {explanation.threshold:.4g}"
        )
    _print_table([dataclasses.asdict(m) for m in explanation.measurements], list(MEASUREMENT_COLUMNS))


MEASUREMENT_COLUMNS = ("quantity", "mechanism", "sensitivity", "epsilon", "noise_scale", "error_bound_95")
