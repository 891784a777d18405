"""The policy section ``veil import`` writes, and the edit of the policy file that keeps everything else.

The section comes from the administrator's options and the file's column names and types, never from
its values (see proxy/cli/importer.py). It is added to the policy file with tomlkit, which keeps the
administrator's comments, key order and layout byte for byte; the result must then parse to exactly the
old policy plus the new table (checked with the standard parser), be a valid policy, and replace the
file atomically (proxy/config.py: ``write_policy_text``).
"""

from __future__ import annotations

import datetime
import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from proxy.cli.import_types import FileColumn
from proxy.config import (
    ROW_PRIVACY_UNIT,
    ColumnType,
    VeilConfig,
    parse_config,
    read_policy_text,
    write_policy_text,
)
from proxy.errors import ConfigError

Bound = float | datetime.date  # a --bounds end: a number, or a date for a date or timestamp column
_BOOLEAN_WORDS = {"true": True, "false": False}
_INLINE_WIDTH = 100  # a column entry longer than this gets its own section, its values wrapped
_VALUES_PER_LINE_WIDTH = 96

Lookup = Callable[[str, str], FileColumn]


def table_entry(
    columns: Sequence[FileColumn],
    *,
    source_name: str,
    privacy_unit: str | None,
    max_contributions: int | None,
    public: Mapping[str, Sequence[str]],
    bounds: Mapping[str, tuple[Bound, Bound]],
    public_table: bool,
    key: str | None,
) -> dict[str, Any]:
    """The policy's entry for the table; every option is checked against the file's columns first."""
    by_name = {column.name: column for column in columns}

    def lookup(name: str, option: str) -> FileColumn:
        column = by_name.get(name.lower())
        if column is None:
            raise ConfigError(
                f'{option}: column "{name}" is not in {source_name}',
                detail=f"its columns are: {', '.join(by_name)}",
            )
        return column

    if public_table:
        entry: dict[str, Any] = {"public": True}
        if key is not None:
            entry["key"] = lookup(key, "--key").name
    else:
        assert privacy_unit is not None  # checked with the other options (importer.option_conflict)
        entry = _privacy_unit_entry(privacy_unit, max_contributions, lookup)
    declared: dict[str, dict[str, Any]] = {column.name: {"type": column.type.value} for column in columns}
    for name, values in public.items():
        column = lookup(name, "--public")
        if column.name == entry.get("privacy_unit"):
            raise ConfigError(f'--public: the privacy unit column "{column.name}" cannot be public')
        declared[column.name].update(public=True, values=_public_values(column, values))
    for name, (lower, upper) in bounds.items():
        column = lookup(name, "--bounds")
        declared[column.name].update(_bounds(column, lower, upper))
    entry["columns"] = declared
    return entry


def section_text(dataset: str, table: str, entry: Mapping[str, Any]) -> str:
    """The TOML section of the table: its settings, then one inline line per column (a long one gets
    its own section)."""
    prefix = f"datasets.{dataset}.tables.{table}"
    lines = [f"[{prefix}]"]
    lines += [f"{name} = {_toml(value)}" for name, value in entry.items() if name != "columns"]
    inline = {
        name: f"{name} = {{ {', '.join(f'{k} = {_toml(v)}' for k, v in column.items())} }}"
        for name, column in entry["columns"].items()
    }
    if all(len(text) <= _INLINE_WIDTH for text in inline.values()):
        return "\n".join([*lines, "", f"[{prefix}.columns]", *inline.values()]) + "\n"
    # a long one gets its own section — and then every column does, so that the file keeps the table's
    # column order (TOML puts a table's plain keys before its sub-tables)
    long_ones: list[str] = []
    for name, column in entry["columns"].items():
        long_ones += ["", f"[{prefix}.columns.{name}]"]
        long_ones += [f"{k} = {_wrapped(v) if k == 'values' else _toml(v)}" for k, v in column.items()]
    return "\n".join([*lines, *long_ones]) + "\n"


def entry_json(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry with dates as ISO 8601 text, for ``--json``."""

    def plain(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value.isoformat() if isinstance(value, datetime.date) else value

    return plain(entry)  # type: ignore[no-any-return]


def check_with_table(
    config_path: Path, *, dataset: str, table: str, entry: Mapping[str, Any], source: str | None = None
) -> VeilConfig:
    """The policy as it would be with the table added — validated, nothing written (``--dry-run``)."""
    text = with_table(
        config_path, read_policy_text(config_path), dataset=dataset, table=table, entry=entry, source=source
    )
    return parse_config(text, path=config_path)


def add_table(
    config_path: Path, *, dataset: str, table: str, entry: Mapping[str, Any], source: str | None = None
) -> tuple[VeilConfig, str]:
    """Add the table to the policy file, keeping the rest of it as it is; returns the new policy and
    the file's previous text (to put back if what follows fails). ``source``: a Spark dataset's path
    of the table's files, written to its ``sources``."""
    previous = read_policy_text(config_path)  # read now, not when the import began: keep edits made since
    text = with_table(config_path, previous, dataset=dataset, table=table, entry=entry, source=source)
    return write_policy_text(config_path, text), previous


def with_table(
    path: Path,
    original: str,
    *,
    dataset: str,
    table: str,
    entry: Mapping[str, Any],
    source: str | None = None,
) -> str:
    """``original`` with the table's section added after the dataset's other tables (and, given a
    ``source``, the table's entry in the dataset's ``sources``)."""
    document = tomlkit.parse(original)
    datasets = document["datasets"]
    assert isinstance(datasets, Mapping)
    name = next(key for key in datasets if key.lower() == dataset)
    section = section_text(name, table, entry)
    # the blank line after the section separates it from whatever follows it in the file
    added = tomlkit.parse(section + "\n")["datasets"][name]["tables"][table]  # type: ignore[index]
    container = datasets[name]
    try:
        if "tables" not in container:
            container["tables"] = tomlkit.table(is_super_table=True)
        container["tables"][table] = added
        if source is not None:
            if "sources" not in container:
                container["sources"] = tomlkit.table()
            container["sources"][table] = source
    except (ValueError, TypeError, tomlkit.exceptions.TOMLKitError) as error:
        raise _cannot_edit(path, name, table, str(error)) from None
    text = tomlkit.dumps(document)
    if text.endswith("\n\n") and not original.endswith("\n\n"):
        text = text.rstrip("\n") + "\n"  # the section came last: no blank line after it
    expected = tomllib.loads(original)
    expected["datasets"][name].setdefault("tables", {})[table] = tomllib.loads(section)["datasets"][name][
        "tables"
    ][table]
    if source is not None:
        expected["datasets"][name].setdefault("sources", {})[table] = source
    if tomllib.loads(text) != expected:
        raise _cannot_edit(path, name, table, "the edit would have changed other settings")
    return text


def _cannot_edit(path: Path, dataset: str, table: str, why: str) -> ConfigError:
    return ConfigError(
        f'{path}: cannot add table "{table}" to dataset "{dataset}" while keeping the file as it is',
        detail=why,
        hint=f"write the dataset as a [datasets.{dataset}] section, or add the section that "
        "`veil import --dry-run` prints by hand",
    )


def _toml(value: Any) -> str:
    return tomlkit.item(value).as_string()


def _wrapped(values: Sequence[Any]) -> str:
    """A long list of values, a few per line."""
    lines, line = [], ""
    for text in (_toml(value) for value in values):
        if line and len(line) + len(text) + 2 > _VALUES_PER_LINE_WIDTH:
            lines.append(line)
            line = ""
        line = f"{line} {text}," if line else f"{text},"
    lines.append(line)
    return "[\n" + "".join(f"    {line}\n" for line in lines) + "]"


def _privacy_unit_entry(privacy_unit: str, max_contributions: int | None, lookup: Lookup) -> dict[str, Any]:
    if privacy_unit.lower() == ROW_PRIVACY_UNIT:
        if max_contributions not in (None, 1):
            raise ConfigError(
                '--max-contributions: must be 1 (or absent) when the privacy unit is "row"',
                detail="with privacy unit row, each row is one person",
            )
        return {"privacy_unit": ROW_PRIVACY_UNIT}
    unit = lookup(privacy_unit, "--privacy-unit")
    if max_contributions is None:
        raise ConfigError(
            f'--max-contributions is required when the privacy unit is the column "{unit.name}"',
            detail="it is the number of rows kept per person at query time; it is not computed from the "
            "data, because that would reveal the largest number of rows any one person has",
            hint="pass --max-contributions N, e.g. a number that covers most people's rows",
        )
    if isinstance(max_contributions, bool) or max_contributions < 1:
        raise ConfigError(f"--max-contributions: must be a positive integer, not {max_contributions!r}")
    return {"privacy_unit": unit.name, "max_contributions": max_contributions}


def _public_values(column: FileColumn, values: Sequence[str]) -> list[Any]:
    converted = [_public_value(column, str(value)) for value in values]
    if not converted:
        raise ConfigError(f'--public: column "{column.name}" needs at least one public value')
    if len(set(converted)) != len(converted):
        raise ConfigError(f'--public: column "{column.name}" lists a value twice')
    return converted


def _public_value(column: FileColumn, text: str) -> str | int | float | bool | datetime.date:
    try:
        if column.type is ColumnType.INTEGER:
            return int(text)
        if column.type is ColumnType.REAL:
            number = float(text)
            if not math.isfinite(number):
                raise ValueError(text)
            return number
        if column.type is ColumnType.BOOLEAN:
            return _BOOLEAN_WORDS[text.lower()]
        if column.type is ColumnType.DATE:
            return datetime.date.fromisoformat(text)
        if column.type is ColumnType.TIMESTAMP:
            moment = datetime.datetime.fromisoformat(text)
            if moment.tzinfo is not None:
                raise ValueError(text)  # the column is a timestamp without time zone
            return moment
    except (ValueError, KeyError):
        raise ConfigError(
            f'--public: value {text!r} is not a valid {column.type.value} for column "{column.name}"',
            hint={
                ColumnType.BOOLEAN: "use true or false",
                ColumnType.DATE: "use YYYY-MM-DD",
                ColumnType.TIMESTAMP: "use YYYY-MM-DDTHH:MM:SS, without a time zone",
            }.get(column.type),
        ) from None
    return text


def _bounds(column: FileColumn, lower: Bound, upper: Bound) -> dict[str, int | float | datetime.date]:
    if column.type is ColumnType.DATE:
        return _date_bounds(column, lower, upper)
    if column.type is ColumnType.TIMESTAMP:  # whole days: from the first's midnight to the last's end
        days = _date_bounds(column, lower, upper)
        first, last = days["lower"], days["upper"]
        assert isinstance(first, datetime.date) and isinstance(last, datetime.date)
        return {
            "lower": datetime.datetime.combine(first, datetime.time()),
            "upper": datetime.datetime.combine(last, datetime.time(23, 59, 59)),
        }
    if not column.type.is_numeric:
        raise ConfigError(
            f'--bounds: column "{column.name}" is {column.type.value}; bounds apply only to integer, real, '
            "date and timestamp columns"
        )
    if not isinstance(lower, float | int) or not isinstance(upper, float | int):
        raise ConfigError(f'--bounds: column "{column.name}" is {column.type.value}; its bounds are numbers')
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise ConfigError(f'--bounds: the bounds of column "{column.name}" must be finite numbers')
    if lower >= upper:
        raise ConfigError(
            f'--bounds: for column "{column.name}", upper must be greater than lower (got {lower:g}:{upper:g})'
        )
    if column.type is ColumnType.INTEGER and float(lower).is_integer() and float(upper).is_integer():
        return {"lower": int(lower), "upper": int(upper)}
    return {"lower": float(lower), "upper": float(upper)}


def _date_bounds(column: FileColumn, lower: Bound, upper: Bound) -> dict[str, int | float | datetime.date]:
    if not isinstance(lower, datetime.date) or not isinstance(upper, datetime.date):
        raise ConfigError(
            f'--bounds: column "{column.name}" is a {column.type.value}; its bounds are dates',
            hint=f"e.g. --bounds {column.name}=2024-01-01:2025-12-31",
        )
    if lower >= upper:
        raise ConfigError(
            f'--bounds: for column "{column.name}", upper must be greater than lower (got {lower}:{upper})'
        )
    return {"lower": lower, "upper": upper}
