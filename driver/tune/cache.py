"""The persistent tuning cache: one JSON file, one entry per (graph, device, toolchain, compiler).

    cache = TuneCache.load(path)               # a missing or corrupt file: an empty cache
    entry = cache.get(key)                     # TuneEntry | None
    cache.put(key, entry); cache.save()        # atomic: temp file + os.replace

File layout (version 1):

    {"version": 1,
     "entries": {"<key digest>": {
         "key": {"graph": sha256, "device": "NVIDIA H200", "arch": "sm_90",
                 "toolchain": "nvcc release ... | cutlass <path>", "compiler": sha256},
         "best": "c0s7xrf1" | null, "best_us": 12.3 | null,
         "evaluated": {"c0x": {"time_us": 14.1, "program": "ab12..."},
                       "c9s8x": {"error": "SharedMemoryExceeded: ..."}},
         "updated": "2026-11-27T10:00:00Z"}}}

The key: the graph fingerprint (sha256 of the printed kn function), the device name and
architecture, the toolchain (nvcc version and CuTe headers) and a digest of the compiler's
own sources (passes, codegen with its device headers, dialects, runtime, target), so a change
to any of them starts a fresh entry instead of trusting stale times.

Loading validates everything; a file that is not valid JSON or not of this layout is
ignored with a warning (and rewritten by the next save); an entry with an unreadable genome is
dropped with a warning.  Saving merges with the file as it is on disk (entries of other
graphs written meanwhile by another tuner survive) and replaces it atomically.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirage_xdsl.driver.nvcc import atomic_write_bytes
from mirage_xdsl.driver.tune.genetic import Evaluation, best_of
from mirage_xdsl.driver.tune.space import SPACE, Genome, SpaceError, genome_from_label

CACHE_VERSION = 1
CACHE_FILE = "tune.json"
COMPILER_DIRS = ("passes", "codegen", "dialects", "runtime", "target")
"""Folders of the package whose sources decide the generated programs and how they run."""


class TuneCacheWarning(UserWarning):
    """The cache file could not be used as it is (it will be rewritten)."""


def default_cache_path() -> Path:
    """`$MIRAGE_XDSL_CACHE_DIR/tune.json`, else `~/.cache/mirage_xdsl/tune.json`."""
    env = os.environ.get("MIRAGE_XDSL_CACHE_DIR")
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "mirage_xdsl"
    return root / CACHE_FILE


def compiler_digest(root: Path | None = None) -> str:
    """sha256 over the names and contents of the compiler's source files (`COMPILER_DIRS`
    under the package root: .py, .cuh, .lark files)."""
    root = root or Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for folder in COMPILER_DIRS:
        base = root / folder
        if not base.is_dir():
            continue
        files = sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in (".py", ".cuh", ".lark"))
        for path in files:
            if "__pycache__" in path.parts:
                continue
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def graph_fingerprint(text: str) -> str:
    """sha256 of a printed kn function (its text as `str(op)` prints it)."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class TuneKey:
    """What a tuning result depends on.

    Attributes:
        graph: `graph_fingerprint` of the printed kn function.
        device: the GPU's name (e.g. `NVIDIA H200`).
        arch: its architecture (`sm_90`).
        toolchain: nvcc's release line and the CuTe headers in use (`toolchain_identity`).
        compiler: `compiler_digest()` of the package's sources.
    """

    graph: str
    device: str
    arch: str
    toolchain: str
    compiler: str

    def digest(self) -> str:
        """The key's name in the cache file: the first 32 hex digits of the sha256 of its
        fields as canonical JSON."""
        text = json.dumps(self.__dict__, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class TuneEntry:
    """The tuning record of one key: the best genome and every verdict."""

    evaluated: dict[Genome, Evaluation] = field(default_factory=dict)
    updated: str = ""

    @property
    def best(self) -> Evaluation | None:
        """The fastest correct verdict of the entry (`best_of`), None when none passed."""
        return best_of(self.evaluated.values())

    def merge(self, evaluations: Iterable[Evaluation]) -> None:
        """Add verdicts (transient failures are not kept: they may pass next time)."""
        for ev in evaluations:
            if not ev.transient:
                self.evaluated[ev.genome] = ev

    def to_json(self) -> dict[str, Any]:
        """The entry in the file layout of the module docstring (without its key)."""
        best = self.best
        return {
            "best": best.genome.label if best else None,
            "best_us": best.time_us if best else None,
            "evaluated": {g.label: _verdict_json(ev) for g, ev in sorted(self.evaluated.items())},
            "updated": self.updated,
        }

    @classmethod
    def from_json(cls, data: Any) -> TuneEntry:
        """The entry of one `entries` value of a version-1 cache file.

        Raises:
            ValueError: not an entry of the version-1 layout: no `evaluated` object, a bad
                label, genome (`SpaceError`, a `ValueError`), program or time.
        """
        if not isinstance(data, dict) or not isinstance(data.get("evaluated"), dict):
            raise ValueError("an entry needs an 'evaluated' object")
        entry = cls(updated=str(data.get("updated", "")))
        for label, verdict in data["evaluated"].items():
            ev = _verdict_from_json(label, verdict)
            entry.evaluated[ev.genome] = ev
        return entry


def _verdict_json(ev: Evaluation) -> dict[str, Any]:
    out: dict[str, Any] = {"time_us": ev.time_us} if ev.ok else {"error": ev.error or "failed"}
    if ev.program is not None:
        out["program"] = ev.program
    return out


def _verdict_from_json(label: str, data: Any) -> Evaluation:
    """Raises:
    ValueError: a bad label, genome or time (SpaceError is a ValueError)."""
    genome = SPACE.validate(genome_from_label(label))
    if not isinstance(data, dict):
        raise ValueError(f"{label}: expected an object")
    program = data.get("program")
    if program is not None and not isinstance(program, str):
        raise ValueError(f"{label}: program must be a string")
    if "time_us" in data:
        t = data["time_us"]
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t) or t <= 0:
            raise ValueError(f"{label}: time_us must be a positive number")
        return Evaluation(genome, float(t), None, program, origin="cache")
    return Evaluation(genome, None, str(data.get("error", "failed")), program, origin="cache")


class TuneCache:
    """The entries of one cache file, in memory.

    Args:
        path: the cache file; None: an in-memory cache that `save` never writes.
        entries: key digest -> (key, entry), as `load` reads them (default: none).
    """

    def __init__(self, path: Path | None, entries: dict[str, tuple[TuneKey, TuneEntry]] | None = None):
        self.path = path
        self.entries = entries or {}

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> TuneCache:
        """The cache at `path` (None: `default_cache_path()`); an unusable file gives an empty
        cache and a `TuneCacheWarning`."""
        target = Path(path) if path is not None else default_cache_path()
        return cls(target, _read_entries(target, warn=True))

    def get(self, key: TuneKey) -> TuneEntry | None:
        """The entry of `key`, or None."""
        found = self.entries.get(key.digest())
        return found[1] if found else None

    def put(self, key: TuneKey, entry: TuneEntry) -> None:
        """Set the entry of `key` (in memory; `save` writes it) and stamp its `updated` time
        (UTC, ISO 8601)."""
        entry.updated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.entries[key.digest()] = (key, entry)

    def save(self) -> None:
        """Merge with the file on disk (our entries win) and write it atomically.

        Does nothing for a cache without a path.

        Raises:
            OSError: the file cannot be written (the old file is left as it was).
        """
        if self.path is None:
            return
        merged = _read_entries(self.path, warn=False)
        merged.update(self.entries)
        data = {
            "version": CACHE_VERSION,
            "entries": {d: {"key": k.__dict__, **e.to_json()} for d, (k, e) in sorted(merged.items())},
        }
        # the cubin cache's writer: temp file in the same folder, fsync, os.replace
        atomic_write_bytes(self.path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())


def _read_entries(path: Path, *, warn: bool) -> dict[str, tuple[TuneKey, TuneEntry]]:
    def complain(why: str) -> dict[str, tuple[TuneKey, TuneEntry]]:
        if warn:
            warnings.warn(f"tuning cache {path}: {why}; ignored (it will be rewritten)", TuneCacheWarning, stacklevel=3)
        return {}

    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as err:
        return complain(f"cannot read it ({err})")
    try:
        data = json.loads(text)
    except ValueError as err:
        return complain(f"not valid JSON ({err})")
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or not isinstance(data.get("entries"), dict):
        return complain(f"not a version-{CACHE_VERSION} tuning cache")
    out: dict[str, tuple[TuneKey, TuneEntry]] = {}
    for digest, raw in data["entries"].items():
        try:
            key = TuneKey(**{k: str(v) for k, v in raw["key"].items()})
            if key.digest() != digest:
                raise ValueError("its key does not match its digest")
            out[digest] = (key, TuneEntry.from_json(raw))
        except (KeyError, TypeError, ValueError, SpaceError) as err:
            complain(f"entry {digest[:12]} dropped ({err})")
    return out

