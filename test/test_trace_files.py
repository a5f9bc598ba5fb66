"""Trace files read fast (``read_step_lists``: a step list per line, all
lines decoded at once) read exactly what the one trace reader
(``read_traces``) reads, and every file it cannot vouch for goes to that
reader, which names the file, line and problem."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safemanip_ros.audit.rollouts import AuditInputError, read_jsonl
from safemanip_ros.errors import TraceError
from safemanip_ros.ltlf.trace import read_step_lists, read_traces
from safemanip_ros.monitor.frames import read_frames, steps_matrix, trace_matrix

_NAMES = st.sampled_from(['a', 'b', 'c', 'typo', 'é', 'x y', 'q"uote', 'back\\slash', '[br]', 'co,ma:'])


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.lists(_NAMES, max_size=6), min_size=1, max_size=12),
       predicates=st.lists(st.sampled_from(['a', 'b', 'c', 'é', 'x y', 'q"uote', '[br]', 'co,ma:']), max_size=6),
       layout=st.sampled_from(['\n', '\r\n', '\n\n', '  \n\t']), spaces=st.booleans())
def test_fast_read_equals_the_trace_reader(tmp_path_factory, steps, predicates, layout, spaces):
    """Any step-list file (blank lines, CRLF, spaces inside and around, names
    with quotes, commas, brackets, non-ASCII; a name listed twice): the fast
    path takes it and gives the reader's frames, and the same matrices,
    with unknown names ignored when allowed."""
    path = tmp_path_factory.mktemp('t') / 'trace.jsonl'
    dump = (lambda s: json.dumps(s, ensure_ascii=False)) if spaces else (lambda s: json.dumps(s, separators=(',', ':')))
    path.write_bytes((layout.join((' ' if spaces else '') + dump(s) for s in steps) + layout).encode('utf-8'))
    fast = read_step_lists(path, predicates, allow_unknown=True)
    assert fast is not None
    [trace] = read_traces(path, predicates, allow_unknown=True)
    assert [list(dict.fromkeys(s)) for s in fast] == [list(f.values) for f in trace.frames]
    for got, expected in zip(steps_matrix(fast, predicates), trace_matrix(trace, predicates)):
        assert np.array_equal(got, expected)
    [rollout] = read_jsonl(path, predicates, allow_unknown=True)
    assert rollout.name == trace.name == path.name and rollout.source == str(path)
    assert np.array_equal(rollout.values, trace_matrix(trace, predicates)[0]) and not rollout.unknown.any()
    if set(predicates) >= {n for s in steps for n in s}:
        assert read_step_lists(path, predicates) is not None


# Files the joined decode could misread or that are simply wrong: the fast path declines each, and the
# reader's error (naming the file and line) is what the audit reports.
_BAD = {
    'a value split over lines, one line holding two': '["a]\n[b"]\n["c"], ["d"]\n',
    'a list continued on the next line': '["a"], ["b"\n"c"]\n',
    'two values on a line': '["a"] ["b"]\n',
    'two values with a comma on a line': '["a"]\n["c"], ["d"]\n',
    'not a name': '["a"]\n[1]\n',
    'a line that is no step': '["a"]\n"a"\n',
    'a form feed before a step': '["a"]\n\x0c["b"]\n',
    'a line cut short': '["a"]\n["b"\n',
}


@pytest.mark.parametrize('name', sorted(_BAD))
def test_files_the_fast_path_declines_get_the_readers_error(tmp_path, name):
    path = tmp_path / 'bad.jsonl'
    path.write_text(_BAD[name], encoding='utf-8')
    assert read_step_lists(path, ['a', 'b', 'c', 'd']) is None
    assert read_step_lists(path) is read_step_lists(path, ['a'], allow_unknown=True) is None
    with pytest.raises(TraceError) as reader:
        read_traces(path, ['a', 'b', 'c', 'd'])
    assert f'{path}:' in str(reader.value)
    with pytest.raises(AuditInputError) as audit:
        read_jsonl(path, ['a', 'b', 'c', 'd'])
    assert str(reader.value) in str(audit.value)


def test_unknown_name_is_the_readers_error_unless_allowed(tmp_path):
    path = tmp_path / 'trace.jsonl'
    path.write_text('["a"]\n["a", "tpyo"]\n')
    assert read_step_lists(path, ['a', 'b']) is None
    with pytest.raises(AuditInputError, match=r"trace.jsonl:2: unknown predicate 'tpyo'; known predicates: a, b"):
        read_jsonl(path, ['a', 'b'])
    with pytest.raises(TraceError, match="unknown predicate 'tpyo'"):
        read_frames(path, ['a', 'b'])
    assert read_step_lists(path, ['a', 'b'], allow_unknown=True) == [['a'], ['a']]
    values, unknown = read_frames(path, ['b', 'a'], allow_unknown=True)
    assert values.tolist() == [[False, True], [False, True]] and not unknown.any()


def test_other_formats_go_to_the_reader(tmp_path):
    """Frame objects (with null = unknown), batches and empty files are not
    step-list traces: the reader reads them."""
    frames = tmp_path / 'frames.jsonl'
    frames.write_text('{"a": true}\n{"a": null}\n')
    batch = tmp_path / 'batch.jsonl'
    batch.write_text('[["a"], ["b"]]\n[["b"]]\n')
    empty = tmp_path / 'empty.jsonl'
    empty.write_text('\n \n')
    for path in (frames, batch, empty):
        assert read_step_lists(path, ['a', 'b']) is None
    [rollout] = read_jsonl(frames, ['a', 'b'])
    assert rollout.unknown.tolist() == [[False, True], [True, True]]
    assert [e.name for e in read_jsonl(batch, ['a', 'b'])] == ['batch.jsonl:1', 'batch.jsonl:2']
    with pytest.raises(AuditInputError, match='empty trace'):
        read_jsonl(empty, ['a'])
    assert read_step_lists(Path(tmp_path / 'missing.jsonl')) is None


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(_NAMES, min_size=1, max_size=6), spaces=st.sampled_from(['', ' ', '\t']),
       batch=st.booleans())
def test_a_predicate_given_twice_in_one_step_is_an_error(tmp_path_factory, keys, spaces, batch):
    """A frame object naming a predicate twice is ambiguous (Python's JSON
    decoder would keep the last value): the reader names the file, the line
    and the name, however the line is spaced; a frame naming each once reads
    as before."""
    path = tmp_path_factory.mktemp('t') / 'trace.jsonl'
    pairs = [f'{json.dumps(k)}{spaces}:{spaces}{json.dumps(i % 2 == 0)}' for i, k in enumerate(keys)]
    step = '{' + ', '.join(pairs) + '}'
    path.write_text(('[{"a": true}, ' + step + ']' if batch else '{"a": true}\n' + step) + '\n', encoding='utf-8')
    repeated = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
    if repeated is None:
        traces = read_traces(path, allow_unknown=True)
        assert [dict(f.values) for f in traces[0].frames][-1] == {k: i % 2 == 0 for i, k in enumerate(keys)}
        return
    line = 1 if batch else 2
    with pytest.raises(TraceError, match=f'trace.jsonl:{line}: .* is given twice in one step') as err:
        read_traces(path, allow_unknown=True)
    assert repr(repeated) in str(err.value)


@pytest.mark.parametrize('text', ['{"a": true}\n{"a": false}\n', '["a"]\n[]\n'])
def test_a_byte_order_mark_is_not_part_of_the_first_step(tmp_path, text):
    """Editors on Windows start UTF-8 files with one; both readers skip it."""
    path = tmp_path / 'bom.jsonl'
    path.write_bytes(b'\xef\xbb\xbf' + text.encode())
    values, unknown = read_frames(path, ['a'])
    assert values[:, 0].tolist() == [True, False] and not unknown.any()
