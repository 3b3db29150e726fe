"""What `mnemobus doctor` says of a store that cannot check its own files (Neo4j has its own tools for that)."""

from __future__ import annotations

import pytest

from mnemobus.kernel.doctor import _integrity

pytestmark = pytest.mark.anyio


async def test_a_store_without_an_integrity_check_is_said_to_be_unchecked_and_fails_nothing() -> None:
    said: list[str] = []
    assert await _integrity(object(), repair=True, say=said.append) == 0
    assert said == ["store integrity: not checked by doctor (Neo4j checks its own: `neo4j-admin database check`)"]
