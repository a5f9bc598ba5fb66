"""Every offline subcommand, walked with hostile-but-fair arguments
(hypothesis): paths that exist, do not, are empty or are the wrong kind;
numbers that are negative, zero, huge, NaN or not numbers; formulas that
are malformed.  Each run ends in a user-facing exit (0-4) with at most one
line of error, never an internal error (exit 70) or a traceback.  Commands
that start nodes or physics (run, watch, ack, resume, demo, bench, doctor
--live, gate --live) are left to their own tests."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from safemanip_ros.cli.main import main

SUITE = str(REPO / 'config' / 'properties' / 'safemanip.yaml')
SCENE = str(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml')
ROBOT = str(REPO / 'config' / 'robots' / 'robosuite_lift.yaml')


@pytest.fixture(scope='module')
def files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp('fuzz')
    (d / 'trace.jsonl').write_text('{"a": true, "b": false}\n{"a": false, "b": true}\n')
    (d / 'empty.jsonl').write_text('')
    (d / 'garbage.jsonl').write_text('{"a": tru\n\x00\xff')
    (d / 'report.json').write_text('{"rollouts": 2}')
    (d / 'empty_dir').mkdir()
    (d / 'not_yaml.yaml').write_text(': : [\n')
    return {'trace': str(d / 'trace.jsonl'), 'empty': str(d / 'empty.jsonl'), 'garbage': str(d / 'garbage.jsonl'),
            'report': str(d / 'report.json'), 'dir': str(d / 'empty_dir'), 'missing': str(d / 'nope'),
            'bad_yaml': str(d / 'not_yaml.yaml'), 'suite': SUITE, 'scene': SCENE, 'robot': ROBOT,
            'out': str(d / 'out'), 'unmakeable': '/proc/safemanip_fuzz/out',
            'under_a_file': str(d / 'trace.jsonl' / 'out')}


NUMBERS = st.sampled_from(['0', '-1', '1e308', 'nan', 'inf', 'x', '0.5', '3', '-0', '1e-300'])
FORMULAS = st.sampled_from(['G a', 'a U', '((a', 'F[3,1] b', 'G[0,1000000000] a', 'a & & b', 'X X X a', '',
                            'G(a -> F[0,5] b)', '!', 'true', '"a"'])
PATH_KEYS = st.sampled_from(['trace', 'empty', 'garbage', 'report', 'dir', 'missing', 'bad_yaml', 'suite',
                             'scene', 'robot', 'unmakeable', 'under_a_file'])


def _commands(files: dict[str, str]) -> st.SearchStrategy[list[str]]:
    path = PATH_KEYS.map(files.__getitem__)
    return st.one_of(
        st.tuples(st.just('check'), FORMULAS, path).map(list),
        st.tuples(st.just('check'), FORMULAS, path, st.just('--absent-false')).map(list),
        st.tuples(st.just('compile'), FORMULAS, st.just('--max-states'), NUMBERS).map(list),
        st.tuples(st.just('monitor-trace'), path, st.just('--properties'), path, st.just('--scene'), path).map(list),
        st.tuples(st.just('predicates'), st.just('--config'), path).map(list),
        st.tuples(st.just('ontology'), st.just('show'), st.sampled_from(['cube', 'table', 'nope', '']),
                  st.just('--config'), path).map(list),
        st.tuples(st.just('audit'), path, st.just('--scene'), path, st.just('--rate-hz'), NUMBERS,
                  st.just('--out'), st.just(files['out']), st.just('--quiet')).map(list),
        st.tuples(st.just('audit'), path, st.just('--config'), path, st.just('--staleness-s'), NUMBERS,
                  st.just('--out'), st.just(files['out']), st.just('--quiet')).map(list),
        st.tuples(st.just('gate'), path, st.just('--max-rate'),
                  st.sampled_from(['p=0.1', 'p=x', '=1', 'p', 'p=nan', 'p=-1']), st.just('--confidence'),
                  NUMBERS).map(list),
        st.tuples(st.just('gate'), path, st.just('--sequential'), st.just('--max-rate'),
                  st.sampled_from(['p=0.1', 'p=1', 'p=0']), st.just('--alpha'), NUMBERS).map(list),
        st.tuples(st.just('bag'), st.just('repair'), path).map(list),
        st.tuples(st.just('doctor'), st.just('--config'), path, path).map(list),
        st.tuples(st.just('config'), st.just('init'), st.just('--from-bag'), path, st.just('--out'),
                  st.just(files['out'] + '.yaml')).map(list),
        st.tuples(st.just('audit'), st.just(files['trace']), st.just('--scene'), st.just(files['scene']),
                  st.just('--allow-unknown-predicates'), st.just('--out'), path, st.just('--quiet')).map(list),
        st.tuples(st.just('specrl'), st.just('evaluate'), path, st.just('--formula'), FORMULAS,
                  st.just('--rate-hz'), NUMBERS).map(list),
        st.tuples(st.just('specrl'), st.just('evaluate'), st.just('--env'), st.just('letter'), st.just('--formula'),
                  FORMULAS, st.just('--seeds'), st.sampled_from(['1', '', 'a', '1,,2', '-3']),
                  st.just('--trajectories'), st.sampled_from(['1', '0', '-1']), st.just('--horizon'),
                  st.sampled_from(['3', '0', '100000000'])).map(list),
        st.tuples(st.just('specrl'), st.just('evaluate'), st.just('--env'), st.just('letter'), st.just('--formula'),
                  st.just('F a'), st.just('--seeds'), st.just('1'), st.just('--trajectories'), st.just('1'),
                  st.just('--horizon'), st.just('3'), st.just('--log-dir'), path).map(list),
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_no_offline_command_ends_in_an_internal_error(files, data):
    argv = data.draw(_commands(files))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:            # argparse's own usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    text = err.getvalue()
    assert code in (0, 1, 2, 3, 4), (argv, code, text[-2000:])
    assert 'Traceback' not in text and 'internal error' not in text, (argv, text[-2000:])
    if code == 2:
        errors = [line for line in text.splitlines() if 'error' in line]
        assert len(errors) <= 1, (argv, text)
    Path(files['out'] + '.yaml').unlink(missing_ok=True)
