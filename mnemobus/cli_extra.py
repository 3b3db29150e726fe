"""Subcommands beyond run and doctor, registered in one place."""

from __future__ import annotations

import argparse


def register_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Each command module adds its parser and sets `handler(settings, args) -> exit code`."""
    from mnemobus import dlq_cli, migrate_cli
    from worldstate import cli as worldstate_cli

    dlq_cli.register(sub)
    migrate_cli.register(sub)
    worldstate_cli.register(sub)
    try:
        from mnemobus.api import cli as api_cli
    except ImportError:
        return
    api_cli.register(sub)
