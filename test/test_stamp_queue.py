"""The one rule for inputs waiting for their frame (monitor/queue.py): on a
simulated clock, whatever order inputs arrive in, each frame takes exactly
those stamped at or before it, in stamp order, ties in arrival order."""

from __future__ import annotations

import doctest

from hypothesis import given, settings
from hypothesis import strategies as st

import safemanip_ros.monitor.queue as queue_module
from safemanip_ros.monitor.queue import StampQueue


def test_the_docstring_example_runs():
    assert doctest.testmod(queue_module).failed == 0


@settings(max_examples=200, deadline=None)
@given(arrivals=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), max_size=60),
       frame_step=st.integers(1, 20))
def test_frames_on_a_simulated_clock_take_their_inputs_in_stamp_order(arrivals, frame_step):
    """``arrivals``: (arrival time, stamp) per input; frames every
    ``frame_step`` of simulated time.  Each frame takes the inputs that had
    arrived by then and are stamped at or before it, sorted by stamp (a
    stable sort: ties in arrival order); none twice, none lost."""
    q: StampQueue[int] = StampQueue()
    order = sorted(range(len(arrivals)), key=lambda i: arrivals[i][0])      # by arrival (ties: list order)
    taken: list[int] = []
    pushed: list[int] = []
    k = 0
    for now in range(0, 120, frame_step):
        while k < len(order) and arrivals[order[k]][0] <= now:
            q.push(arrivals[order[k]][1], order[k])
            pushed.append(order[k])
            k += 1
        got = list(q.due(now))
        items = [item for _, item in got]
        assert all(stamp <= now for stamp, _ in got)
        expected = sorted((i for i in pushed if i not in taken and arrivals[i][1] <= now),
                          key=lambda i: (arrivals[i][1], pushed.index(i)))
        assert items == expected        # every due one taken, in order; those left are all stamped later
        taken += items
    assert sorted(taken) == sorted(pushed) == sorted(range(len(arrivals)))
    assert len(q) == 0 and q.oldest_ns is None
