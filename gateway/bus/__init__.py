"""Redis adapters: the relay's atomic publish and a node's subscriptions."""
