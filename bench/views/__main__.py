"""`python -m bench.views`: the benchmark's command (bench/views/run.py)."""

from .run import main

main()
