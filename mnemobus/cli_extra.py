"""Subcommands beyond run and doctor (dlq, migrate, ...), registered in one place."""

from __future__ import annotations

import argparse


def register_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Each command module adds its parser and sets `handler(settings, args) -> exit code`."""
    from mnemobus import dlq_cli

    dlq_cli.register(sub)
