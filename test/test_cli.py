"""The ``safemanip`` command-line contract (check, compile, help, version)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    REPO,  # noqa: E402
    run_cli,
)

from safemanip_ros.cli.main import build_parser


def _subcommands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == 'command')
    return sorted(action.choices)


def test_version():
    proc = run_cli('--version')
    assert proc.returncode == 0 and proc.stdout.strip() == 'safemanip_ros 0.1.0'


@pytest.mark.parametrize('args', [
    ('check', 'G(a -> F b)', 'TRACE', '--json'),            # a result on stdout
    ('compile', 'G(a -> '),                                 # bad input: one line, exit 2
    ('check', 'G a', 'MISSING'),                            # a missing file: one line, exit 2
    ('audit', '--no-such-flag'),                            # argparse's usage error, exit 2
    ('gate', '--help'),                                     # argparse's help, exit 0
])
@pytest.mark.slow
def test_the_in_process_runner_says_what_the_installed_command_says(tmp_path, args):
    """run_cli runs offline subcommands inside the test process (test/conftest.py): what it returns must be
    what the installed executable prints and exits with, or the tests that use it test something else."""
    trace = tmp_path / 't.jsonl'
    trace.write_text('{"a": true}\n{"b": true}\n')
    argv = [str(trace) if a == 'TRACE' else str(tmp_path / 'missing.jsonl') if a == 'MISSING' else a for a in args]
    here, process = run_cli(*argv), run_cli(*argv, process=True)
    assert (here.returncode, here.stdout, here.stderr) == (process.returncode, process.stdout, process.stderr)


@pytest.mark.parametrize('sub', [None] + _subcommands())
def test_help_everywhere(sub):
    args = ['--help'] if sub is None else [sub, '--help']
    proc = run_cli(*args)
    assert proc.returncode == 0 and 'usage: safemanip' in proc.stdout


def test_check_object_and_list_steps(tmp_path):
    trace = tmp_path / 't.jsonl'
    trace.write_text('{"a": true, "b": false}\n\n["a"]\n{"b": true}\n{}\n')
    proc = run_cli('check', 'G(a -> F b)', str(trace), '--json')
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {'formula': 'G (a -> F b)',
                   'verdicts': ['presumably_false', 'presumably_false', 'presumably_true', 'presumably_true'],
                   'accepted': True}


def test_check_final_verdicts(tmp_path):
    trace = tmp_path / 't.jsonl'
    trace.write_text('["a"]\n[]\n["a", "unrelated"]\n')
    out = json.loads(run_cli('check', 'G a', str(trace), '--json').stdout)
    assert out['verdicts'] == ['presumably_true', 'false', 'false'] and out['accepted'] is False
    out = json.loads(run_cli('check', 'F !a', str(trace), '--json').stdout)
    assert out['verdicts'] == ['presumably_false', 'true', 'true'] and out['accepted'] is True


def test_check_batch(tmp_path):
    batch = tmp_path / 'b.jsonl'
    batch.write_text('[["a"], ["b"]]\n[{"a": false}]\n[["a"], {"a": true, "b": true}, []]\n')
    proc = run_cli('check', 'a U b', '--batch', str(batch), '--json')
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r['accepted'] for r in lines] == [True, False, True]
    assert lines[0]['verdicts'] == ['presumably_false', 'true']
    assert lines[1]['verdicts'] == ['false']
    assert len(lines[2]['verdicts']) == 3


@pytest.mark.parametrize('args, content, message', [
    (['a &&'], None, 'position 3'),
    (['G a'], '{"a": 1}\n', 't.jsonl:1: value of \'a\' must be true, false or null'),
    (['G a'], '{"a": true}\n{"a": null}\n', "t.jsonl:2: 'a' is null (unknown)"),
    (['G a'], '[' * 100000 + '\n', 't.jsonl:1: JSON nested too deeply'),
    (['G a'], b'{"a": true}\n\xff\xfe\n', 'not UTF-8 text'),
    (['G a'], '["a"]\n{"a": true\n', 't.jsonl:2: invalid JSON'),
    (['G a'], '"a"\n', 't.jsonl:1: a step must be a JSON object'),
    (['G a'], '', 'empty trace'),
    (['G a', '--batch'], '{"a": true}\n', 'batch line must be a JSON array'),
])
def test_check_bad_input_exits_2_with_one_line(tmp_path, args, content, message):
    trace = tmp_path / 't.jsonl'
    if isinstance(content, bytes):
        trace.write_bytes(content)
    elif content is not None:
        trace.write_text(content)
    cmd = ['check', args[0]] + (['--batch', str(trace)] if '--batch' in args else [str(trace)])
    proc = run_cli(*cmd, '--json')
    assert proc.returncode == 2
    assert proc.stdout == ''
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('safemanip: error:') and message in lines[0], proc.stderr


def test_check_unreadable_file(tmp_path):
    proc = run_cli('check', 'G a', str(tmp_path / 'missing.jsonl'))
    assert proc.returncode == 2 and 'missing.jsonl: cannot read trace file' in proc.stderr


def test_compile_prints_and_exports(tmp_path):
    dot, js = tmp_path / 'a.dot', tmp_path / 'a.json'
    proc = run_cli('compile', 'G(a -> F b)', '--dot', str(dot), '--json', str(js))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert 'states: 3' in text and 'accepting states: [1]' in text and 'atoms: ["a", "b"]' in text
    assert 'compile time:' in text
    assert dot.read_text().startswith('digraph DFA')
    assert json.loads(js.read_text())['num_states'] == 3


def test_compile_picks_and_names_its_construction():
    nested = 'G(a -> F[0,6] (b & F[0,6] c))'
    auto = run_cli('compile', nested)
    assert auto.returncode == 0, auto.stderr
    assert 'construction: explicit' in auto.stdout
    symbolic = run_cli('compile', nested, '--construction', 'symbolic')
    assert 'construction: symbolic' in symbolic.stdout

    def states(text: str) -> str:
        return next(line for line in text.splitlines() if line.startswith('states:'))
    assert states(auto.stdout) == states(symbolic.stdout) == 'states: 86'
    wide = run_cli('compile', 'G(a -> F[0,2] (b & F[0,2] c)) & G(d | e | g | h)', '--construction', 'explicit')
    assert wide.returncode == 2 and '7 atoms (at most 6 are enumerated)' in wide.stderr


def test_compile_syntax_error():
    proc = run_cli('compile', 'G(a -> ')
    assert proc.returncode == 2 and 'at position 7' in proc.stderr


def test_output_cut_off_by_its_reader_ends_quietly():
    """``safemanip compile ... | head``: the pipe closes while the command
    still writes (its accepting-state list is far longer than a pipe's
    buffer): exit 141 as for SIGPIPE, no 'internal error'."""
    exe = shutil.which('safemanip', path=str(Path(sys.executable).parent)) or 'safemanip'
    proc = subprocess.Popen([exe, 'compile', 'G(a -> F[0,30] (b & F[0,30] c))'], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b'formula:')
    proc.stdout.close()                 # the reader goes away
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert 'internal error' not in err and 'Traceback' not in err


def test_internal_errors_are_reported_as_bugs(tmp_path):
    """An exception that is not ours is a bug, not bad input: exit 70 with one
    line, and the traceback with --debug."""
    from safemanip_ros.cli import main as cli_main
    (tmp_path / 'a.yaml').write_text('x')

    class Boom(Exception):
        pass

    def explode(args):
        raise Boom('unexpected')
    parser_build = cli_main.build_parser

    def build():
        parser = parser_build()
        for action in parser._subparsers._group_actions:
            action.choices['check'].set_defaults(func=explode)
        return parser
    cli_main.build_parser = build
    try:
        assert cli_main.main(['check', 'a', str(tmp_path / 'a.yaml')]) == cli_main.INTERNAL_ERROR
        with pytest.raises(Boom):
            cli_main.main(['--debug', 'check', 'a', str(tmp_path / 'a.yaml')])
    finally:
        cli_main.build_parser = parser_build


def test_monitor_trace_rate_is_checked(tmp_path):
    trace = tmp_path / 't.jsonl'
    trace.write_text('{}\n')
    proc = run_cli('monitor-trace', str(trace), '--properties', str(REPO / 'config' / 'properties' / 'safemanip.yaml'),
                   '--rate-hz', 'nan')
    assert proc.returncode == 2 and '--rate-hz' in proc.stderr


def test_check_refuses_an_atom_the_trace_never_gives(tmp_path):
    """A misspelt or absent name read as false gave a confident wrong verdict
    ('G a' on a trace that only has b); it is an error naming the atom and
    what the trace gives, and --absent-false restores the plain reading.
    Step lists name every atom (the others are false): no error there."""
    objects = tmp_path / 'o.jsonl'
    objects.write_text('{"b": true}\n{"b": false}\n')
    proc = run_cli('check', 'G a', str(objects))
    assert proc.returncode == 2 and proc.stderr.count('\n') == 1
    assert "o.jsonl: the formula reads 'a', which no step of the trace gives; the trace gives: b" in proc.stderr
    proc = run_cli('check', 'G a', str(objects), '--absent-false', '--json')
    assert proc.returncode == 0 and json.loads(proc.stdout)['verdicts'] == ['false', 'false']
    lists = tmp_path / 'l.jsonl'
    lists.write_text('["b"]\n[]\n')
    assert run_cli('check', 'G !a', str(lists)).returncode == 0
    batch = tmp_path / 'batch.jsonl'
    batch.write_text('[{"b": true}]\n[{"b": false}, {"b": true}]\n')
    proc = run_cli('check', 'F a', '--batch', str(batch))
    assert proc.returncode == 2 and "reads 'a'" in proc.stderr


def test_every_option_of_every_subcommand_says_what_it_does():
    """``--help`` is complete: no option or argument without a line of help."""
    import argparse

    from safemanip_ros.cli.main import build_parser

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, [*path, name])
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                yield ' '.join(path), action.option_strings or action.dest

    assert list(walk(build_parser(), [])) == []
