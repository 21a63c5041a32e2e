"""The write-cost measure (bench.write_cost) writes every size to every connection and reports each."""

import uvloop

from bench import write_cost


def test_each_size_is_measured_over_real_loopback_sockets_read_by_another_process() -> None:
    figures = uvloop.run(write_cost.measure(connections=20, sizes=[100, 4000], rounds=5))
    assert [size for size, _ in figures] == [100, 4000]
    assert all(us > 0 for _, us in figures)  # the writer's CPU went somewhere: the writes happened
