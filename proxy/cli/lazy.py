"""A click group whose heavy subcommands are imported only when they run.

``veil --help`` and ``veil budget show`` need neither pandas nor DuckDB nor sqlglot; ``veil materialize`` needs
all three. Each lazy subcommand is named by ``module:attribute`` with its one-line help written here, so that
listing the commands imports none of them (tests/unit/test_docs.py checks the line matches the command's own).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

import click


class LazyGroup(click.Group):
    def __init__(
        self, *args: object, lazy: Mapping[str, tuple[str, str]] | None = None, **kwargs: object
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = dict(lazy or {})  # name → ("module:attribute", short help)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            module, _, attribute = self.lazy[name][0].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list without importing the lazy commands: their help lines are the ones given."""
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy and name not in self.commands:
                rows.append((name, self.lazy[name][1]))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
