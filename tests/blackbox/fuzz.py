"""Requests generated from the HTTP API's own /openapi.json (schemathesis), valid ones and invalid ones, with
what came back tallied: the short check in `make test` and the long run of `make bench-http-fuzz` share it.

Schemathesis' pytest plugin does not load under this pytest; the operations are driven through its Python API,
with hypothesis bounding the examples per operation."""

from __future__ import annotations

from collections import Counter
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode

MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


def operations(base_url: str) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def server_errors(base_url: str, operation: Any, mode: GenerationMode, examples: int,
                  statuses: Counter[int] | None = None) -> list[str]:
    """Up to `examples` generated requests to one operation: each 5xx described; every status counted in
    `statuses` when given."""
    found: list[str] = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case) -> None:  # type: ignore[no-untyped-def]
        response = case.call(base_url=base_url, timeout=30)
        if statuses is not None:
            statuses[response.status_code] += 1
        if response.status_code >= 500:
            found.append(f"{operation.label} -> {response.status_code}: {response.text[:200]} "
                         f"(body {str(case.body)[:200]!r}, path {case.path_parameters}, query {case.query})")

    try:
        run()
    except Unsatisfiable:
        assert mode is GenerationMode.NEGATIVE, f"{operation.label}: no valid request could be generated"
        # an operation with nothing to get wrong (GET /healthcheck) has no invalid requests
    return found
