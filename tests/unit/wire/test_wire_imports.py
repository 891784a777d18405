"""proxy.wire stays pure: no I/O modules, no SQL parser, nothing else from proxy (GUIDE §1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import proxy.wire

WIRE_DIR = Path(proxy.wire.__file__).parent
FORBIDDEN_ROOTS = {
    "asyncio",
    "socket",
    "ssl",
    "selectors",
    "sqlglot",
    "duckdb",
    "psycopg",
    "budget",
    "mechanisms",
}


def imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            modules.add(node.module)
    return modules


@pytest.mark.parametrize("path", sorted(WIRE_DIR.glob("*.py")), ids=lambda path: path.name)
def test_wire_module_imports_nothing_outside_its_lane(path: Path) -> None:
    for module in imported_modules(path):
        assert module.split(".")[0] not in FORBIDDEN_ROOTS, module
        if module.startswith("proxy"):
            assert module.startswith("proxy.wire"), module
