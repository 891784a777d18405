"""Fixtures shared by the integration tests that need a query slow enough to interrupt."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import RunningServer, running_server
from tests.integration.slow_dataset import build_slow_dataset


@pytest.fixture(scope="module")
def slow_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The slow dataset's policy: one per test module, so each module's budgets start fresh."""
    return build_slow_dataset(tmp_path_factory.mktemp("slow"))


@pytest.fixture(scope="module")
def slow_server(slow_config: Path) -> Iterator[RunningServer]:
    with running_server(slow_config, slow_config.with_name("serve.log")) as server:
        yield server
