"""On-disk cache of compiled DFAs, keyed by the canonical formula text.

Entries are JSON files named by the SHA-256 of the compiler version and the
canonical formula, written atomically (temporary file + rename) so parallel
workers never read half an entry.  An unreadable or stale entry is simply
recompiled and replaced.  The directory is ``$SAFEMANIP_CACHE_DIR`` or
``~/.cache/safemanip_ros/dfa``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..atomic_file import write_text_atomically
from .compiler import COMPILER_VERSION, compile_formula
from .dfa import DFA
from .formula import Formula
from .parser import parse


def default_cache_dir() -> Path:
    env = os.environ.get('SAFEMANIP_CACHE_DIR')
    if env:
        return Path(env) / 'dfa'
    return Path(os.environ.get('XDG_CACHE_HOME', Path.home() / '.cache')) / 'safemanip_ros' / 'dfa'


def cache_key(canonical: str) -> str:
    return hashlib.sha256(f'v{COMPILER_VERSION}\n{canonical}'.encode()).hexdigest()


def compile_cached(formula: Formula | str, cache_dir: Path | str | None = None) -> DFA:
    """Like :func:`compile_formula`, reusing a cached result when there is one.

    ``cache_dir=None`` uses :func:`default_cache_dir`.  Cache I/O failures
    (read-only home, full disk) fall back to compiling without caching.
    """
    f = parse(formula) if isinstance(formula, str) else formula
    canonical = str(f)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = directory / f'{cache_key(canonical)}.json'
    try:
        data = json.loads(path.read_text())
        if data.get('formula') == canonical:
            return DFA.from_dict(data)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        pass
    dfa = compile_formula(f)
    try:
        write_text_atomically(path, [dfa.to_json()])
    except OSError:
        pass
    return dfa
