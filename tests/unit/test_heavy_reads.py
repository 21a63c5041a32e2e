"""Heavy reads in flight (gateway.web.http.heavy): per user, and exports per user and per node; a refusal takes
nothing, and what ends gives its slots back."""

from __future__ import annotations

import pytest

from gateway.web.http.guards import Refused
from gateway.web.http.heavy import HeavyReads


def refusal(reads: HeavyReads, user_id: int, export: bool = False) -> str:
    with pytest.raises(Refused) as refused:
        reads.take(user_id, export)
    assert (refused.value.status, refused.value.code) == (429, "too_many_reads")
    assert refused.value.retry_after is not None
    return refused.value.message


def test_a_users_heavy_reads_are_bounded_and_given_back() -> None:
    reads = HeavyReads(per_user=2, per_node=10, exports_per_user=1, exports_per_node=10)
    with reads.slot(1), reads.slot(1):
        assert "2 of your searches" in refusal(reads, 1)
        with reads.slot(2):  # another user has their own
            pass
    with reads.slot(1), reads.slot(1):  # both given back
        pass


def test_exports_are_bounded_per_user_and_per_node_and_a_refusal_takes_nothing() -> None:
    reads = HeavyReads(per_user=4, per_node=10, exports_per_user=1, exports_per_node=2)
    first = reads.take(1, export=True)
    assert "1 of your exports" in refusal(reads, 1, export=True)
    second = reads.take(2, export=True)
    assert "this node streams 2 exports" in refusal(reads, 3, export=True)
    with reads.slot(3), reads.slot(3), reads.slot(3), reads.slot(3):  # the refused export took none of user 3's
        pass
    first()
    third = reads.take(3, export=True)
    for release in (second, third):
        release()
    assert reads.users.in_flight == reads.user_exports.in_flight == reads.node_exports.in_flight == {}


def test_the_nodes_searches_and_deep_pages_are_bounded_whoever_asks() -> None:
    reads = HeavyReads(per_user=4, per_node=3, exports_per_user=2, exports_per_node=2)
    with reads.slot(1), reads.slot(2), reads.slot(3):
        assert "this node runs 3 searches" in refusal(reads, 4)
        release = reads.take(4, export=True)  # exports have their own bound on the node
        release()
        assert reads.users.in_flight == {1: 1, 2: 1, 3: 1}  # the refused one took nothing of user 4's
    assert reads.node.in_flight == {}
