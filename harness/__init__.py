"""What the tests and the benchmark share: real gateway processes to start and break (world), a TCP proxy to cut
(proxy), a websocket subscriber that checks the stream as a client would (follower), and a Valkey primary with
its replica under three sentinels to fail over (sentinel).

Not shipped in the wheel (pyproject.toml lists the packages it ships); importable from the repository's root,
where pytest and `python -m bench` run. Nothing here imports pytest or the tests.
"""
