"""The event loop a command runs on is the one its settings chose (`Settings.event_loop`), and a missing uvloop
costs CPU, never the command."""

import logging
import sys

import pytest

from mnemobus.kernel import eventloop


async def _name() -> str:
    return eventloop.running_loop_name()


@pytest.mark.parametrize("choice", ["uvloop", "asyncio"])
def test_a_command_runs_on_the_loop_its_settings_chose(choice: eventloop.LoopChoice) -> None:
    assert eventloop.run(_name, choice) == choice


def test_without_uvloop_installed_a_command_runs_on_asyncio_and_says_so(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError, as where no wheel exists
    with caplog.at_level(logging.WARNING, logger="mnemobus.eventloop"):
        assert eventloop.run(_name, "uvloop") == "asyncio"
    assert "uvloop is not installed" in caplog.text
