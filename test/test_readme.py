"""The README starts with the two commands, and its examples work as shown."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

from conftest import (
    REPO,  # noqa: E402
    run_cli,
)

README = (REPO / 'README.md').read_text()


def _blocks() -> list[str]:
    return re.findall(r'```bash\n(.*?)```', README, re.S)


def test_readme_starts_with_the_two_commands():
    first = _blocks()[0].splitlines()
    assert [line.split('#')[0].strip() for line in first] == ['make demo', 'make test']
    assert README.index('```bash') < README.index('**safemanip_ros** is')


def test_ci_runs_the_readme_test_command():
    lines = [ln for ln in (REPO / '.ci' / 'run').read_text().splitlines() if ln and not ln.startswith('#')]
    assert lines[-1] == 'exec make test'


def test_check_example_prints_what_the_readme_says(tmp_path):
    block = next(b for b in _blocks() if 'safemanip check' in b)
    printf, check, expected = block.strip().splitlines()
    m = re.match(r"printf '(.*)' > trace\.jsonl$", printf)
    (tmp_path / 'trace.jsonl').write_text(m.group(1).replace('\\n', '\n'))
    args = shlex.split(check)
    assert args[0] == '.venv/bin/safemanip'
    proc = run_cli(*args[1:], cwd=tmp_path, process=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(expected.lstrip('# '))


def test_distro_block_uses_existing_names():
    block = next(b for b in _blocks() if 'colcon build' in b)
    for exe in re.findall(r'ros2 run safemanip_ros (\w+)', block):
        assert f'{exe} = ' in (REPO / 'resource' / 'executables.txt').read_text()
    for launch in re.findall(r'ros2 launch safemanip_ros (\S+)', block):
        assert (REPO / 'launch' / launch).is_file()


def test_docs_mirror_the_normative_documents():
    shared = REPO.parent / 'shared'
    for name in ('SEMANTICS.md', 'DESIGN.md'):
        ours = (REPO / 'docs' / name).read_text().split('\n', 1)[1]
        if (shared / name).exists():
            assert ours == (shared / name).read_text(), f'docs/{name} is out of date with ../shared/{name}'


def test_property_docs_are_generated_from_the_suites():
    proc = subprocess.run([sys.executable, str(REPO / 'tools' / 'gen_property_docs.py'), '--check'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_monitor_trace_example_runs(tmp_path):
    block = next(b for b in _blocks() if 'safemanip monitor-trace' in b)
    printf, cmd = block.strip().splitlines()
    m = re.match(r"printf '(.*)' > frames\.jsonl$", printf)
    (tmp_path / 'frames.jsonl').write_text(m.group(1).replace('\\n', '\n'))
    args = [a if not a.startswith('config/') else str(REPO / a) for a in shlex.split(cmd)[1:]]
    proc = run_cli(*args, cwd=tmp_path, process=True)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith('reach_in_fixture_only_when_fully_open[fixture=microwave]'))
    assert line.split()[1:4] == ['1', '1', '2']   # N, V, U: violation episode [0, 1] closes when the gripper leaves
