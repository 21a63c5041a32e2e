"""The broker: everything the gateway keeps in or sends through Redis, and the only code that names its keys.

The interface is gateway.bus.broker; the Redis implementation is these modules (keys and connection; publisher
and subscriber with history; presence, cluster_figures, relay_stats, membership; commands to clusters), and
gateway.bus.memory is the in-memory one with the same semantics.
"""
