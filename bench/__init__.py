"""Load-benchmark harness."""
