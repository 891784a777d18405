"""Imports point one way (docs/architecture.md): budget ← mechanisms ← anonymizers ← proxy."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "budget": {"proxy", "mechanisms", "anonymizers"},
    "mechanisms": {"proxy", "anonymizers"},
    "anonymizers": {"proxy"},
    "proxy/wire": {"proxy.analysis", "proxy.rewrite", "proxy.backends", "sqlglot"},
    "proxy/analysis": {"proxy.wire", "proxy.backends"},
    "proxy/rewrite": {"proxy.wire", "proxy.backends"},
    "proxy/catalog": {"proxy.wire", "proxy.server", "proxy.query"},
}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package} has no modules"
    for path in files:
        for module in imported_modules(path):
            for banned in FORBIDDEN[package]:
                assert not (module == banned or module.startswith(banned + ".")), (
                    f"{path.relative_to(ROOT)} imports {module}"
                )


def test_sqlglot_stays_in_sql_modules() -> None:
    allowed = {"analysis", "rewrite", "backends", "catalog"}
    for path in sorted((ROOT / "proxy").rglob("*.py")):
        if any(module.startswith("sqlglot") for module in imported_modules(path)):
            relative = path.relative_to(ROOT / "proxy")
            assert relative.parts[0] in allowed or relative.as_posix() == "query/service.py", (
                f"{relative} imports sqlglot"
            )
