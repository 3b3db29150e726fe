"""Graph recall through every public door on SQLite: the five door tests of tests/api/graph_doors.py in each
graph mode, one runtime per mode. The other store's half is its own file, so it runs on another xdist worker."""

from __future__ import annotations

import pytest

from tests.api.graph_doors import *  # noqa: F403 - the fixtures and the five door tests

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def backend() -> str:
    return "sqlite"
