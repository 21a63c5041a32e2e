"""The relay-core replay (bench.relay_core) runs the relay's own code and checks the counts it ends with."""

import pytest

from bench import relay_core
from gateway.core.batching import Batcher


@pytest.mark.parametrize("name", sorted(relay_core.SHAPES))
def test_a_short_replay_folds_every_change_and_publishes_each_cycle(name: str) -> None:
    shape = relay_core.SHAPES[name]
    seconds, changes, published = relay_core.run(shape, cycles=40)
    assert changes == 40 * shape.commits * shape.changes
    # Every cycle publishes at least the trajectory and team-jobs batches of its commits.
    assert published >= 40 * 2
    assert seconds > 0


def test_the_check_refuses_counts_that_are_off() -> None:
    world = relay_core.World(relay_core.SHAPES["steady"], seed=1)
    core = Batcher(epoch=1)
    core.load(world.aggregates())
    relay_core.check(world, core)  # nothing changed yet: equal
    core.aggregates.team(1).counts.add("running", 1)
    with pytest.raises(AssertionError, match="team 1"):
        relay_core.check(world, core)
