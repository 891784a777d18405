"""mechanisms/ sits low in the import graph: it may use the standard library and budget.loss only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import mechanisms

PACKAGE_DIR = Path(mechanisms.__file__).parent
ALLOWED = {"budget.loss"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def is_allowed(module: str) -> bool:
    top = module.split(".")[0]
    return top in sys.stdlib_module_names or module in ALLOWED or top == "mechanisms"


def test_mechanisms_import_only_the_standard_library_and_budget_loss() -> None:
    offending = {
        f"{path.name}: {module}"
        for path in PACKAGE_DIR.rglob("*.py")
        for module in imported_modules(path)
        if not is_allowed(module)
    }
    assert not offending
