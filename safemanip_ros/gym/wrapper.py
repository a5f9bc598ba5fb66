"""Gymnasium wrappers that monitor an environment's propositions.

:class:`SpecMonitor` reads the propositions true after each step (from
``info["propositions"]``, SpecRLBench's convention, or a labelling function
of observation and info) and steps the monitor core on them — the very
:class:`~safemanip_ros.monitor.core.Monitor` the ROS node and the audit run,
with its devices, violation episodes and per-trigger metrics.  What it
monitors is either plain specifications (each a property that starts with
the rollout and never recovers) or a whole property suite.

Each step adds ``info["safemanip"]``:

* ``verdicts``: per instance, the four-valued verdict after this step
  (``true``, ``false``, ``presumably_true``, ``presumably_false``);
* ``events``: violation episodes opened (``{"instance", "start"}``) or
  closed (``... "end", "recovered"``) on this step;
* at the rollout's end (terminated or truncated: Gymnasium's episode),
  ``episode`` (Gymnasium's word, kept as the key): per instance its
  triggers, violations, pending obligation and unsafe frames, and per plain
  specification SpecRLBench's outcome (``success``, ``violation`` or
  ``other``, its 1-based step, accepting visits).

``terminate_on_violation`` ends the rollout when a violation opens;
``terminate_on_success`` when every finite-horizon specification is
satisfied for good (verdict ``true``), as SpecRLBench's evaluation does.
``log_path`` appends each rollout as one JSON line that ``safemanip specrl
evaluate`` reads.

:class:`SpecMonitorVector` does the same for a ``gymnasium.vector`` env:
one monitor with a rollout per sub-environment, stepped as one batch.
"""

from __future__ import annotations

import difflib
import json
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from ..ltlf.verdict import Verdict
from ..monitor.core import Monitor
from ..specrl.families import is_finite
from ..specrl.metrics import SpecTables

Labeller = Callable[[Any, Mapping[str, Any]], Iterable[str]]
TEXT = {int(v): v.text for v in Verdict}


def _specs_of(specs: Mapping[str, str] | Sequence[str] | str | None) -> dict[str, str]:
    if specs is None:
        return {}
    if isinstance(specs, str):
        return {'spec': specs}
    if isinstance(specs, Mapping):
        return dict(specs)
    return {f'spec_{k}': f for k, f in enumerate(specs)}


class _Core:
    """The monitor of a batch of rollouts, and each rollout's propositions
    for SpecRLBench's outcome at its end (shared by the single and the vector
    wrapper)."""

    def __init__(self, specs: Mapping[str, str] | Sequence[str] | str | None, suite: Sequence[str] | None,
                 batch: int, robot_config: str = '', scene: str = '') -> None:
        from ..monitor.build import build_formula_instances, build_instances
        formulas = _specs_of(specs)
        if not formulas and not suite:
            raise ValueError('give specifications (specs=...) or a property suite (suite=[...])')
        if formulas and suite:
            raise ValueError('give specifications or a property suite, not both')
        if formulas:
            iset = build_formula_instances(formulas)
        else:
            iset = build_instances(list(suite or ()), scene=scene, robot_config=robot_config)
        self.monitor = Monitor(iset, batch=batch)
        self.names = [i.instance for i in self.monitor.instances]
        self.column = {p: j for j, p in enumerate(self.monitor.predicates)}
        # Plain specifications: SpecRLBench's outcome per rollout, scored as the evaluator scores it.
        self.spec_index = [j for j, n in enumerate(self.names) if n in formulas]
        self.tables = [SpecTables.of(formulas[self.names[j]], is_finite(formulas[self.names[j]]))
                       for j in self.spec_index]
        self.finite_index = [j for j, t in zip(self.spec_index, self.tables) if t.finite]
        self.formulas = formulas
        self.batch = batch
        self._said: set[str] = set()
        self.reset()

    def reset(self, which: np.ndarray | None = None) -> None:
        which = np.ones(self.batch, bool) if which is None else which
        if which.all():
            self.monitor.reset()
            self.logged: list[list[list[str]]] = [[] for _ in range(self.batch)]
            self.verdicts = np.full((self.batch, len(self.names)), int(Verdict.PRESUMABLY_FALSE), np.int8)
        else:
            self.monitor.reset(which)
            for b in np.flatnonzero(which):
                self.logged[b] = []

    def values(self, props: Sequence[Iterable[str]]) -> np.ndarray:
        v = np.zeros((self.batch, len(self.column)), bool)
        for b, names in enumerate(props):
            for a in names:
                j = self.column.get(a)
                if j is not None:
                    v[b, j] = True
        return v

    def step(self, props: Sequence[Iterable[str]], active: np.ndarray | None = None) -> tuple[np.ndarray, list[list[dict[str, Any]]]]:
        """One step of every (active) rollout: the verdicts ``[B, D]`` and per
        rollout its events."""
        act = np.ones(self.batch, bool) if active is None else active
        for b in np.flatnonzero(act).tolist():
            self.logged[b].append(sorted(props[b]))
        res = self.monitor.step(self.values(props), active=None if active is None else act)
        self.verdicts = res.verdicts
        events: list[list[dict[str, Any]]] = [[] for _ in range(self.batch)]
        for e in res.opened:
            events[e.rollout].append({'instance': self.names[e.instance], 'start': e.start})
        for e in res.closed:
            events[e.rollout].append({'instance': self.names[e.instance], 'start': e.start, 'end': e.end,
                                      'recovered': e.recovered})
        return res.verdicts, events

    def note_unread(self, names: Iterable[str]) -> None:
        """Say once (a UserWarning) a given name that no property reads but
        that is close to one that is: most likely a misspelling, which
        would leave the atom false."""
        for name in names:
            if name in self.column or name in self._said:
                continue
            self._said.add(name)
            close = difflib.get_close_matches(name, list(self.column), n=1, cutoff=0.8)
            if close:
                warnings.warn(f'the environment gives {name!r}, which no property reads; did you mean '
                              f'{close[0]!r}? ({close[0]!r} stays false while it is not given)', stacklevel=3)

    def violation_opened(self, events: list[dict[str, Any]]) -> bool:
        return any('end' not in e for e in events)

    def satisfied(self, b: int) -> bool:
        """Every finite-horizon specification satisfied for good (its verdict
        ``true``, which no later step changes)."""
        return bool(self.finite_index) and bool((self.verdicts[b, self.finite_index] == Verdict.TRUE).all())

    def finish(self, which: np.ndarray) -> dict[int, dict[str, Any]]:
        """End the rollouts of ``which``: their rollout records."""
        results = self.monitor.finish(which)
        ending = [int(b) for b in np.flatnonzero(which)]
        # Each specification scores every ending rollout in one batch (as the evaluator does).
        scored = [tables.score(lambda table: [np.array([table.dfa.letter(s) for s in self.logged[b]], np.int64)
                                              for b in ending]) for tables in self.tables]
        out = {}
        for pos, b in enumerate(ending):
            r = results[b]
            record: dict[str, Any] = {'steps': len(self.logged[b]), 'instances': {}, 'specs': {}}
            if r is not None:
                for inst in r.instances:
                    record['instances'][inst.instance] = {
                        'triggers': inst.triggers, 'violations': inst.violations, 'pending': inst.pending,
                        'unsafe_frames': inst.unsafe_frames}
            for j, tables, outcomes in zip(self.spec_index, self.tables, scored):
                o = outcomes[pos]
                record['specs'][self.names[j]] = {'outcome': o.outcome, 'step': o.step, 'finite': tables.finite,
                                                 'accepting_visits': o.accepting_visits}
            out[b] = record
        return out


def proposition_names(given: Any, atoms: Collection[str]) -> set[str]:
    """The propositions true after one step, as the environment gave them:
    a collection of names (set, list, tuple, or a numpy array of strings),
    or a mapping name → bool, which names the environment's whole
    vocabulary, so every atom the monitor reads (``atoms``) must be one of
    its keys.

    Raises:
        ValueError: for anything else, naming what was given: a string (its
            letters are not names), a name that is not a string, a value
            that is not a boolean, an atom a mapping does not name.

    >>> sorted(proposition_names({'lava': False, 'goal': True}, ['lava', 'goal']))
    ['goal']
    """
    if isinstance(given, Mapping):
        out = set()
        for name, value in given.items():
            if not isinstance(name, str):
                raise ValueError(f'info["propositions"]: name {name!r} is not a string')
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f'info["propositions"][{name!r}] = {value!r}: expected True or False')
            if value:
                out.add(name)
        missing = sorted(a for a in atoms if a not in given)
        if missing:
            raise ValueError(f'info["propositions"] names no {missing[0]!r}, which the monitor reads; it names: '
                             f'{", ".join(sorted(map(str, given))[:20]) or "nothing"}')
        return out
    if isinstance(given, (str, bytes)):
        raise ValueError(f'info["propositions"] = {given!r:.60}: a string, not a collection of names '
                         f'(give {{{given!r:.30}}} or a list)')
    if isinstance(given, np.ndarray):
        given = given.tolist()
    if not isinstance(given, (set, frozenset, list, tuple)):
        raise ValueError(f'info["propositions"]: expected a set, list or mapping of names, got '
                         f'{type(given).__name__}')
    bad = [a for a in given if not isinstance(a, str)]
    if bad:
        raise ValueError(f'info["propositions"]: {bad[0]!r} is not a name (a string)')
    return set(given)


def _props(info: Mapping[str, Any], obs: Any, labeller: Labeller | None, atoms: Collection[str]) -> set[str]:
    if labeller is not None:
        return proposition_names(labeller(obs, info), atoms)
    if 'propositions' not in info:
        raise KeyError('the environment gives no info["propositions"]; pass labeller=(obs, info) -> names')
    return proposition_names(info['propositions'], atoms)


class SpecMonitor(gymnasium.Wrapper):
    """Monitors one environment (module docstring).  ``specs``: a formula, a
    list of formulas or a mapping name → formula; or ``suite``: property
    suite files (``scene``/``robot_config`` bind its templates)."""

    def __init__(self, env: gymnasium.Env, specs: Mapping[str, str] | Sequence[str] | str | None = None,
                 suite: Sequence[str] | None = None, labeller: Labeller | None = None,
                 terminate_on_violation: bool = False, terminate_on_success: bool = False,
                 log_path: str | Path | None = None, seed: int | str | None = None, scene: str = '',
                 robot_config: str = '') -> None:
        super().__init__(env)
        self.core = _Core(specs, suite, 1, robot_config, scene)
        self.labeller = labeller
        self.terminate_on_violation, self.terminate_on_success = terminate_on_violation, terminate_on_success
        self.log_path = Path(log_path) if log_path else None
        self.seed_label = seed
        self.rollouts = 0
        self._done = False

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        if kwargs.get('seed') is not None and self.seed_label is None:
            self.seed_label = kwargs['seed']
        self.core.reset()
        self._done = False
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        if self._done:
            raise RuntimeError('step() after the rollout ended; call reset()')
        obs, reward, terminated, truncated, info = self.env.step(action)
        props = _props(info, obs, self.labeller, self.core.column)
        self.core.note_unread(props)
        verdicts, events = self.core.step([props])
        out: dict[str, Any] = {'verdicts': {n: TEXT[int(v)] for n, v in zip(self.core.names, verdicts[0])},
                               'events': events[0]}
        if self.terminate_on_violation and self.core.violation_opened(events[0]):
            terminated = True
        if self.terminate_on_success and self.core.satisfied(0):
            terminated = True
        if terminated or truncated:
            out['episode'] = self.core.finish(np.ones(1, bool))[0]
            self._log(out['episode'])
            self._done = True
        info = dict(info, safemanip=out)
        return obs, reward, terminated, truncated, info

    def _log(self, record: dict[str, Any]) -> None:
        self.rollouts += 1
        if self.log_path is None:
            return
        line = {'episode': self.rollouts - 1, 'seed': self.seed_label, 'propositions': self.core.logged[0],
                'outcome': record['specs']}
        if len(self.core.formulas) == 1:
            (name, formula), = self.core.formulas.items()
            line.update(spec=name, formula=formula)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open('a', encoding='utf-8') as fh:
            fh.write(json.dumps(line) + '\n')


class SpecMonitorVector(gymnasium.vector.VectorWrapper):
    """Monitors every sub-environment of a vector env as one batch of the
    monitor core.  Under Gymnasium's default autoreset (next step), the step
    after a sub-environment ended is its reset: not monitored, and its
    monitor starts over.  A wrapper cannot reset a sub-environment, so here
    ``terminate_on_violation``/``terminate_on_success`` do not change
    ``terminated``: the end is reported in ``info["safemanip"]["ended"]``
    and the sub-environment's further steps are not monitored until its own
    end.  ``info["safemanip"]`` holds ``verdicts`` (``int8[n_envs,
    instances]``, Verdict values), and per sub-environment lists ``events``
    and ``episode`` (None where none ended)."""

    def __init__(self, env: gymnasium.vector.VectorEnv, specs: Mapping[str, str] | Sequence[str] | str | None = None,
                 suite: Sequence[str] | None = None, labeller: Labeller | None = None,
                 terminate_on_violation: bool = False, terminate_on_success: bool = False) -> None:
        super().__init__(env)
        self.core = _Core(specs, suite, env.num_envs)
        self.labeller = labeller
        self.terminate_on_violation, self.terminate_on_success = terminate_on_violation, terminate_on_success
        self._resetting = np.zeros(env.num_envs, bool)      # the sub-env ended last step: this step is its reset
        self._ignoring = np.zeros(env.num_envs, bool)       # ended by the wrapper, the sub-env not yet

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self.core.reset()
        self._resetting[:] = False
        self._ignoring[:] = False
        return obs, info

    def _propositions(self, obs: Any, info: Mapping[str, Any], wanted: np.ndarray) -> list[set[str]]:
        """Each sub-environment's propositions; only those of ``wanted`` are
        read (a sub-environment resetting this step gives none: under
        Gymnasium's next-step autoreset, when every one ended together the
        step's info is the reset's, with no propositions at all)."""
        n = self.num_envs
        out: list[set[str]] = [set() for _ in range(n)]
        if not wanted.any():
            return out
        atoms = self.core.column
        if self.labeller is not None:
            for b in np.flatnonzero(wanted).tolist():
                out[b] = proposition_names(
                    self.labeller(obs[b], {k: v[b] for k, v in info.items() if not k.startswith('_')}), atoms)
            return out
        given = info.get('propositions')
        if given is None:
            raise KeyError('the environments give no info["propositions"]; pass labeller=(obs, info) -> names')
        mask = info.get('_propositions')
        for b in np.flatnonzero(wanted).tolist():
            if mask is not None and not mask[b]:
                raise KeyError(f'sub-environment {b} gave no info["propositions"] on a step it took')
            out[b] = proposition_names(given[b], atoms)
            self.core.note_unread(out[b])
        return out

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        if self._resetting.any():
            self.core.reset(self._resetting.copy())
        active = ~self._resetting & ~self._ignoring
        props = self._propositions(obs, info, active)
        verdicts, events = self.core.step(props, active=active)
        inner_done = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        by_wrapper = np.zeros(self.num_envs, bool)
        for b in np.flatnonzero(active):
            by_wrapper[b] = (self.terminate_on_violation and self.core.violation_opened(events[b])) or \
                (self.terminate_on_success and self.core.satisfied(int(b)))
        ended = (inner_done | by_wrapper) & active
        episodes: list[dict[str, Any] | None] = [None] * self.num_envs
        if ended.any():
            for ended_b, record in self.core.finish(ended).items():
                episodes[ended_b] = record
        self._ignoring = (self._ignoring | (by_wrapper & active)) & ~inner_done
        self._resetting = inner_done
        info = dict(info, safemanip={'verdicts': verdicts, 'events': events, 'episode': episodes, 'ended': ended})
        return obs, rewards, terminated, truncated, info


__all__ = ['SpecMonitor', 'SpecMonitorVector', 'proposition_names']
