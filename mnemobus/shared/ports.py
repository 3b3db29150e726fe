"""Loopback ports for the servers the project starts itself (nats-server nodes, Neo4j)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port nobody listens on right now (a server may still lose a race for it; callers retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
