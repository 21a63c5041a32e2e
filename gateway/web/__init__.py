"""The Starlette application: /ws, the HTTP API, health, the static frontend."""
