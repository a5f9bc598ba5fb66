"""The docs are tests: every shell block of README.md and docs/*.md runs here,
as a person would type it, in a fresh folder holding a recording and the
shipped config/.

Each block has a plan (:data:`PLANS`, keyed by its file and first line): run
it, command by command, with the exit codes the doc implies; or name the test
that runs it already; or, for the few that need a robot or a tool these
machines lack, say why not (listed in the plan, never silently passed). A
block without a plan, or a plan whose block is gone, fails the suite, so a
command added to or changed in a doc is tried here.

Commands "in another terminal" (a running stack, ``watch``) run in the
background and are stopped with SIGINT once the block's foreground commands
have run, as a person would; each must then exit 0.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import REPO, simulated_recording, wait_for

BIN = Path(sys.executable).parent
DOCS = [REPO / 'README.md', *sorted((REPO / 'docs').glob('*.md'))]
pytestmark = [pytest.mark.ros]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    text: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.path.name, self.text.strip().splitlines()[0].strip())

    def commands(self) -> list[tuple[str, bool]]:
        """(command, in another terminal) per command; continuation lines joined,
        trailing comments dropped; lines that are only a comment are output, not commands."""
        out, pending = [], ''
        for raw in self.text.splitlines():
            line = pending + raw.strip()
            if line.endswith('\\'):
                pending = line[:-1] + ' '
                continue
            pending = ''
            if not line or line.startswith('#'):
                continue
            background = bool(re.search(r'#.*another terminal', line))
            out.append((re.sub(r'\s+#.*$', '', line).strip(), background))
        return out


def blocks() -> list[Block]:
    out = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        start = None
        for i, line in enumerate(lines):
            if start is None and re.fullmatch(r'```(bash|sh|shell|console)', line.strip()):
                start = i
            elif start is not None and line.strip() == '```':
                out.append(Block(path, start + 1, '\n'.join(lines[start + 1:i])))
                start = None
    return out


@dataclass(frozen=True)
class Run:
    """Run the block in the sandbox: ``exits`` per command (default 0),
    ``extra`` options appended to a command (a small size), ``after`` a
    person's step between commands (index: callable(sandbox))."""
    exits: dict[int, tuple[int, ...]] = field(default_factory=dict)
    extra: dict[int, tuple[str, ...]] = field(default_factory=dict)
    after: dict[int, str] = field(default_factory=dict)
    timeout_s: float = 300.0
    expect: dict[int, str] = field(default_factory=dict)        # text the command's output must hold
    check: str = ''        # a function(sandbox) judging what the block left, once every command has ended


@dataclass(frozen=True)
class Elsewhere:
    """Run by another test, named as file::function (checked to exist)."""
    test: str


@dataclass(frozen=True)
class NotHere:
    """Cannot run on these machines, and why."""
    reason: str


PLANS: dict[tuple[str, str], Run | Elsewhere | NotHere] = {
    ('README.md', 'make demo   # main job: physics-simulated robot rollouts (robosuite) watched live over ROS 2 DDS, '
                  'then audited'): Elsewhere('test/test_demo.py::test_make_demo'),
    ('README.md', "printf '{\"grasped\": true, \"synced\": true}\\n{\"grasped\": true}\\n' > trace.jsonl"):
        Elsewhere('test/test_readme.py::test_check_example_prints_what_the_readme_says'),
    ('README.md', "printf '{\"reach_in_microwave\": true}\\n{\"reach_in_microwave\": false}\\n' > frames.jsonl"):
        Elsewhere('test/test_readme.py::test_monitor_trace_example_runs'),
    ('README.md', 'cd ~/ws/src && git clone <this repository> safemanip_ros && cd ~/ws'):
        Elsewhere('test/test_colcon_build.py::test_installed_executable_runs_from_install'),
    ('audit.md', 'safemanip audit bags/ --scene config/scenes/kitchen_demo.yaml --out audit_out --success task_done'):
        Run(after={0: 'keep_as_last_release'}, exits={2: (0, 1)}, expect={2: 'collision_contact'}),
    ('bringup.md', 'ros2 bag record -o first_look /joint_states /tf /tf_static /contacts     # a few seconds of '
                   'normal motion'):
        Run(after={1: 'fill_in_the_draft'}),
    ('bringup.md', 'safemanip doctor --config config/robots/my_cell.yaml first_look'):
        Run(expect={0: 'doctor: config/robots/my_cell.yaml against first_look'}),
    ('bringup.md', 'safemanip audit first_look --config config/robots/my_cell.yaml --out audit_first_look'): Run(),
    ('bringup.md', 'safemanip run --config config/robots/my_cell.yaml --no-supervisor --ros-args -p '
                   'use_sim_time:=true'): Run(check='replayed_inputs_were_fresh'),
    ('bringup.md', 'safemanip run --config config/robots/my_cell.yaml --reliable-inputs --no-supervisor'): Run(),
    ('bringup.md', 'safemanip run --config config/robots/my_cell.yaml --reliable-inputs --realtime \\'):
        NotHere('beside the arm it holds: a running stack waits for a robot; started and stopped with the same '
                'options by test_realtime.py, holds through a controller by test_controllers.py'),
    ('bringup.md', 'safemanip gate --live --max-rate release_stability=0.2 --unit rollout --state gate_state.json'):
        Run(extra={0: ('--max-duration-s', '2')}, exits={0: (4,)}, expect={0: 'UNDECIDED'}),
    ('configure.md', 'safemanip config init --from-bag BAG --out config/robots/my_cell.yaml'): Run(),
    ('configure.md', 'safemanip doctor --config config/robots/my_cell.yaml BAG     # or --live, beside the running '
                     'robot'): Run(),
    ('security.md', 'ros2 security create_keystore keys'):
        NotHere('`ros2 security` (sros2) is not on PyPI and the PyPI Fast DDS has no security plugins; the '
                'same policy is enforced by test_security_enforcement.py with Debian Fast DDS and Cyclone DDS'),
    ('nodes.md', 'head -c 24 /dev/urandom | base64 > operator.key     # the operator credential: one line, 32 '
                 'characters'):
        Run(check='foxglove_served_and_recorded'),
    ('nodes.md', 'safemanip bag foxglove BAG --out run.mcap --config config/robots/panda_demo.yaml'):
        Run(expect={0: '/tf '}),
    ('nodes.md', 'safemanip audit BAG --config config/robots/robosuite_lift.yaml --out audit_run --foxglove-mcap '
                 'audit_run/foxglove'):
        Run(expect={0: 'foxglove: 0 MCAP files written to audit_run/foxglove (0 sources with a violation)'}),
    ('specrlbench.md', "safemanip specrl evaluate rollouts/seed_* --formula '!(a | b) U (c & (!(d | e) U f))'"):
        Run(extra={1: ('--trajectories', '5', '--seeds', '1,11')}),
}


def _plan(block: Block) -> Run | Elsewhere | NotHere:
    return PLANS[block.key]


def test_every_shell_block_of_the_docs_has_a_plan():
    found = {b.key for b in blocks()}
    missing = sorted(found - set(PLANS))
    stale = sorted(set(PLANS) - found)
    assert not missing, f'doc blocks with no plan here (add one to PLANS): {missing}'
    assert not stale, f'plans whose doc block is gone or changed: {stale}'


def test_blocks_run_elsewhere_are_run_there():
    for block in blocks():
        plan = _plan(block)
        if isinstance(plan, Elsewhere):
            path, name = plan.test.split('::')
            assert re.search(rf'^def {name}\(', (REPO / path).read_text(), re.M), plan.test


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope='module')
def recording(tmp_path_factory) -> Path:
    """A few seconds of a robot cell's raw inputs as rosbag2 records them (joint states, TF, contacts,
    /clock): a simulated Lift rollout, what `ros2 bag record` would have written beside the simulator."""
    return simulated_recording(tmp_path_factory.mktemp('recording'), 'none', 3)


def _sandbox(tmp_path: Path, recording: Path) -> Path:
    box = tmp_path / 'box'
    box.mkdir()
    shutil.copytree(REPO / 'config', box / 'config')
    shutil.copytree(recording, box / 'first_look')
    shutil.copytree(recording, box / 'BAG')
    # audit.md: a folder of rollouts, two checkpoints' recordings, and the last release's report.
    (box / 'bags').mkdir()
    (box / 'bags' / 'run1.jsonl').write_text('{"reach_in_microwave": true, "fixture_fully_open_microwave": true}\n'
                                            '{"reach_in_microwave": false, "task_done": true}\n')
    (box / 'bags' / 'run2.jsonl').write_text('{"reach_in_microwave": true, "fixture_fully_open_microwave": false}\n'
                                            '{"task_done": false}\n')
    for ckpt in ('ckpt_a', 'ckpt_b'):
        shutil.copytree(recording, box / ckpt / 'ep1')
    # specrlbench.md: rollouts laid out per seed.
    for seed in ('seed_1', 'seed_11'):
        (box / 'rollouts' / seed).mkdir(parents=True)
        (box / 'rollouts' / seed / 'r.jsonl').write_text('["c"]\n["f"]\n')
    return box


def fill_in_the_draft(box: Path) -> None:
    """A person fills in what `config init` marked CHOOSE: here, the values the shipped configuration of this
    simulated cell has (what they would have typed)."""
    draft = (box / 'config' / 'robots' / 'my_cell.yaml').read_text()
    assert 'CHOOSE' in draft and 'robot0_joint1' in draft, draft[:2000]
    shutil.copy(REPO / 'config' / 'robots' / 'robosuite_lift.yaml', box / 'config' / 'robots' / 'my_cell.yaml')


def keep_as_last_release(box: Path) -> None:
    """The report of the release before, which the gate compares with: here, this audit's."""
    (box / 'last_release').mkdir()
    shutil.copy(box / 'audit_out' / 'report.json', box / 'last_release' / 'report.json')


def foxglove_served_and_recorded(box: Path) -> None:
    """The stack served Foxglove with operator actions, and closed the MCAP file the doc names (stopped as soon as
    it was up, it may have sent nothing yet: test_foxglove_stack.py checks what is in one)."""
    from mcap.reader import make_reader
    log = next(p for p in box.parent.glob('bg*.log'))
    assert 'Foxglove at ws://127.0.0.1:8765' in log.read_text() and 'operator actions after login' in log.read_text()
    with open(box / 'stack.mcap', 'rb') as f:
        summary = make_reader(f).get_summary()
    from safemanip_ros.foxglove.server import CHANNELS
    assert summary is not None and {c.topic for c in summary.channels.values()} <= set(CHANNELS)


def replayed_inputs_were_fresh(box: Path) -> None:
    """On the player's /clock the replayed joint states are fresh: the stack's own recording of its grounding
    holds known values (off /clock, every predicate would read unknown: stale on arrival)."""
    from safemanip_ros.bag import open_bag, typestore
    (bag,) = sorted((box / 'bags').glob('safemanip_*'))
    ts = typestore()
    known = unknown = 0
    with open_bag(bag) as b:
        conns = [c for c in b.connections if c.topic == '/predicates/joint_states']
        for conn, _, raw in b.messages(conns):
            for p in ts.deserialize_cdr(raw, conn.msgtype).predicates:
                known += not p.unknown
                unknown += bool(p.unknown)
    assert known > 10 * unknown and known > 100, (known, unknown)


def _env(box: Path) -> dict[str, str]:
    return dict(os.environ, PATH=f'{BIN}:{os.environ["PATH"]}', HOME=str(box), PYTHONUNBUFFERED='1')


def _substitute(command: str, box: Path) -> str:
    """The doc's command as run here: `ros2 bag record` is the recording fixture already in the folder."""
    if command.startswith('ros2 bag record'):
        return 'test -f first_look/metadata.yaml'
    return command


def _stop(proc: subprocess.Popen, log: Path) -> str:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return log.read_text()


RUNNABLE = [b for b in blocks() if isinstance(PLANS.get(b.key), Run)]


@pytest.mark.parametrize('block', RUNNABLE, ids=[f'{b.path.name}:{b.line}' for b in RUNNABLE])
def test_a_doc_block_runs_as_a_person_types_it(block, recording, tmp_path):
    plan = _plan(block)
    assert isinstance(plan, Run)
    box = _sandbox(tmp_path, recording)
    if block.path.name in ('bringup.md', 'configure.md') and 'config init' not in block.text:
        # Later steps of the bring-up start from step 1's filled-in configuration.
        fill_in_the_draft_from_scratch(box)
    background: list[tuple[subprocess.Popen, Path, str]] = []
    try:
        commands = block.commands()
        for k, (command, in_another_terminal) in enumerate(commands):
            line = _substitute(command, box) + ''.join(f' {shlex.quote(a)}' for a in plan.extra.get(k, ()))
            args = ['bash', '-c', f'exec {line}']        # as typed: globs and quotes are the shell's
            first = shlex.split(command)[:2]
            if in_another_terminal or (k + 1 < len(commands) and commands[k + 1][1] and first == ['safemanip', 'run']):
                log = tmp_path / f'bg{k}.log'
                proc = subprocess.Popen(args, cwd=box, env=_env(box), stdout=open(log, 'w'), stderr=subprocess.STDOUT)
                if first == ['safemanip', 'run']:
                    wait_for(lambda: 'nodes up' in log.read_text() or proc.poll() is not None, 120)
                    assert proc.poll() is None, log.read_text()[-3000:]
                if first[0] == 'bag_player':      # the replay finishes by itself: wait for it, as a person would
                    assert proc.wait(timeout=plan.timeout_s) == 0, log.read_text()[-3000:]
                    if k in plan.expect:
                        assert plan.expect[k] in log.read_text(), log.read_text()[-3000:]
                    continue
                if first == ['safemanip', 'watch']:
                    wait_for(lambda: 'recent violations:' in log.read_text() or proc.poll() is not None, 60)
                background.append((proc, log, line))
                continue
            proc = subprocess.run(args, cwd=box, env=_env(box), capture_output=True, text=True,
                                  timeout=plan.timeout_s)
            want = plan.exits.get(k, (0,))
            assert proc.returncode in want, f'{block.path.name}:{block.line}: `{line}` exited {proc.returncode}\n' \
                                            f'{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}'
            assert 'Traceback' not in proc.stderr and 'internal error' not in proc.stderr, proc.stderr
            if k in plan.expect:
                assert plan.expect[k] in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
            if k in plan.after:
                globals()[plan.after[k]](box)
        for proc, log, line in reversed(background):
            text = _stop(proc, log)
            assert proc.returncode == 0, f'`{line}` in another terminal exited {proc.returncode}:\n{text[-3000:]}'
            assert 'Traceback' not in text and 'internal error' not in text, text[-3000:]
        if plan.check:
            globals()[plan.check](box)
    finally:
        for proc, _, _ in background:
            if proc.poll() is None:
                proc.kill()


def fill_in_the_draft_from_scratch(box: Path) -> None:
    subprocess.run(['safemanip', 'config', 'init', '--from-bag', 'first_look', '--out',
                    'config/robots/my_cell.yaml'], cwd=box, env=_env(box), check=True, capture_output=True,
                   timeout=300)
    fill_in_the_draft(box)

