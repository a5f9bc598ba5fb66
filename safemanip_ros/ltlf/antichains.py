"""Interned antichains of disjuncts, for the explicit construction (:mod:`.explicit`).

A *disjunct* is a vector of obligation ranks, one per chain, encoded as a
mixed-radix int64 key; an *antichain* of them (none above another entry-wise)
is a state of the construction or a part of one.  :class:`Antichains` gives
each distinct antichain one id, exactly: small antichains by their keys packed
into one int64, wider ones by a 64-bit hash checked against the stored keys.
:func:`weakest` reduces groups of disjuncts to their antichains.
"""

from __future__ import annotations

import numpy as np

from .table import distinct, home_slots, mix_rows, ranges, unique_rows


def strides_of(lengths: np.ndarray) -> np.ndarray:
    """Mixed-radix place values of disjunct keys: chain ``c`` holds a rank in
    ``0..lengths[c]``, so the key of a row is ``row @ strides_of(lengths)``."""
    strides = np.ones(len(lengths), dtype=np.int64)
    if len(lengths):
        strides[1:] = np.cumprod(lengths + 1)[:-1]
    return strides


class KeyIndex:
    """A map from int64 keys to non-negative int64 values, taking and giving arrays.

    Keys known to lie in ``range(key_space)`` with ``key_space`` up to
    :data:`DENSE_KEYS` go to a flat array (one gather per batch); others to
    an open-addressing table (linear probing, at most half full), probed for
    a whole batch at once: a breadth-first layer looks up 10^2-10^4 keys,
    one dict call each cost about 0.5 µs, a probe round a few numpy calls."""

    DENSE_KEYS = 1 << 22

    def __init__(self, key_space: int | None = None) -> None:
        self._dense = np.full(key_space, -1, dtype=np.int64) \
            if key_space is not None and key_space <= self.DENSE_KEYS else None
        self._bits = 10
        self._keys = np.zeros(1 << self._bits, dtype=np.int64)
        self._values = np.full(1 << self._bits, -1, dtype=np.int64)     # -1: empty slot
        self._claim = np.zeros(1 << self._bits, dtype=np.int64)        # scratch of set()
        self._n = 0

    def get(self, keys: np.ndarray, missing: int = -1) -> np.ndarray:
        if self._dense is not None:
            found: np.ndarray = self._dense[keys]
            return found if missing == -1 else np.where(found < 0, missing, found)
        slot = self._probe(keys)
        out: np.ndarray = self._values[slot]
        return out if missing == -1 else np.where(out < 0, missing, out)

    def set(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Map each of the distinct ``keys`` to its value (>= 0), replacing any it had."""
        if self._dense is not None:
            self._dense[keys] = values
            return
        if 2 * (self._n + len(keys)) > len(self._keys):
            self._grow(self._n + len(keys))
        pending = np.arange(len(keys))
        while len(pending):
            slot = self._probe(keys[pending])
            new = self._values[slot] < 0
            # New keys that probed to the same empty slot: one takes it (whichever the
            # scatter left there), the others probe on.
            taken = ~new
            if new.any():
                where = np.flatnonzero(new)
                self._claim[slot[where]] = where
                taken[where[self._claim[slot[where]] == where]] = True
            self._keys[slot[taken]] = keys[pending[taken]]
            self._values[slot[taken]] = values[pending[taken]]
            self._n += int(np.count_nonzero(taken & new))
            pending = pending[~taken]

    def _probe(self, keys: np.ndarray) -> np.ndarray:
        """Per key, its slot, or the empty slot where its probe ends."""
        mask = len(self._keys) - 1
        slot = home_slots(keys, self._bits)
        pending = np.arange(len(keys))
        while len(pending):
            s = slot[pending]
            on = (self._values[s] >= 0) & (self._keys[s] != keys[pending])     # occupied by another key
            pending = pending[on]
            slot[pending] = (s[on] + 1) & mask
        return slot

    def _grow(self, entries: int) -> None:
        keys, values = self._keys[self._values >= 0], self._values[self._values >= 0]
        while (1 << self._bits) < 2 * entries:
            self._bits += 1
        self._keys = np.zeros(1 << self._bits, dtype=np.int64)
        self._values = np.full(1 << self._bits, -1, dtype=np.int64)
        self._claim = np.zeros(1 << self._bits, dtype=np.int64)
        self._n = 0
        self.set(keys, values)


_COLLIDED = -2
# Antichains packed into one int64 key use at most this many bits.
_PACK_BITS = 62


class Antichains:
    """Interned antichains of disjuncts: id → sorted disjunct keys.  Found
    by a 64-bit hash of the keys and then compared with the stored keys, so
    identity is exact; contents that share a hash go to a table of their
    bytes."""

    def __init__(self, lengths: np.ndarray, key_space: int) -> None:
        self.lengths = lengths
        self.strides = strides_of(lengths)
        self.keys = np.zeros(1024, dtype=np.int64)
        self.start = np.zeros(1024, dtype=np.int64)
        self.count = np.zeros(1024, dtype=np.int64)
        self._used = 0
        self._n = 0
        # Antichains of up to exact_width disjuncts: their keys packed exactly
        # into one int64 (key + 1 per digit, base key_space + 1; 0 = none).
        base = key_space + 1
        self.exact_width = int(_PACK_BITS // np.log2(base))
        self._radix = base ** np.arange(self.exact_width, dtype=np.int64)
        self._packed = KeyIndex()                 # packed keys → id
        self._index = KeyIndex()                  # wider: content hash → id (or _COLLIDED)
        self._exact: dict[bytes, int] = {}        # contents whose hash is shared

    def __len__(self) -> int:
        return self._n

    def vectors(self, keys: np.ndarray) -> np.ndarray:
        """Disjunct keys back to rows of ranks."""
        rows: np.ndarray = (keys[:, None] // self.strides) % (self.lengths + 1)
        return rows

    def intern_one(self, keys: np.ndarray) -> int:
        return int(self.intern(np.zeros(len(keys), dtype=np.int64), keys, 1)[0])

    def intern(self, group: np.ndarray, keys: np.ndarray, n_groups: int) -> np.ndarray:
        """Ids of the antichains ``keys[group == g]`` (sorted by group, then
        key), ``g < n_groups``; unseen ones are added."""
        counts = np.bincount(group, minlength=n_groups)
        starts = np.zeros(n_groups + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        padded = np.full((n_groups, max(int(counts.max(initial=0)), 1)), -1, dtype=np.int64)
        padded[group, np.arange(len(group)) - starts[group]] = keys
        content, inverse = unique_rows(padded)
        ids: np.ndarray = self.ids_of(content)[inverse]
        return ids

    def ids_of(self, content: np.ndarray) -> np.ndarray:
        """Ids of distinct padded contents (rows of sorted keys, then -1).

        An antichain of at most :attr:`exact_width` disjuncts is looked up by
        its keys packed into one int64 (exact); a wider one by a 64-bit hash,
        every hit compared with the stored antichain, so a collision is
        detected and resolved exactly."""
        ids = np.empty(len(content), dtype=np.int64)
        narrow = (content[:, self.exact_width:] < 0).all(axis=1) if content.shape[1] > self.exact_width \
            else np.ones(len(content), dtype=bool)
        if narrow.all():
            return self._ids_packed(content[:, :self.exact_width])
        if narrow.any():
            ids[narrow] = self._ids_packed(content[narrow][:, :self.exact_width])
        ids[~narrow] = self._ids_hashed(content[~narrow])
        return ids

    def _ids_packed(self, content: np.ndarray) -> np.ndarray:
        codes = (content + 1) @ self._radix[:content.shape[1]]
        ids = self._packed.get(codes)
        miss = np.flatnonzero(ids < 0)
        if len(miss):
            new_ids = self._append_rows(content[miss])
            ids[miss] = new_ids
            self._packed.set(codes[miss], new_ids)
        return ids

    def _ids_hashed(self, content: np.ndarray) -> np.ndarray:
        hashes = mix_rows(content, skip_negative=True)
        index = self._index
        ids = index.get(hashes)
        hit = np.flatnonzero(ids >= 0)
        if len(hit):
            wrong = hit[~self._equal(ids[hit], content[hit])]
            if len(wrong):
                for i in distinct(ids[wrong]).tolist():
                    self._exact_entry(i)
                shared = distinct(hashes[wrong])
                index.set(shared, np.full(len(shared), _COLLIDED))
                ids[wrong] = _COLLIDED
        miss = np.flatnonzero(ids == -1)
        if len(miss):
            uniq, n_same = np.unique(hashes[miss], return_counts=True)
            if (n_same > 1).any():      # two new contents, one hash
                twice = uniq[n_same > 1]
                index.set(twice, np.full(len(twice), _COLLIDED))
                shared = np.isin(hashes[miss], twice)
                ids[miss[shared]] = _COLLIDED
                miss = miss[~shared]
            new_ids = self._append_rows(content[miss])
            ids[miss] = new_ids
            index.set(hashes[miss], new_ids)
        for u in np.flatnonzero(ids == _COLLIDED).tolist():
            row = content[u]
            b = row[row >= 0].tobytes()
            i = self._exact.get(b)
            if i is None:
                i = self._exact[b] = int(self._append_rows(content[u:u + 1])[0])
            ids[u] = i
        return ids

    def _equal(self, ids: np.ndarray, content: np.ndarray) -> np.ndarray:
        width = content.shape[1]
        ok = self.count[ids] == (content >= 0).sum(axis=1)
        pos = np.arange(width)
        inside = pos < self.count[ids][:, None]
        stored = np.where(inside, self.keys[np.where(inside, self.start[ids][:, None] + pos, 0)], -1)
        equal: np.ndarray = ok & (stored == content).all(axis=1)
        return equal

    def _exact_entry(self, i: int) -> None:
        row = self.keys[self.start[i]:self.start[i] + self.count[i]]
        self._exact[row.tobytes()] = i

    def _append_rows(self, content: np.ndarray) -> np.ndarray:
        """Store new antichains (padded rows); returns their ids."""
        counts = (content >= 0).sum(axis=1)
        flat = content[content >= 0]            # row-major: each row's keys in order
        n_old, n_new = self._n, len(content)
        while n_old + n_new > len(self.start):
            self.start = np.resize(self.start, 2 * len(self.start))
            self.count = np.resize(self.count, 2 * len(self.count))
        while self._used + len(flat) > len(self.keys):
            self.keys = np.resize(self.keys, 2 * len(self.keys))
        self.count[n_old:n_old + n_new] = counts
        self.start[n_old:n_old + n_new] = self._used + np.cumsum(counts) - counts
        self.keys[self._used:self._used + len(flat)] = flat
        self._used += len(flat)
        self._n += n_new
        return np.arange(n_old, n_old + n_new)


def weakest(group: np.ndarray, keys: np.ndarray, vec: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group, the distinct disjuncts that no other disjunct of the group is
    entry-wise above, sorted by (group, key)."""
    order = np.lexsort((keys, group))
    group, keys, vec = group[order], keys[order], vec[order]
    if len(group) > 1:
        distinct = np.ones(len(group), dtype=bool)
        distinct[1:] = (group[1:] != group[:-1]) | (keys[1:] != keys[:-1])
        group, keys, vec = group[distinct], keys[distinct], vec[distinct]
    n = len(group)
    if n < 2:
        return group, keys, vec
    # Pairs (i, j) of rows of one group, i ≠ j.
    first = np.ones(n, dtype=bool)
    first[1:] = group[1:] != group[:-1]
    start_of = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    sizes = np.bincount(group)[group]
    multi = np.flatnonzero(sizes > 1)
    if not len(multi):
        return group, keys, vec
    i = np.repeat(multi, sizes[multi])
    j = ranges(start_of[multi], sizes[multi])
    other = i != j
    i, j = i[other], j[other]
    above = (vec[i] <= vec[j]).all(axis=1)
    dominated = np.zeros(n, dtype=bool)
    dominated[i[above]] = True
    keep = ~dominated
    return group[keep], keys[keep], vec[keep]
