"""The frame clock (monitor/clock.py): the schedule the live monitor node
keeps and the audit replays, checked without a node."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safemanip_ros.monitor.clock import (
    FRAME_CUTOFF_NS,
    MAX_CATCH_UP_FRAMES,
    Arming,
    FrameClock,
    ageing_ns,
    frame_grid,
    period_ns_of,
    recorded_period_ns,
)
from safemanip_ros.monitor.periodic import PeriodicSchedule

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


def test_caught_up_frames_age_their_samples_at_the_ticks_first_frame():
    assert ageing_ns([5 * P]) == [5 * P]
    assert ageing_ns([5 * P, 6 * P]) == [5 * P, 6 * P]
    assert ageing_ns([5 * P, 6 * P, 7 * P, 8 * P + 3]) == [5 * P, 5 * P, 5 * P, 8 * P + 3]


def test_a_replay_ages_samples_as_the_live_ticks_did():
    """Ticks of a live run, each publishing its newest frame: the replay
    finds each tick's frames from the published ones and ages them alike."""
    clock = FrameClock(P)
    c = FRAME_CUTOFF_NS        # the newest frame of a tick is built less the cutoff; caught-up ones as scheduled
    ticks = [[-c], [P - c], [2 * P, 3 * P, 4 * P, 5 * P - c], [6 * P - c], [7 * P, 8 * P - c], [9 * P - c]]
    published = {}
    for due in ticks:
        published[sum(len(t) for t in ticks[:ticks.index(due) + 1]) - 1] = due[-1]
    assert clock.replayed(published) == [t for due in ticks for t in due]
    assert clock.replayed_ageing(published) == [a for due in ticks for a in ageing_ns(due)]
    # Frames before the first recorded one are each their own.
    late = {k: t for k, t in published.items() if k >= 3}
    assert clock.replayed_ageing(late)[:3] == clock.replayed(late)[:3]


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


# ----------------------------------------------------------- periodic messages
def test_periodic_messages_go_out_in_a_frame_with_room_for_them():
    sched = PeriodicSchedule(1.0, budget=0.7, max_wait=0.25)
    frame = 0.010
    assert sched.publish_now(0.0, 0.002, frame)            # due at once, and room
    sched.published(0.0, cost_s=0.004)
    assert not sched.due(0.99) and not sched.publish_now(0.99, 0.0, frame)
    # Due at 1.0: a frame that already worked 5 ms has no room for 4 ms more (7 ms budget) ...
    assert sched.due(1.0) and not sched.publish_now(1.0, 0.005, frame)
    # ... the next frame, lighter, has.
    assert sched.publish_now(1.01, 0.002, frame)
    sched.published(1.01, cost_s=0.004)
    assert sched.due(2.0)          # one period after they were due, not after they went out: no drift


def test_periodic_messages_never_published_are_taken_to_need_half_the_budget():
    # The three of a monitor are all due on its first frame: not all in that one frame.
    first, second = PeriodicSchedule(1.0), PeriodicSchedule(1.0)
    assert first.publish_now(0.0, 0.002, 0.010)            # 2 ms + 3.5 ms <= 7 ms
    first.published(0.0, cost_s=0.003)
    assert not second.publish_now(0.0, 0.005, 0.010)       # 5 ms + 3.5 ms > 7 ms: the next frame
    assert second.publish_now(0.01, 0.002, 0.010)


def test_periodic_messages_wait_at_most_max_wait_of_their_period():
    sched = PeriodicSchedule(1.0, budget=0.7, max_wait=0.25)
    sched.published(0.0, cost_s=0.009)          # costly: never fits beside a frame's work at 10 ms
    t = 1.0
    while not sched.publish_now(t, 0.001, 0.010):
        t += 0.010
    assert 1.25 <= t < 1.26                       # the heartbeat is late by max_wait at most
    sched.published(t, cost_s=0.001)
    assert not sched.due(1.99) and sched.due(2.0)


def test_a_stalled_monitor_does_not_publish_a_burst_of_periodic_messages():
    sched = PeriodicSchedule(0.5)
    sched.published(0.0, cost_s=0.0)
    assert sched.publish_now(3.2, 0.0, 0.05)      # six periods missed
    sched.published(3.2, cost_s=0.0)
    assert not sched.due(3.69) and sched.due(3.7)


@given(st.lists(st.tuples(st.floats(0.0, 0.02), st.floats(0.0, 0.02)), min_size=1, max_size=400))
@settings(max_examples=60, deadline=None)
def test_periodic_messages_never_later_than_max_wait_nor_in_bursts(frames):
    """Whatever each frame's load and the messages' cost: due every period
    from the first, each goes out within max_wait of its due time (plus the
    frame it falls in), so two are never closer than (1 - max_wait) periods."""
    sched, period_s, frame_s, t, sent = PeriodicSchedule(0.2, max_wait=0.25), 0.2, 0.01, 0.0, []
    for used_s, cost_s in frames:
        if sched.publish_now(t, used_s, frame_s):
            sched.published(t, cost_s)
            sent.append(t)
        t += frame_s
    for k, when in enumerate(sent):
        assert k * period_s - 1e-9 <= when <= k * period_s + 0.25 * period_s + frame_s + 1e-9
    assert len(sent) >= int((t - 0.25 * period_s - frame_s) / period_s)    # none skipped


def test_periodic_schedule_rejects_nonsense():
    for kwargs in ({'period_s': 0.0}, {'period_s': 1.0, 'budget': 0.0}, {'period_s': 1.0, 'max_wait': 1.0}):
        with pytest.raises(ValueError):
            PeriodicSchedule(**kwargs)


def test_a_sample_is_judged_stale_at_the_ageing_time():
    from safemanip_ros.monitor.frames import SampleHold
    hold = SampleHold(['a'], staleness_s=0.2)
    hold.update('a', True, 1.0)
    assert hold.frame(1.5)[1].tolist() == [True]                      # stale at its own time
    assert hold.frame(1.5, aged_at_s=1.05)[0].tolist() == [True]      # held through a caught-up frame
    assert hold.frame(1.5, aged_at_s=1.05)[1].tolist() == [False]


def test_the_recorded_period_is_the_median_step_of_consecutive_published_frames():
    published = {0: 0, 1: 10_000_000, 2: 20_000_000, 6: 60_500_000, 7: 70_000_000, 8: 80_100_000}
    assert recorded_period_ns(published) == 10_000_000
    assert recorded_period_ns({0: 0, 1: 10_000_000, 5: 50_000_000}) is None     # too few steps to tell
