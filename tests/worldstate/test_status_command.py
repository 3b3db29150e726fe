"""`mnemobus status` prints the polled document and fails when a goal does not hold."""

from __future__ import annotations

import argparse
import json

import pytest

from mnemobus.shared.config import Settings
from worldstate.cli import add_status_command
from worldstate_support import GOALS_FILE


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_status_command(parser.add_subparsers())
    return parser.parse_args(argv)


def test_status_without_a_worker_prints_the_document_and_exits_1(settings: Settings,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(["status", "--goals", str(GOALS_FILE)])
    code = args.handler(settings, args)
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert code == 1
    assert document["domains"]["memory"]["data"]["workerAlive"] is False
    assert document["domains"]["memory"]["data"]["storeHealthy"] is True
    assert "memory.worker_alive (critical)" in err


def test_status_with_an_invalid_goals_file_exits_2_naming_the_problem(settings: Settings, tmp_path,  # type: ignore[no-untyped-def]
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "goals.yaml"
    bad.write_text("goals:\n  - id: x\n    severity: urgent\n")
    args = parse(["status", "--goals", str(bad)])
    assert args.handler(settings, args) == 2
    assert "goal 'x': field 'severity'" in capsys.readouterr().err
