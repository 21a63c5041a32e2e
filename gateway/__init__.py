"""A real-time gateway that streams the state of compute jobs from PostgreSQL to websocket subscribers."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("jobs-gateway")
except PackageNotFoundError:  # a checkout on the path that was never installed
    __version__ = "0+unknown"
