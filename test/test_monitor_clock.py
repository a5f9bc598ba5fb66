"""The frame clock (monitor/clock.py): the schedule the live monitor node
keeps and the audit replays, checked without a node."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from safemanip_ros.monitor.clock import (
    FRAME_CUTOFF_NS,
    MAX_CATCH_UP_FRAMES,
    Arming,
    FrameClock,
    frame_grid,
    period_ns_of,
)

P = 50_000_000     # 20 Hz


def test_one_frame_per_period_and_the_first_at_the_first_tick():
    clock = FrameClock(P)
    assert clock.tick(1_000).due_ns == [1_000]
    assert clock.tick(1_000 + P).due_ns == [1_000 + P]
    assert clock.tick(1_000 + P + 3_000_000).due_ns == []          # a spurious tick: nothing due
    assert clock.tick(1_000 + 2 * P - P // 2).due_ns == [1_000 + 2 * P]   # half a period early still gets it


def test_a_late_tick_catches_up_on_every_missed_period():
    clock = FrameClock(P)
    clock.tick(0)
    tick = clock.tick(5 * P + 7)
    assert tick.due_ns == [P, 2 * P, 3 * P, 4 * P, 5 * P] and tick.skipped == 0


def test_a_stall_beyond_the_catch_up_limit_is_reported_and_restarts():
    clock = FrameClock(P, max_catch_up=3)
    clock.tick(0)
    tick = clock.tick(10 * P)
    assert tick.due_ns == [P, 2 * P, 3 * P]
    assert tick.skipped == 7                  # periods 4 … 10 never monitored
    assert clock.tick(11 * P).due_ns == [11 * P]
    assert FrameClock(P).max_catch_up == MAX_CATCH_UP_FRAMES


def test_a_clock_that_goes_back_restarts_the_schedule():
    clock = FrameClock(P)
    clock.tick(100 * P)
    assert clock.tick(100 * P - P).due_ns == []                # back within two periods: the schedule holds
    assert clock.tick(10 * P).due_ns == [10 * P]               # a simulation reset
    clock.restart()
    assert clock.tick(10 * P + 5).due_ns == [10 * P + 5]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=7 * P), min_size=1, max_size=60))
def test_forward_ticks_give_every_period_once(steps):
    """Whatever the executor's delays, the frames of forward ticks are the
    grid from the first tick: no period twice, none left out, none ahead of
    the tick by more than half a period."""
    clock = FrameClock(P)
    now = 0
    frames = clock.tick(now).due_ns
    for step in steps:
        now += step
        tick = clock.tick(now)
        assert tick.skipped == 0
        assert all(t <= now + P // 2 for t in tick.due_ns)
        frames += tick.due_ns
    assert frames == [k * P for k in range(len(frames))]
    assert frames[-1] > now - P // 2 - P


def test_the_newest_frame_time():
    assert FrameClock.newest_frame_ns(1_000 * P, 1_000 * P + 9, sampled_now=True) == 1_000 * P + 9
    assert FrameClock.newest_frame_ns(1_000 * P, 1_000 * P + 9, sampled_now=False) == 1_000 * P + 9 - FRAME_CUTOFF_NS
    assert FrameClock.newest_frame_ns(1_000 * P, 1_000 * P + 5 * FRAME_CUTOFF_NS, sampled_now=False) == 1_000 * P


def test_replayed_frames_fill_caught_up_frames_from_the_first_recorded():
    clock = FrameClock(P)
    published = {2: 10 * P - FRAME_CUTOFF_NS, 3: 11 * P + 17, 6: 14 * P + 3}
    times = clock.replayed(published)
    assert times == [8 * P, 9 * P, published[2], published[3], 12 * P, 13 * P, published[6]]


def test_period_and_grid():
    assert period_ns_of(20.0) == P and period_ns_of(7.0) == 142_857_143
    assert frame_grid(5, 5 + 2 * P, P).tolist() == [5, 5 + P, 5 + 2 * P]
    assert frame_grid(5, 4 + 2 * P, P).tolist() == [5, 5 + P]


def test_arming_waits_for_a_known_value_on_every_relevant_input():
    arming = Arming(timeout_s=10.0)
    topics = ['predicates/joint_states', 'predicates/tf']
    assert not arming.check(0.0, topics, set(topics))                  # nothing heard
    arming.heard('predicates/joint_states', read=3, known=3)
    assert not arming.check(0.1, topics, set(topics))                  # tf has a publisher, unheard
    arming.heard('predicates/tf', read=2, known=0)
    assert not arming.check(0.2, topics, set(topics))                  # heard, but only unknowns
    arming.heard('predicates/tf', read=2, known=1)
    assert arming.check(0.3, topics, set(topics)) and arming.timed_out_waiting is None


def test_arming_ignores_inputs_without_a_publisher_or_predicates_it_reads():
    arming = Arming(timeout_s=10.0)
    topics = ['a', 'b', 'c']
    arming.heard('a', read=1, known=1)
    arming.heard('b', read=0, known=0)                                  # nothing the suite reads
    assert arming.check(0.0, topics, {'a', 'b'})                       # c has no publisher


def test_arming_times_out_and_names_what_it_waited_for():
    arming = Arming(timeout_s=2.0)
    topics = ['a', 'b']
    arming.heard('a', read=1, known=1)
    arming.heard('b', read=1, known=0)
    assert not arming.check(5.0, topics, set(topics))
    assert not arming.check(6.9, topics, set(topics))
    assert arming.check(7.0, topics, set(topics)) and arming.timed_out_waiting == ['b']
    never = Arming(timeout_s=0.0)
    assert not never.check(0.0, topics, set(topics)) and not never.check(1e9, topics, set(topics))
