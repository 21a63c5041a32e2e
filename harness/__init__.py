"""What the tests and the benchmark share: real gateway processes to start and break (world), a TCP proxy to cut
(proxy), and a websocket subscriber that checks the stream as a client would (follower).

Not shipped in the wheel (pyproject.toml lists the packages it ships); importable from the repository's root,
where pytest and `python -m bench` run. Nothing here imports pytest or the tests.
"""
