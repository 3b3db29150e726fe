"""The memory service: one place that reads and manages memory, over NATS and Graphiti-compatible HTTP."""
