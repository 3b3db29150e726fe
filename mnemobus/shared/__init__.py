"""Shared definitions: config, the messages and subjects on the bus, groups, limits, errors, metrics.

Imports nothing else of mnemobus (tests/architecture checks it), so every layer can use it."""
