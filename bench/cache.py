"""The on-disk cache of `mirage-bench`'s CPU phase, so that a second run starts at once.

Two kinds of entries, both written atomically (a temporary file in the same directory, then
`os.replace`: a reader never sees a partial entry, concurrent writers are harmless):

- build entries, `build/<kk>/<key>.json` + content-addressed `cubin/<sha256>.cubin`: the
  launch plan (JSON), the cubin, the kernel count, the build seconds, or the error of one
  candidate.  key = sha256(input file bytes, graph index, variant, arch, sources digest,
  toolchain) -- no seed: the pipeline and nvcc do not depend on the inputs.
- reference entries, `refs/<key>/<seed>-<specs>.npz`: the float64 reference outputs
  (stored as float32) of one graph on the seeded random inputs.  key = sha256(input file
  bytes, graph index, sources digest); the variant is not part of it (the reference runs on
  the graph as written, so all tuning variants of a plain graph share one), the seed and the
  input specs are.  The two newest seeds of a graph are kept.

The sources digest hashes every `.py` and `.cuh` file of the compiler (dialects/, passes/,
codegen/, runtime/, frontends/, tools/, the package's top-level modules and
bench/prepare.py), so any edit of the compiler invalidates every entry; the toolchain part
is the nvcc path, `MIRAGE_XDSL_NVCC_FLAGS` and the CUTLASS include directory.  Errors are
cached too, except those that depend on the machine (no nvcc, nvcc timeouts, OS errors).
A graph count per input file (`files/<key>.json`) lets a run with every entry cached skip
loading xDSL altogether.

Integrity: a build entry records its key and the sha256 of its contents, a cubin is named by
its own sha256, a reference entry has a sidecar `<name>.npz.json` (key, sha256, size), and a
graph count records its key; each is checked on load, and an entry that fails (truncated,
garbled, another entry's, no sidecar) is a miss, recomputed and overwritten.  Opening the
cache removes temporaries older than an hour that killed processes left (driver/disk_cache.py).

`prune(max_bytes)` drops the least recently used entries (hits refresh an entry's time).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mirage_xdsl.driver.disk_cache import atomic_write_bytes as atomic_write
from mirage_xdsl.driver.disk_cache import clean_stale_temporaries, read_entry, sidecar_path, write_entry

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("dialects", "passes", "codegen", "runtime", "frontends", "tools")
SOURCE_FILES = ("__init__.py", "universe.py", "bench/prepare.py")
REF_SEEDS_KEPT = 2
DEFAULT_MAX_BYTES = 2 * 1024**3


def default_cache_dir() -> Path:
    """`~/.cache/mirage_xdsl/bench`."""
    return Path.home() / ".cache" / "mirage_xdsl" / "bench"


def _sha(*parts: object) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\x1e")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def sources_digest() -> str:
    """sha256 over the names and bytes of the compiler's `.py`/`.cuh` sources and the TC grammar
    (`.lark`: a `.tc` input file compiles through it)."""
    paths = [PACKAGE_ROOT / f for f in SOURCE_FILES]
    for d in SOURCE_DIRS:
        paths += [p for p in (PACKAGE_ROOT / d).rglob("*") if p.suffix in (".py", ".cuh", ".lark")]
    h = hashlib.sha256()
    for path in sorted(p for p in paths if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(PACKAGE_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def toolchain_tag() -> str:
    """What of the machine's toolchain decides the cubin: nvcc's path, the extra nvcc flags,
    the CUTLASS include directory (no process is started)."""
    from mirage_xdsl.driver.nvcc import cutlass_include_dir, find_nvcc

    return _sha(find_nvcc(), os.environ.get("MIRAGE_XDSL_NVCC_FLAGS", ""), cutlass_include_dir())


@functools.cache
def file_digest(path: str) -> str:
    """sha256 hex of the bytes of the file at `path` (read once per path and process).

    Raises:
        OSError: the file cannot be read.
    """
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _meta_digest(meta: dict[str, Any]) -> str:
    """sha256 of a build entry's contents (canonical JSON)."""
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()


def _holds(path: Path, sha: str) -> bool:
    """Whether `path` exists and its bytes hash to `sha`."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha
    except OSError:
        return False


class BenchCache:
    """The cache under `root` (None: a disabled cache that never hits and stores nothing).

    Opening it removes stale temporaries of killed runs under `root`.

    Args:
        root: the cache folder (e.g. `default_cache_dir()`), or None.
    """

    def __init__(self, root: Path | None) -> None:
        self.root = Path(root).expanduser() if root is not None else None
        if self.root is not None and self.root.is_dir():
            clean_stale_temporaries(self.root, recursive=True)  # debris of killed runs
        self.build_hits = self.build_misses = 0
        self.ref_hits = self.ref_misses = 0
        """counts of the last `prepare_all`: entries found, entries computed"""

    # keys ------------------------------------------------------------------------------

    def build_key(self, path: str, index: int, variant: str | None, arch: str) -> str:
        """The key of a build entry: graph `index` of input file `path` under tuning
        `variant` (None: the default pipeline) for `arch` (module docstring).

        Raises:
            OSError: `path` cannot be read.
        """
        return _sha("build", file_digest(path), index, variant or "", arch, sources_digest(), toolchain_tag())

    def ref_key(self, path: str, index: int) -> str:
        """The key of the reference entries of graph `index` of input file `path` (the seed
        and input specs name the file under it).

        Raises:
            OSError: `path` cannot be read.
        """
        return _sha("ref", file_digest(path), index, sources_digest())

    # graph counts ----------------------------------------------------------------------

    def _count_path(self, path: str) -> Path | None:
        if self.root is None:
            return None
        return self.root / "files" / f"{_sha('graphs', file_digest(path), sources_digest())}.json"

    def load_count(self, path: str) -> int | None:
        """The cached graph count of input file `path`, or None (a miss or a bad entry)."""
        entry = self._count_path(path)
        if entry is None:
            return None
        try:
            record = json.loads(entry.read_text())
            if record.get("key") != entry.stem:
                return None  # another file's count under this name
            return int(record["graphs"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def store_count(self, path: str, count: int) -> None:
        """Record that input file `path` holds `count` graphs (nothing for a disabled cache).

        Raises:
            OSError: `path` cannot be read or the cache written.
        """
        entry = self._count_path(path)
        if entry is not None:
            atomic_write(entry, json.dumps({"key": entry.stem, "graphs": count, "file": Path(path).name}).encode())

    # builds ----------------------------------------------------------------------------

    def load_build(self, key: str) -> dict[str, Any] | None:
        """The build entry (`plan_json`, `cubin`: path or None, `kernels`, `build_s`,
        `error`), or None on a miss or a bad entry (wrong key or contents hash, a cubin
        whose bytes do not hash to its name)."""
        if self.root is None:
            return None
        entry = self.root / "build" / key[:2] / f"{key}.json"
        try:
            record = json.loads(entry.read_text())
            meta = record["entry"]
            if record.get("key") != key or record.get("sha256") != _meta_digest(meta):
                return None
            if meta.get("cubin_sha"):
                cubin = self.root / "cubin" / f"{meta['cubin_sha']}.cubin"
                if hashlib.sha256(cubin.read_bytes()).hexdigest() != meta["cubin_sha"]:
                    return None
                meta["cubin"] = str(cubin)
            else:
                meta["cubin"] = None
            os.utime(entry)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return meta

    def store_build(self, key: str, meta: dict[str, Any], cubin: str | None) -> dict[str, Any]:
        """Store a build (`cubin`: the path of the compiled cubin); returns the entry as
        `load_build` gives it (the cubin path then points into the cache).

        Raises:
            OSError: the cubin cannot be read or the cache written.
        """
        meta = {k: v for k, v in meta.items() if k != "cubin"}
        meta["cubin_sha"] = None
        if cubin is not None:
            data = Path(cubin).read_bytes()
            meta["cubin_sha"] = hashlib.sha256(data).hexdigest()
        if self.root is None:
            meta["cubin"] = cubin
            return meta
        record = {"key": key, "sha256": _meta_digest(meta), "entry": meta}
        if cubin is not None:
            target = self.root / "cubin" / f"{meta['cubin_sha']}.cubin"
            if not _holds(target, meta["cubin_sha"]):
                atomic_write(target, data)  # absent, or damaged: overwrite
        # the entry after its cubin, so an entry never names a cubin not yet written
        atomic_write(self.root / "build" / key[:2] / f"{key}.json", json.dumps(record, sort_keys=True).encode())
        meta = dict(meta)
        meta["cubin"] = str(self.root / "cubin" / f"{meta['cubin_sha']}.cubin") if cubin is not None else None
        return meta

    # references ------------------------------------------------------------------------

    def _ref_path(self, key: str, seed: int, specs_json: str) -> Path | None:
        if self.root is None:
            return None
        return self.root / "refs" / key / f"{seed}-{_sha(specs_json)[:16]}.npz"

    def load_refs(self, key: str, seed: int, specs_json: str) -> list[np.ndarray] | None:
        """The cached reference outputs (float64), or None on a miss or a bad entry."""
        entry = self._ref_path(key, seed, specs_json)
        if entry is None:
            return None
        data = read_entry(entry, key)
        if data is None:
            return None
        try:
            with np.load(io.BytesIO(data)) as z:
                refs = [z[f"arr_{j}"].astype(np.float64) for j in range(len(z.files))]
            os.utime(entry)
        except Exception:  # noqa: BLE001 - a payload numpy cannot read (BadZipFile, ...) is a miss
            return None
        return refs

    def store_refs(self, key: str, seed: int, specs_json: str, refs: Sequence[np.ndarray]) -> None:
        """Store reference outputs (as float32), keeping the `REF_SEEDS_KEPT` newest seeds.

        Raises:
            OSError: the cache cannot be written.
        """
        entry = self._ref_path(key, seed, specs_json)
        if entry is None:
            return
        buf = io.BytesIO()
        np.savez(buf, *[np.asarray(r, dtype=np.float32) for r in refs])
        write_entry(entry, key, buf.getvalue())
        try:
            older = sorted(entry.parent.glob("*.npz"), key=lambda p: p.stat().st_mtime, reverse=True)
            for stale in older[REF_SEEDS_KEPT:]:
                stale.unlink()
                sidecar_path(stale).unlink(missing_ok=True)
        except OSError:
            pass

    # size ------------------------------------------------------------------------------

    def prune(self, max_bytes: int = DEFAULT_MAX_BYTES) -> int:
        """Delete the least recently used files until the cache holds at most `max_bytes`;
        returns the bytes freed."""
        if self.root is None or not self.root.is_dir():
            return 0
        files = []
        for p in self.root.rglob("*"):
            try:
                if p.is_file():
                    st = p.stat()
                    files.append((st.st_mtime, st.st_size, p))
            except OSError:
                continue
        total = sum(size for _, size, _ in files)
        freed = 0
        now = time.time()
        for mtime, size, p in sorted(files, key=lambda t: t[0]):
            if total - freed <= max_bytes or now - mtime < 60:
                break
            try:
                p.unlink()
                freed += size
            except OSError:
                pass
        return freed
