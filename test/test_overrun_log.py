"""The monitor's overrun lines (safemanip_ros/monitor/overruns.py): at most
one a second, and the one said is the longest since the last line — a
0.7 s frame is never hidden behind a late tick said a moment before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from safemanip_ros.monitor.overruns import OverrunLog


def test_the_first_is_said_at_once_and_a_longer_one_after_the_second():
    log = OverrunLog(gap_s=1.0)
    assert log.note(10.0, 0.036, 'tick 36.0 ms late') == 'tick 36.0 ms late; 1 overrun(s) so far'
    assert log.note(10.2, 0.711, 'frame built in 711.0 ms') is None
    assert log.note(10.3, 0.041, 'tick 41.0 ms late') is None
    assert log.due(10.9) is None
    assert log.due(11.0) == ('frame built in 711.0 ms; 3 overrun(s) so far, this the longest of the 2 since the '
                             'last line, 0.800 s ago')
    assert log.due(12.5) is None        # nothing waits
    assert log.count == 3
    assert log.note(12.6, 0.02, 'tick 20.0 ms late') == 'tick 20.0 ms late; 4 overrun(s) so far'
    assert log.note(12.7, 0.03, 'tick 30.0 ms late') is None
    assert log.due(12.8, waiting=True) == 'tick 30.0 ms late; 5 overrun(s) so far, 0.100 s ago'   # episode's end
    assert log.due(20.0, waiting=True) is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 0.2), st.floats(0.001, 1.0), st.booleans()), max_size=40))
def test_one_line_a_second_the_longest_since_the_last_nothing_lost(steps):
    """Overruns (gap after the previous event, length) and ticks between them, in time order."""
    log = OverrunLog(gap_s=1.0)
    now, said, unsaid, unsaid_at = 0.0, [], [], []
    for k, (gap_s, length_s, overrun) in enumerate(steps):
        now += gap_s
        if overrun:
            unsaid.append(length_s)
            unsaid_at.append((now, length_s))
            line = log.note(now, length_s, f'overrun {k} {length_s!r}')
        else:
            line = log.due(now)
        if line is not None:
            said.append(now)
            assert float(line.split()[2].rstrip(';')) == max(unsaid), (line, unsaid)
            at = [t for t, length in unsaid_at if length == max(unsaid)][0]
            assert (f', {now - at:.3f} s ago' in line) == (now > at), (line, now, at)
            unsaid, unsaid_at = [], []
    assert log.count == sum(1 for _, _, o in steps if o)
    assert all(b - a >= 1.0 for a, b in zip(said, said[1:])), said
    if unsaid:      # what waits comes out once a gap has passed since the last line
        assert log.due(now + 1.001) is not None
