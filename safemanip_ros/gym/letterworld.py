"""LetterWorld (SpecRLBench's Letter domain) as a Gymnasium environment, and
simple seeded policies for it.

A ``size × size`` grid that wraps around at its edges; each of the twelve
letters ``a``–``l`` lies on ``copies`` (2) random cells, the agent starts on
a random empty cell; actions 0–3 move up, right, down, left; the rollout is
truncated after ``horizon`` (75) steps.  The observation is the grid as
``uint8[size, size, letters + 1]`` (one channel per letter, the last marks
the agent); ``info["propositions"]`` is the set of letters under the agent
(SpecRLBench's convention).  A fixed ``layout`` (letter → cells) and
``start`` build a constructed world whose outcomes are known.

Policies read the specification's DFA and the propositions seen so far:

* :class:`RandomPolicy` — uniform moves;
* :class:`GreedyPolicy` — a shortest path on the torus to the nearest
  letter that brings the specification closer to satisfied (fewer letters to
  go in its DFA; for an infinite-horizon specification, closer to meeting a
  conjunct not yet met this round, as the accepting-visit count of
  :mod:`safemanip_ros.specrl.metrics` counts rounds), walking around letters
  that would violate it; ``avoid=False`` walks straight through them (greedy
  that ignores the avoid letters).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium
import numpy as np

from ..ltlf.cache import compile_cached
from ..ltlf.dfa import DFA
from ..ltlf.verdict import Verdict
from ..specrl.families import LETTERS, is_finite
from ..specrl.metrics import advance_rounds, conjuncts

MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))      # up, right, down, left (row, column)


class LetterWorld(gymnasium.Env):
    """SpecRLBench's Letter environment (module docstring)."""

    metadata = {'render_modes': ['ansi']}

    def __init__(self, size: int = 7, letters: tuple[str, ...] = LETTERS, copies: int = 2, horizon: int = 75,
                 layout: dict[str, list[tuple[int, int]]] | None = None, start: tuple[int, int] | None = None,
                 render_mode: str | None = None) -> None:
        if size < 2 or horizon < 1 or copies < 1:
            raise ValueError(f'size {size} >= 2, copies {copies} >= 1 and horizon {horizon} >= 1 needed')
        if layout is None and len(letters) * copies >= size * size:
            raise ValueError(f'{len(letters)} letters x {copies} copies do not fit a {size}x{size} grid with the agent')
        self.size, self.letters, self.copies, self.horizon = size, tuple(letters), copies, horizon
        self.fixed_layout, self.fixed_start = layout, start
        self.render_mode = render_mode
        self.observation_space = gymnasium.spaces.Box(0, 1, (size, size, len(self.letters) + 1), np.uint8)
        self.action_space = gymnasium.spaces.Discrete(4)
        self.grid: dict[tuple[int, int], str] = {}
        self.agent = (0, 0)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        rng = self.np_random
        n = self.size
        if self.fixed_layout is not None:
            self.grid = {tuple(c): letter for letter, cells in self.fixed_layout.items() for c in cells}  # type: ignore[misc]
        else:
            cells = rng.permutation(n * n)[:len(self.letters) * self.copies]
            self.grid = {(int(c) // n, int(c) % n): self.letters[k // self.copies] for k, c in enumerate(cells)}
        if self.fixed_start is not None:
            self.agent = self.fixed_start
        else:
            free = [(r, c) for r in range(n) for c in range(n) if (r, c) not in self.grid]
            self.agent = free[int(rng.integers(len(free)))]
        self.t = 0
        return self._obs(), {'propositions': self._props()}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        dr, dc = MOVES[int(action)]
        self.agent = ((self.agent[0] + dr) % self.size, (self.agent[1] + dc) % self.size)
        self.t += 1
        return self._obs(), 0.0, False, self.t >= self.horizon, {'propositions': self._props()}

    def _props(self) -> set[str]:
        letter = self.grid.get(self.agent)
        return {letter} if letter else set()

    def _obs(self) -> np.ndarray:
        obs = np.zeros((self.size, self.size, len(self.letters) + 1), np.uint8)
        index = {x: j for j, x in enumerate(self.letters)}
        for (r, c), letter in self.grid.items():
            if letter in index:
                obs[r, c, index[letter]] = 1
        obs[self.agent[0], self.agent[1], -1] = 1
        return obs

    def render(self) -> str:
        rows = []
        for r in range(self.size):
            rows.append(' '.join('@' if (r, c) == self.agent else self.grid.get((r, c), '.') for c in range(self.size)))
        return '\n'.join(rows)


def _grid_of(obs: np.ndarray, letters: tuple[str, ...]) -> tuple[dict[tuple[int, int], str], tuple[int, int]]:
    grid = {(int(r), int(c)): letters[int(j)] for r, c, j in zip(*np.nonzero(obs[:, :, :-1]))}
    ar, ac = np.argwhere(obs[:, :, -1])[0]
    return grid, (int(ar), int(ac))


def _moves(dfa: DFA, letters: tuple[str, ...]) -> dict[str, list[int]]:
    """Per letter, each state's successor on a step holding only that letter;
    ``''``: on an empty step."""
    out = {x: [dfa.step(s, dfa.letter({x})) for s in dfa.states] for x in letters}
    out[''] = [dfa.step(s, 0) for s in dfa.states]
    return out


def _distances(dfa: DFA, moves: dict[str, list[int]], goal: list[bool]) -> list[float]:
    """Steps of one letter (or none) from each state to a goal state."""
    dist = [0.0 if g else float('inf') for g in goal]
    changed = True
    while changed:
        changed = False
        for s in dfa.states:
            for nxt in (m[s] for m in moves.values()):
                if dist[nxt] + 1 < dist[s]:
                    dist[s], changed = dist[nxt] + 1, True
    return dist


class RandomPolicy:
    """Uniform random moves (seeded)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self, obs: np.ndarray, info: dict[str, Any]) -> None:
        pass

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        return int(self.rng.integers(4))


class GreedyPolicy:
    """Towards the nearest letter that progresses the specification's DFA
    (module docstring); ``avoid``: walk around letters that violate it."""

    def __init__(self, formula: str, avoid: bool = True, letters: tuple[str, ...] = LETTERS, seed: int = 0) -> None:
        self.dfa: DFA = compile_cached(formula)
        self.avoid, self.letters = avoid, letters
        self.rng = np.random.default_rng(seed)
        self.finite = is_finite(formula)
        self.moves = _moves(self.dfa, letters)
        # Finite: letters to go to a state satisfied for good.  Infinite: per conjunct, to its accepting states.
        self.distance = _distances(self.dfa, self.moves, [lab == Verdict.TRUE for lab in self.dfa.labels])
        self.parts = []
        if not self.finite:
            for text in conjuncts(formula):
                dfa = compile_cached(text)
                moves = _moves(dfa, letters)
                self.parts.append((dfa, moves, _distances(dfa, moves, list(dfa.accepting))))
        self.reset(None, {})

    def reset(self, obs: np.ndarray | None, info: dict[str, Any]) -> None:
        self.state = self.dfa.initial
        self.part_states = [dfa.initial for dfa, _, _ in self.parts]
        self.met = np.zeros((1, len(self.parts)), bool)      # conjuncts met this round (specrl.metrics)
        self._fresh = True

    def _observe(self, props: set[str]) -> None:
        self.state = self.dfa.step(self.state, self.dfa.letter(props))
        for j, (dfa, _, _) in enumerate(self.parts):
            self.part_states[j] = dfa.step(self.part_states[j], dfa.letter(props))
        reached = np.array([[dfa.accepting[s] for (dfa, _, _), s in zip(self.parts, self.part_states)]], bool)
        advance_rounds(self.met, reached)

    def _targets(self, dead: set[str]) -> set[str]:
        s = self.state
        if self.finite:
            d = self.distance
            return {x for x in self.letters if x not in dead and d[self.moves[x][s]] < d[s]}
        out = set()
        for j, (_, moves, d) in enumerate(self.parts):
            if not self.met[0, j]:
                ps = self.part_states[j]
                out |= {x for x in self.letters if x not in dead and d[moves[x][ps]] < d[ps]}
        return out

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        # The propositions of the step just taken (the reset state is not a step of the trace).
        if not self._fresh:
            self._observe(set(info['propositions']))
        self._fresh = False
        grid, agent = _grid_of(obs, self.letters)
        dead = {x for x in self.letters if self.dfa.labels[self.moves[x][self.state]] == Verdict.FALSE}
        targets = self._targets(dead)
        walls = dead if self.avoid else set()
        move = self._path(grid, agent, targets, walls, obs.shape[0])
        if move is None:       # nothing to reach: a safe random step
            safe = [a for a, (dr, dc) in enumerate(MOVES)
                    if grid.get(((agent[0] + dr) % obs.shape[0], (agent[1] + dc) % obs.shape[1])) not in walls]
            return int(self.rng.choice(safe)) if safe else int(self.rng.integers(4))
        return move

    @staticmethod
    def _path(grid: dict[tuple[int, int], str], agent: tuple[int, int], targets: set[str],
              walls: set[str], n: int) -> int | None:
        """The first move of a shortest path on the ``n × n`` torus to a target letter."""
        if not targets:
            return None
        seen = {agent}
        queue: deque[tuple[tuple[int, int], int]] = deque()
        for a, (dr, dc) in enumerate(MOVES):
            cell = ((agent[0] + dr) % n, (agent[1] + dc) % n)
            if cell not in seen and grid.get(cell) not in walls:
                seen.add(cell)
                queue.append((cell, a))
        while queue:
            cell, first = queue.popleft()
            if grid.get(cell) in targets:
                return first
            for dr, dc in MOVES:
                nxt = ((cell[0] + dr) % n, (cell[1] + dc) % n)
                if nxt not in seen and grid.get(nxt) not in walls:
                    seen.add(nxt)
                    queue.append((nxt, first))
        return None


def rollout(env: gymnasium.Env, policy: Any, seed: int) -> None:
    """One rollout of ``policy`` in ``env`` (a wrapped LetterWorld), seeded."""
    obs, info = env.reset(seed=seed)
    policy.reset(obs, info)
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(policy(obs, info))
        done = terminated or truncated


__all__ = ['GreedyPolicy', 'LetterWorld', 'RandomPolicy', 'rollout']
