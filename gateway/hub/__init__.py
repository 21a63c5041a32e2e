"""Per-node fan-out: local connections, their subscriptions, and the slow-consumer policy."""
