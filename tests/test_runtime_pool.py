"""The runtime's buffer pool: one buffer per size while launches are waited for one at a time, a second
one only for a launch in flight at the same time."""

from runtime.pool import Pool


def test_pool_reuses_a_returned_buffer_of_the_same_size():
    made = []
    pool = Pool(lambda key: made.append(key) or bytearray(key))
    a = pool.take(64)
    pool.give(64, a)
    assert pool.take(64) is a
    assert pool.made == 1


def test_pool_never_hands_one_buffer_to_two_launches_in_flight():
    pool = Pool(lambda key: bytearray(key))
    a, b = pool.take(64), pool.take(64)
    assert a is not b and pool.made == 2
    c = pool.take(128)
    assert len(c) == 128 and pool.made == 3
    pool.give(64, a)
    pool.give(64, b)
    assert {id(pool.take(64)), id(pool.take(64))} == {id(a), id(b)}
    assert pool.made == 3
