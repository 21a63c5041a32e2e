from gateway.core.sequence import Arrival, ChannelStream


def test_in_order_then_gap_then_duplicate() -> None:
    s = ChannelStream()
    assert s.arrive(1, 5) is Arrival.FIRST
    assert s.arrive(1, 6) is Arrival.NEXT
    assert s.arrive(1, 8) is Arrival.GAP
    assert s.arrive(1, 8) is Arrival.DUPLICATE
    assert s.arrive(1, 3) is Arrival.DUPLICATE


def test_a_new_epoch_continues_the_sequence_and_fences_the_old_one() -> None:
    s = ChannelStream()
    s.arrive(1, 10)
    assert s.arrive(2, 11) is Arrival.NEXT
    assert s.arrive(1, 12) is Arrival.STALE_EPOCH
    assert s.arrive(2, 12) is Arrival.NEXT
