"""A real-time gateway that streams the state of compute jobs from PostgreSQL to websocket subscribers."""
