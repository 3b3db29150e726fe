"""Generated requests from the HTTP API's own OpenAPI document, against a running service: never a 5xx.

Schemathesis derives bodies, paths and parameters from /openapi.json (valid ones and, with negative
generation, invalid ones), so the document and the behaviour are checked together. Its pytest plugin does not
load under this pytest; the operations are driven through its Python API instead, with hypothesis bounding the
examples per operation so `make test` stays short.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode

EXAMPLES = 40


def _server_errors(base_url: str, operation, mode: GenerationMode) -> list[str]:  # type: ignore[no-untyped-def]
    found: list[str] = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case) -> None:  # type: ignore[no-untyped-def]
        response = case.call(base_url=base_url, timeout=30)
        if response.status_code >= 500:
            found.append(f"{operation.label} -> {response.status_code}: {response.text[:200]} "
                         f"(body {str(case.body)[:200]!r}, path {case.path_parameters}, query {case.query})")

    try:
        run()
    except Unsatisfiable:
        assert mode is GenerationMode.NEGATIVE, f"{operation.label}: no valid request could be generated"
        # an operation with nothing to get wrong (GET /healthcheck) has no invalid requests
    return found


def test_no_generated_request_valid_or_not_gets_a_server_error(running_service: str) -> None:
    schema = schemathesis.openapi.from_url(f"{running_service}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10, [op.label for op in operations]
    errors = [e for op in operations for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
              for e in _server_errors(running_service, op, mode)]
    assert errors == []
