"""Generated requests from the HTTP API's own OpenAPI document, against a running service: never a 5xx.

Schemathesis derives bodies, paths and parameters from /openapi.json (valid ones and, with negative
generation, invalid ones), so the document and the behaviour are checked together. A short run here (40
examples per operation and mode); the long one, for minutes, is `make bench-http-fuzz`."""

from __future__ import annotations

from tests.blackbox.fuzz import MODES, operations, server_errors

EXAMPLES = 40


def test_no_generated_request_valid_or_not_gets_a_server_error(running_service: str) -> None:
    ops = operations(running_service)
    assert len(ops) >= 10, [op.label for op in ops]
    errors = [e for op in ops for mode in MODES for e in server_errors(running_service, op, mode, EXAMPLES)]
    assert errors == []
