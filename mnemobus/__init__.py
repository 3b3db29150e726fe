"""mnemobus: long-term memory for AI agents on a NATS bus.

The kernel (bus, config, plugin runner, CLI) and the memory engine (stores,
extraction, recall, worker) live here; `plugins/` and `worldstate/` build on it.
"""

__version__ = "0.1.0"
