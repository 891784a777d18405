"""What every ``veil`` command shares: one-line errors at the CLI's edge, and tables or JSON on stdout.

Commands that print data print an aligned table, or JSON with ``--json``; the key names of the JSON are
the column names of the tables.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from budget.errors import BudgetError

if TYPE_CHECKING:  # loaded with the policy, by the command that reads it: not for ``veil --help``
    from proxy.config import DatasetPolicy, VeilConfig

P = ParamSpec("P")
R = TypeVar("R")


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


def declared_dataset(config: VeilConfig, dataset: str) -> DatasetPolicy:
    """The policy of ``dataset``, or an error that lists the datasets there are."""
    from proxy.errors import ConfigError

    policy = config.dataset(dataset)
    if policy is None:
        raise ConfigError(
            f'dataset "{dataset}" is not declared in {config.path}',
            hint=f"datasets: {', '.join(config.datasets) or '(none)'}",
        )
    return policy


def friendly_errors(function: Callable[P, R]) -> Callable[P, R]:
    """Turn Veil's domain errors into one line on stderr (plus a detail and a hint) and exit status 1."""

    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from anonymizers.errors import AnonymizationError
        from proxy.errors import ProxyError

        try:
            return function(*args, **kwargs)
        except (ProxyError, BudgetError, AnonymizationError) as error:
            detail = f"\ndetail: {one_line(error.detail)}" if getattr(error, "detail", None) else ""
            hint = f"\nhint: {one_line(error.hint)}" if error.hint else ""
            raise click.ClickException(f"{one_line(error.message)}{detail}{hint}") from None

    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    return wrapper


def one_line(text: str) -> str:
    """Messages from below (a PostgreSQL driver's, say) may span lines; the CLI prints one."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


# --- output -----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Column:
    """A column of a human table: the record's ``key``, its ``header`` (default: the key), hidden when
    ``optional`` and empty in every row, text cut to ``width`` characters."""

    key: str
    header: str = ""
    optional: bool = False
    width: int | None = None


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column | str]) -> None:
    """An aligned plain-text table like psql's: numbers right-aligned, empty values blank."""
    chosen = [c if isinstance(c, Column) else Column(c) for c in columns]
    chosen = [c for c in chosen if not c.optional or any(_present(row.get(c.key)) for row in rows)]
    headers = [c.header or c.key for c in chosen]
    cells = [[_cell(row.get(c.key), c.width) for c in chosen] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    numeric = [
        all(_is_number(row.get(c.key)) or row.get(c.key) is None for row in rows) and bool(rows)
        for c in chosen
    ]
    click.echo("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        aligned = (v.rjust(w) if n else v.ljust(w) for v, w, n in zip(row, widths, numeric, strict=True))
        click.echo("  ".join(aligned).rstrip())
    if not rows:
        click.echo("(no rows)")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _present(value: object) -> bool:
    return value not in (None, "", 0, False)


def _cell(value: object, width: int | None = None) -> str:
    if value is None:
        text = ""
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, datetime.datetime):
        text = value.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
    elif isinstance(value, enum.Enum):
        text = str(value.value)
    else:
        text = str(value)
    text = " ".join(text.split())  # one line per row, whatever the SQL looked like
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return text


def json_value(value: object) -> object:
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot print {type(value).__name__} as JSON")


def echo_json(data: object) -> None:
    import json  # here: ``veil --help`` prints no JSON

    click.echo(json.dumps(data, indent=2, default=json_value, ensure_ascii=False))


def as_records(items: Iterable[Any]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(item) for item in items]


def emit(records: list[dict[str, Any]], columns: Sequence[Column | str], *, as_json: bool) -> None:
    if as_json:
        echo_json(records)
    else:
        print_table(records, columns)


def emit_one(record: dict[str, Any], columns: Sequence[Column | str], *, as_json: bool) -> None:
    if as_json:
        echo_json(record)
    else:
        print_table([record], columns)
