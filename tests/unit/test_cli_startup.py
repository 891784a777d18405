"""The command line starts light (issue 19): `veil --help` and `veil budget show` import neither pandas nor
DuckDB nor sqlglot; `veil --help` does not even read a policy's code (proxy.config, TOML, the ledger stores) or
load the modules only some commands print with (JSON, CSV, logging); the lazily loaded commands are listed
with their own help lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from proxy.cli.main import main as veil_main
from tests.conftest import build_demo

HEAVY = ("pandas", "duckdb", "sqlglot", "numpy", "scipy", "psycopg", "phe")
# what a command loads when it runs, never for --help (click itself imports none of them)
POLICY_AND_OUTPUT = (
    "proxy.config",
    "proxy.errors",
    "budget.loss",
    "budget.accountants",
    "budget.store",
    "anonymizers.errors",
    "tomllib",
    "sqlite3",
    "decimal",
    "logging",
    "json",
    "csv",
)
PROBE = """
import contextlib, io, sys
from proxy.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main({arguments!r}, standalone_mode=False)
    except SystemExit:
        pass
print(",".join(m for m in {heavy!r} if m in sys.modules))
"""


def heavy_modules_after(*arguments: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    probe = PROBE.format(arguments=list(arguments), heavy=heavy)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [name for name in result.stdout.strip().split(",") if name]


def test_help_imports_no_heavy_library() -> None:
    assert heavy_modules_after("--help") == []


def test_help_reads_no_policy_code_and_loads_no_output_format() -> None:
    assert heavy_modules_after("--help", heavy=POLICY_AND_OUTPUT) == []


def test_budget_show_imports_no_heavy_library(tmp_path: Path) -> None:
    demo = build_demo(tmp_path / "demo", people=100)
    assert heavy_modules_after("budget", "show", "--config", str(demo.config)) == []


def test_lazy_commands_are_listed_with_their_own_help_lines() -> None:
    group = veil_main
    assert isinstance(group, click.Group)
    context = click.Context(group)
    for name, (_, line) in group.lazy.items():  # type: ignore[attr-defined]
        command = group.get_command(context, name)
        assert command is not None and command.get_short_help_str(limit=200) == line, name
