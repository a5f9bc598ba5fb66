"""SpecRLBench's evaluation and the Gymnasium wrappers: known outcomes on
constructed LetterWorld layouts, verdicts step by step equal to ``safemanip
check``, the vector wrapper equal to single environments, the accepting-visit
count, bags as input, the physics environment and the Ray engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from safemanip_ros.gym import GreedyPolicy, LetterWorld, RandomPolicy, SpecMonitor, SpecMonitorVector, rollout
from safemanip_ros.ltlf.cache import compile_cached
from safemanip_ros.ltlf.runtime import StepTable
from safemanip_ros.specrl import families
from safemanip_ros.specrl.evaluate import evaluate
from safemanip_ros.specrl.families import Spec
from safemanip_ros.specrl.metrics import conjuncts, outcomes
from safemanip_ros.specrl.traces import Trajectory, load

SAFEMANIP = [sys.executable, '-m', 'safemanip_ros.cli.main']
# b two cells right of the start, a between them: the straight path violates `!a U b`; around the torus
# (three steps left) it does not.
LAYOUT = {'a': [(0, 1)], 'b': [(0, 2)], 'c': [(3, 3)]}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*SAFEMANIP, *args], capture_output=True, text=True, timeout=300)


def run_logged(formula: str, policy, path: Path, rollouts: int = 1, seed: int = 0, **env) -> list[dict]:
    """Rollouts of ``policy`` in a wrapped LetterWorld, logged to ``path``; each step's wrapper info."""
    w = SpecMonitor(LetterWorld(**env), {'spec': formula}, terminate_on_violation=True,
                    terminate_on_success=families.is_finite(formula), log_path=path, seed=seed)
    infos = []
    for k in range(rollouts):
        obs, info = w.reset(seed=seed * 1000 + k)
        policy.reset(obs, info)
        done = False
        while not done:
            obs, _, terminated, truncated, info = w.step(policy(obs, info))
            infos.append(info['safemanip'])
            done = terminated or truncated
    return infos


@pytest.mark.parametrize('avoid, expected', [
    (True, {'success_rate': 1.0, 'violation_rate': 0.0, 'others_rate': 0.0, 'mean_steps_to_success': 3.0}),
    (False, {'success_rate': 0.0, 'violation_rate': 1.0, 'others_rate': 0.0, 'mean_steps_to_success': None}),
])
def test_greedy_policies_have_known_rates_on_a_constructed_layout(tmp_path, avoid, expected):
    log = tmp_path / 'seed_1' / 'rollouts.jsonl'
    run_logged('!a U b', GreedyPolicy('!a U b', avoid=avoid), log, rollouts=4, seed=1, size=5, layout=LAYOUT,
               start=(0, 0))
    out = cli('specrl', 'evaluate', str(log), '--formula', '!a U b', '--json')
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout.splitlines()[-1])
    assert {k: row[k] for k in expected} == expected and row['trajectories'] == 4


def test_reach_only_and_the_horizon(tmp_path):
    """`F c` is reached in 4 steps (two up, two left, around the 5 x 5 torus);
    with a horizon of 3 it is not: others."""
    for horizon, (rates, steps) in ((10, ((1.0, 0.0, 0.0), 4.0)), (3, ((0.0, 0.0, 1.0), None))):
        log = tmp_path / f'h{horizon}.jsonl'
        run_logged('F c', GreedyPolicy('F c'), log, size=5, layout=LAYOUT, start=(0, 0), horizon=horizon)
        (row,) = evaluate([Spec('reach', 'F c', True, 'x')], load([log], ['c']))
        assert (row.stat('success_rate')[0], row.stat('violation_rate')[0], row.stat('others_rate')[0]) == rates
        assert row.stat('mean_steps_to_success')[0] == steps


@pytest.mark.parametrize('formula', ['!(a | b) U (c & (!(d | e) U f))', 'F (a & F (b & F c))',
                                     'G F a & G (a -> F b) & G !(c | d)', 'F G e & G !f'])
def test_wrapper_and_evaluator_agree_with_safemanip_check_step_by_step(tmp_path, formula):
    """Random walks in random worlds: the wrapper's verdict after every step
    is `safemanip check`'s on the logged trace, and the evaluator's outcome
    is where check's verdict first becomes true or false."""
    log = tmp_path / 'log.jsonl'
    infos = run_logged(formula, RandomPolicy(7), log, rollouts=6, seed=3)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    batch = tmp_path / 'batch.jsonl'
    batch.write_text(''.join(json.dumps(r['propositions']) + '\n' for r in records))
    out = cli('check', formula, '--batch', str(batch), '--json', '--absent-false')
    assert out.returncode == 0, out.stderr
    checked = [json.loads(line)['verdicts'] for line in out.stdout.splitlines()]
    assert [i['verdicts']['spec'] for i in infos] == [v for vs in checked for v in vs]
    finite = families.is_finite(formula)
    for record, verdicts in zip(records, checked):
        first = {v: verdicts.index(v) + 1 for v in ('true', 'false') if v in verdicts}
        if finite and 'true' in first:
            assert record['outcome']['spec'] == {**record['outcome']['spec'], 'outcome': 'success', 'step': first['true']}
        elif 'false' in first:
            assert record['outcome']['spec']['outcome'] == 'violation' and record['outcome']['spec']['step'] == first['false']
        else:
            assert record['outcome']['spec']['outcome'] == 'other'
    (row,) = evaluate([Spec('spec', formula, finite, 'x')], load([log], sorted(compile_cached(formula).atoms)))
    n_viol = sum(r['outcome']['spec']['outcome'] == 'violation' for r in records)
    assert row.seeds[0].violation_rate == n_viol / len(records)


def test_the_vector_wrapper_equals_single_environments():
    formula = '!(a | b) U (c & F d)'
    n, steps = 4, 200
    vec = SpecMonitorVector(gymnasium.vector.SyncVectorEnv([lambda: LetterWorld(horizon=30) for _ in range(n)]),
                            {'spec': formula})
    vec.reset(seed=[10, 11, 12, 13])
    rng = np.random.default_rng(0)
    actions = rng.integers(4, size=(steps, n))
    rollouts: list[list[dict]] = [[] for _ in range(n)]
    for t in range(steps):
        _, _, term, trunc, info = vec.step(actions[t])
        for b in range(n):
            rollouts[b] += [info['safemanip']['episode'][b]] if info['safemanip']['episode'][b] else []
    # The same actions in single environments (horizon 30; the step after an end is the reset).
    for b in range(n):
        env = SpecMonitor(LetterWorld(horizon=30), {'spec': formula})
        env.reset(seed=10 + b)
        singles, t = [], 0
        while t < steps:
            _, _, term, trunc, info = env.step(actions[t, b])
            t += 1
            if term or trunc:
                singles.append(info['safemanip']['episode'])
                t += 1                # the vector env spends this action on its autoreset
                env.reset()
        assert [e['specs'] for e in rollouts[b]] == [e['specs'] for e in singles]
        assert len(singles) >= 6


def test_accepting_visits_count_rounds_until_a_violation():
    formula = 'G F a & G F b & G !c'
    table = StepTable.from_dfa(compile_cached(formula))
    parts = [StepTable.from_dfa(compile_cached(c)) for c in conjuncts(formula)]
    assert sorted(conjuncts(formula)) == ['G !c', 'G F a', 'G F b']

    def letters(tab: StepTable, steps: list[set[str]]) -> np.ndarray:
        return np.array([tab.dfa.letter(s) for s in steps], np.int64)
    traces = [[{'a'}, set(), {'b'}, {'a'}, {'a'}, {'b'}, set()],     # rounds complete at steps 3 and 6
              [{'a'}, {'b'}, {'c'}, {'a'}, {'b'}],                     # one round, then a violation
              [{'b'}] * 5]                                             # never a
    out = outcomes(table, [letters(table, s) for s in traces], False,
                   [(p, [letters(p, s) for s in traces]) for p in parts])
    assert [(o.outcome, o.step, o.accepting_visits) for o in out] == [('other', None, 2), ('violation', 3, 1),
                                                                      ('other', None, 0)]


def test_families_compile_and_sampling_is_seeded():
    specs = families.paper_set(seed=0, per_cell=1)
    assert len(specs) == sum(n for _, n, _ in families.families()) + 2 * 9 * 3
    assert families.paper_set(seed=0, per_cell=1) == specs and families.paper_set(seed=1, per_cell=1) != specs
    for s in specs:
        assert families.is_finite(s.formula) == s.finite, s
    for s in specs[::7]:
        compile_cached(s.formula)
    ra = families.sample('letter_reach_avoid', 2, 5, n_seq=10, n_disj=1)
    assert all(f.formula.count(' U ') == 10 for f in ra)


def test_a_predicate_bag_is_a_trajectory_source(tmp_path):
    from test_bad_input import _predicate_bag
    _predicate_bag(tmp_path / 'seed_1' / 'ep0', ['a', 'b'], frames=20)     # both false, then true from frame 10
    (row,) = evaluate([Spec('s', 'F (a & b)', True, 'x')], load([tmp_path / 'seed_1'], ['a', 'b']))
    assert row.seeds[0].seed == 'seed_1' and row.seeds[0].success_rate == 1.0
    assert row.seeds[0].mean_steps_to_success == 11.0


@pytest.mark.slow
def test_user_errors_are_one_line(tmp_path):
    (tmp_path / 'file').write_text('')
    live = ['specrl', 'evaluate', '--env', 'letter', '--formula', 'F a', '--seeds', '1', '--trajectories', '1']
    for args, words in ((['specrl', 'evaluate', '--family', 'nope', str(tmp_path)], 'unknown family'),
                        (['specrl', 'evaluate', '--formula', 'F (a &', str(tmp_path)], 'position'),
                        (['specrl', 'evaluate', '--formula', 'F a', str(tmp_path / 'missing')], 'no such file'),
                        (['specrl', 'evaluate', '--formula', 'F a'], 'give TRACES'),
                        ([*live, '--log-dir', str(tmp_path / 'file')], 'not a folder'),
                        ([*live, '--log-dir', '/proc/none/logs'], 'cannot write there'),
                        ([*live, '--horizon', '100000000'], 'in 1..100000'),
                        ([*live, '--rate-hz', '0'], '--rate-hz 0.0'),
                        ([*live, '--workers', '0'], '--workers 0')):
        out = cli(*args)
        assert out.returncode == 2 and words in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.slow
def test_live_letter_evaluation_prints_the_table_and_json():
    out = cli('specrl', 'evaluate', '--env', 'letter', '--family', 'letter_ind', '--family', 'letter_rec',
              '--trajectories', '5', '--seeds', '1,11')
    assert out.returncode == 0, out.stderr
    assert 'ηs ↑' in out.stdout and 'µacc ↑' in out.stdout and 'letter_rec_03' in out.stdout
    out = cli('specrl', 'evaluate', '--env', 'letter', '--family', 'letter_ind', '--trajectories', '5',
              '--seeds', '1,11', '--json')
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    assert len(lines) == 4 * 3          # two seeds and the aggregate per specification
    for line in lines:
        assert {'success_rate', 'violation_rate', 'others_rate', 'mean_steps_to_success', 'trajectories'} <= set(line)
        assert abs(line['success_rate'] + line['violation_rate'] + line['others_rate'] - 1) < 1e-9


def test_a_property_suite_runs_in_the_wrapper():
    suite = str(Path(__file__).resolve().parents[1] / 'config' / 'properties' / 'specrlbench.yaml')
    env = SpecMonitor(LetterWorld(), suite=[suite])
    env.reset(seed=4)
    rng = np.random.default_rng(1)
    done, opened = False, 0
    while not done:
        _, _, term, trunc, info = env.step(int(rng.integers(4)))
        opened += sum('end' not in e for e in info['safemanip']['events'])
        done = term or trunc
    rollout = info['safemanip']['episode']
    assert 'letter_01' in info['safemanip']['verdicts'] and 'letter_01' in rollout['instances']
    assert sum(i['violations'] for i in rollout['instances'].values()) == opened


@pytest.mark.slow
def test_the_physics_environment_is_labelled_and_monitored():
    from safemanip_ros.gym.lift import LiftEnv, ScriptedLift
    base = LiftEnv(horizon=300)
    formula = '!dropped U (lifted & (!dropped U on_table))'
    env = SpecMonitor(base, formula, terminate_on_success=True, terminate_on_violation=True)
    try:
        got = {}
        for fault in ('none', 'midair_drop'):
            policy = ScriptedLift(base, fault, seed=3)
            obs, info = env.reset(seed=3)
            policy.reset(obs, info)
            done = False
            while not done:
                obs, _, term, trunc, info = env.step(policy(obs, info))
                done = term or trunc
            got[fault] = info['safemanip']['episode']['specs']['spec']['outcome']
        assert got == {'none': 'success', 'midair_drop': 'violation'}
    finally:
        base.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_ray_engine_gives_the_local_numbers():
    specs = families.select(['letter_ind', 'letter_rsp'])
    rng = np.random.default_rng(0)
    trajectories = [Trajectory(str(s), tuple(frozenset({str(rng.choice(list('abcdefghijkl')))}) if rng.random() < .3
                                             else frozenset() for _ in range(40)), 'x') for s in (1, 11) for _ in range(30)]
    local = [r.as_dict() for r in evaluate(specs, trajectories)]
    import ray
    try:
        remote = [r.as_dict() for r in evaluate(specs, trajectories, engine='ray', workers=2)]
    finally:
        ray.shutdown()
    assert remote == local


def test_rollout_helper_runs_a_registered_environment():
    env = SpecMonitor(gymnasium.make('safemanip/LetterWorld-v0', horizon=10), 'F a')
    rollout(env, RandomPolicy(0), seed=2)
    assert env.rollouts == 1


class _OwnEnv(gymnasium.Env):
    """An environment of a user's own, as an RL researcher writes it: ``propositions`` given on steps
    only (not on reset), in the form ``kind`` ('set', 'dict', 'str'); lava on step 2, goal on step 3, ends there."""

    observation_space = gymnasium.spaces.Discrete(4)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, kind: str = 'set') -> None:
        self.kind, self.t = kind, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        self.t += 1
        true = {'lava'} if self.t == 2 else {'goal'} if self.t == 3 else set()
        given = {'set': true, 'dict': {'lava': 'lava' in true, 'goal': 'goal' in true},
                 'str': ''.join(sorted(true)) or 'none'}[self.kind]
        return self.t, 0.0, self.t == 3, False, {'propositions': given}


def _outcome(kind: str, formula: str = 'G !lava & F goal') -> dict:
    env = SpecMonitor(_OwnEnv(kind), {'spec': formula})
    env.reset(seed=0)
    done, info = False, {}
    while not done:
        _, _, term, trunc, info = env.step(0)
        done = term or trunc
    return info['safemanip']['episode']['specs']['spec']


def test_an_environments_propositions_are_read_as_given_never_guessed():
    """`set(info["propositions"])` read {"lava": False} as lava true and a string as its letters."""
    assert _outcome('set')['outcome'] == 'violation' and _outcome('dict')['outcome'] == 'violation'
    assert _outcome('dict', 'F goal')['outcome'] == 'success'          # {"goal": False} on steps 1-2 read false
    assert _outcome('dict', 'F goal')['step'] == 3
    env = SpecMonitor(_OwnEnv('dict'), {'spec': 'G !lava2'})
    env.reset()
    with pytest.raises(ValueError, match="names no 'lava2', which the monitor reads; it names: goal, lava"):
        env.step(0)
    env = SpecMonitor(_OwnEnv('str'), {'spec': 'G !a'})
    env.reset()
    with pytest.raises(ValueError, match="a string, not a collection of names"):
        env.step(0)
    env = SpecMonitor(_OwnEnv('set'), {'spec': 'F goall'})
    env.reset()
    with pytest.warns(UserWarning, match="gives 'goal', which no property reads; did you mean 'goall'"):
        for _ in range(3):
            env.step(0)
    from safemanip_ros.gym.wrapper import proposition_names
    for bad, words in (({'a': 1}, 'expected True or False'), ([1], 'is not a name'), (5, 'got int'),
                       ({1: True}, 'is not a string')):
        with pytest.raises(ValueError, match=words):
            proposition_names(bad, ['a'])


def test_the_vector_wrapper_takes_gymnasiums_autoreset_when_every_environment_ends_together():
    """Every sub-environment ends on step 3: the next step is all resets, whose info has no propositions
    (KeyError before). Each rollout is scored as a single environment scores it."""
    vec = SpecMonitorVector(gymnasium.vector.SyncVectorEnv([lambda: _OwnEnv('set') for _ in range(3)]),
                            {'spec': 'G !lava & F goal'})
    vec.reset(seed=0)
    ended = []
    for _ in range(12):               # three rollouts of 3 steps, each followed by its reset step
        info = vec.step(np.zeros(3, np.int64))[4]
        ended += [e['specs']['spec']['outcome'] for e in info['safemanip']['episode'] if e is not None]
    assert ended == ['violation'] * 9


@pytest.mark.slow
def test_specrl_evaluate_counts_each_trajectory_once_and_refuses_what_it_would_guess(tmp_path):
    s1 = tmp_path / 's1'
    s1.mkdir()
    (s1 / 'a.jsonl').write_text('[]\n["goal"]\n')
    (s1 / 'b.jsonl').write_text('["lava"]\n')
    once = cli('specrl', 'evaluate', '--formula', 'F goal', str(s1), '--json')
    twice = cli('specrl', 'evaluate', '--formula', 'F goal', str(s1), f'{s1}/', str(s1 / 'a.jsonl'), '--json')
    assert once.returncode == twice.returncode == 0, twice.stderr
    assert json.loads(once.stdout)['success_rate'] == 0.5 and json.loads(twice.stdout) == json.loads(once.stdout)
    assert 'again (as' in twice.stderr and 'read once' in twice.stderr
    seeds = cli('specrl', 'evaluate', '--env', 'letter', '--formula', 'F a', '--seeds', '1,1', '--trajectories', '1')
    assert seeds.returncode == 2 and '--seeds 1,1: seed 1 given more than once' in seeds.stderr, seeds.stderr
    objects = tmp_path / 'objects.jsonl'
    objects.write_text('{"goal": false}\n{"goal": true}\n')
    typo = cli('specrl', 'evaluate', '--formula', 'F goal & G !lava', str(objects))
    assert typo.returncode == 2 and "the formula reads 'lava', which no step of the trace gives" in typo.stderr
    assert cli('specrl', 'evaluate', '--formula', 'F goal & G !lava', str(objects), '--absent-false').returncode == 0
