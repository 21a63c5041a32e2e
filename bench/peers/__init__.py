"""Peer servers for the load benchmark: the stacks the gateway is compared against."""
