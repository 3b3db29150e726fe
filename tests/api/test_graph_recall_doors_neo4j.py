"""Graph recall through every public door on the run's Neo4j: the five door tests of tests/api/graph_doors.py in each
graph mode, one runtime per mode. The other store's half is its own file, so it runs on another xdist worker."""

from __future__ import annotations

import pytest

from tests.api.graph_doors import *  # noqa: F403 - the fixtures and the five door tests
from tests.store.conftest import neo4j_uri  # noqa: F401 - the run's Neo4j

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def backend() -> str:
    return "neo4j"
