"""Docs that are derived from code must match it; anything user-facing must be documented."""

from __future__ import annotations

from pathlib import Path

import click

from proxy.analysis.function_safety import families
from proxy.cli.main import main
from proxy.cli.reference_docs import cli_markdown, errors_markdown, functions_markdown, settings_markdown
from proxy.errors import ProxyError
from proxy.settings import SETTINGS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_errors_reference_is_current() -> None:
    assert (DOCS / "errors.md").read_text(encoding="utf-8") == errors_markdown(), "run `make docs`"


def test_cli_reference_is_current() -> None:
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == cli_markdown(), "run `make docs`"


def test_every_error_class_is_in_the_reference() -> None:
    text = (DOCS / "errors.md").read_text(encoding="utf-8")
    for name, cls in ProxyError.registry.items():
        assert f"`{name}`" in text and f"`{cls.sqlstate}`" in text


def test_settings_reference_is_current() -> None:
    assert (DOCS / "settings.md").read_text(encoding="utf-8") == settings_markdown(), "run `make docs`"


def test_the_function_table_of_sql_md_is_current() -> None:
    """docs/sql.md says, for every function accepted on private values, what each engine does with it."""
    text = (DOCS / "sql.md").read_text(encoding="utf-8")
    assert functions_markdown() in text, "run `make docs`"
    assert all(f"| {safety.family} |" in text for safety in families())


def test_every_setting_has_help() -> None:
    assert all(setting.help for setting in SETTINGS)


def _commands(group: click.Group, prefix: str) -> list[str]:
    names = []
    for name, command in group.commands.items():
        names.append(f"{prefix} {name}")
        if isinstance(command, click.Group):
            names += _commands(command, f"{prefix} {name}")
    return names


def test_every_command_has_help_with_text() -> None:
    for name in _commands(main, "veil"):
        command = main
        for part in name.split()[1:]:
            assert isinstance(command, click.Group)
            command = command.commands[part]  # type: ignore[assignment]
        assert command.help, f"`{name}` has no help text"
        for parameter in command.params:
            if isinstance(parameter, click.Option):
                assert parameter.help, f"`{name} {parameter.opts[0]}` has no help"


def test_readme_quick_start_has_the_two_commands() -> None:
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    assert "make demo" in readme and "make test" in readme
