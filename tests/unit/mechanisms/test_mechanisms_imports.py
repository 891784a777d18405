"""mechanisms/ sits low in the import graph: the standard library, numpy/scipy, phe (Paillier, for mechanisms/secure), budget.loss and budget.errors.

numpy is used where it does real work (scoring all quantile candidates at once with ``searchsorted``,
summing the discrete Gaussian's privacy curve); noise itself is never drawn from numpy or from floats.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import mechanisms

PACKAGE_DIR = Path(mechanisms.__file__).parent
ALLOWED = {"budget.loss", "budget.errors"}
ALLOWED_THIRD_PARTY = {"numpy", "scipy", "phe"}  # phe: Paillier, for mechanisms/secure


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
    return (
        top in sys.stdlib_module_names
        or module in ALLOWED
        or top in ALLOWED_THIRD_PARTY
        or top == "mechanisms"
    )


def test_mechanisms_import_only_the_standard_library_numpy_and_budget() -> None:
    offending = {
        f"{path.name}: {module}"
        for path in PACKAGE_DIR.rglob("*.py")
        for module in imported_modules(path)
        if not is_allowed(module)
    }
    assert not offending


def test_no_mechanism_draws_randomness_from_numpy_or_the_random_module() -> None:
    # Randomness enters only through the injected RandomSource (secrets.SystemRandom in production).
    for path in PACKAGE_DIR.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "np.random" not in text and "numpy.random" not in text, path.name
        assert "random" not in imported_modules(path), path.name
