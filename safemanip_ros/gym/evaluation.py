"""Rolling a policy out in LetterWorld under a monitored specification, as
SpecRLBench's evaluation does: per seed, ``trajectories`` rollouts of each
specification, each ending at success (finite-horizon), a violation or the
horizon.  The trajectories are what :func:`safemanip_ros.specrl.evaluate`
scores (and what ``log_dir`` keeps as rollout logs)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..specrl.families import Spec
from ..specrl.traces import Trajectory
from .letterworld import GreedyPolicy, LetterWorld, RandomPolicy
from .wrapper import SpecMonitor

POLICIES = ('greedy', 'greedy-ignore-avoid', 'random')


def letter_rollouts(specs: Sequence[Spec], policy: str, seeds: Sequence[int], trajectories: int,
                    horizon: int = 75, size: int = 7, log_dir: str | Path | None = None) -> list[Trajectory]:
    """Rollouts of ``policy`` (:data:`POLICIES`) for every specification and
    seed; rollout ``k`` of seed ``s`` resets the world with seed
    ``s * 100003 + k`` (the same layouts for every specification)."""
    if policy not in POLICIES:
        raise ValueError(f'unknown policy {policy!r}; known: {", ".join(POLICIES)}')
    out: list[Trajectory] = []
    for spec in specs:
        for seed in seeds:
            log = Path(log_dir) / f'seed_{seed}' / f'{spec.name}.jsonl' if log_dir else None
            env = SpecMonitor(LetterWorld(size=size, horizon=horizon), {spec.name: spec.formula},
                              terminate_on_violation=True, terminate_on_success=spec.finite, log_path=log, seed=seed)
            agent = RandomPolicy(seed) if policy == 'random' else \
                GreedyPolicy(spec.formula, avoid=policy == 'greedy', seed=seed)
            for k in range(trajectories):
                obs, info = env.reset(seed=seed * 100003 + k)
                env.seed_label = seed
                agent.reset(obs, info)
                done = False
                while not done:
                    obs, _, terminated, truncated, info = env.step(agent(obs, info))
                    done = terminated or truncated
                steps = env.core.logged[0]
                out.append(Trajectory(str(seed), tuple(frozenset(s) for s in steps), f'{spec.name}#{seed}/{k}',
                                      spec.name))
    return out


__all__ = ['POLICIES', 'letter_rollouts']
