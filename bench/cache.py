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

`prune(max_bytes)` drops the least recently used entries (hits refresh an entry's time).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mirage_xdsl.driver.nvcc import atomic_write_bytes as atomic_write

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
    """sha256 over the names and bytes of the compiler's `.py`/`.cuh` sources."""
    paths = [PACKAGE_ROOT / f for f in SOURCE_FILES]
    for d in SOURCE_DIRS:
        paths += [p for p in (PACKAGE_ROOT / d).rglob("*") if p.suffix in (".py", ".cuh")]
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
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class BenchCache:
    """The cache under `root` (None: a disabled cache that never hits and stores nothing)."""

    def __init__(self, root: Path | None) -> None:
        self.root = Path(root).expanduser() if root is not None else None
        self.build_hits = self.build_misses = 0
        self.ref_hits = self.ref_misses = 0
        """counts of the last `prepare_all`: entries found, entries computed"""

    # keys ------------------------------------------------------------------------------

    def build_key(self, path: str, index: int, variant: str | None, arch: str) -> str:
        return _sha("build", file_digest(path), index, variant or "", arch, sources_digest(), toolchain_tag())

    def ref_key(self, path: str, index: int) -> str:
        return _sha("ref", file_digest(path), index, sources_digest())

    # graph counts ----------------------------------------------------------------------

    def _count_path(self, path: str) -> Path | None:
        if self.root is None:
            return None
        return self.root / "files" / f"{_sha('graphs', file_digest(path), sources_digest())}.json"

    def load_count(self, path: str) -> int | None:
        entry = self._count_path(path)
        try:
            return int(json.loads(entry.read_text())["graphs"]) if entry is not None else None
        except (OSError, ValueError, KeyError):
            return None

    def store_count(self, path: str, count: int) -> None:
        entry = self._count_path(path)
        if entry is not None:
            atomic_write(entry, json.dumps({"graphs": count, "file": Path(path).name}).encode())

    # builds ----------------------------------------------------------------------------

    def load_build(self, key: str) -> dict[str, Any] | None:
        """The build entry (`plan_json`, `cubin`: path or None, `kernels`, `build_s`,
        `error`), or None on a miss."""
        if self.root is None:
            return None
        entry = self.root / "build" / key[:2] / f"{key}.json"
        try:
            meta = json.loads(entry.read_text())
            if meta.get("cubin_sha"):
                cubin = self.root / "cubin" / f"{meta['cubin_sha']}.cubin"
                if not cubin.is_file():
                    return None
                meta["cubin"] = str(cubin)
            else:
                meta["cubin"] = None
            os.utime(entry)
        except (OSError, ValueError, KeyError):
            return None
        return meta

    def store_build(self, key: str, meta: dict[str, Any], cubin: str | None) -> dict[str, Any]:
        """Store a build (`cubin`: the path of the compiled cubin); returns the entry as
        `load_build` gives it (the cubin path then points into the cache)."""
        meta = {k: v for k, v in meta.items() if k != "cubin"}
        meta["cubin_sha"] = None
        if cubin is not None:
            data = Path(cubin).read_bytes()
            meta["cubin_sha"] = hashlib.sha256(data).hexdigest()
        if self.root is None:
            meta["cubin"] = cubin
            return meta
        if cubin is not None:
            target = self.root / "cubin" / f"{meta['cubin_sha']}.cubin"
            if not target.is_file():
                atomic_write(target, data)
            meta["cubin"] = str(target)
        else:
            meta["cubin"] = None
        atomic_write(self.root / "build" / key[:2] / f"{key}.json", json.dumps(meta).encode())
        return meta

    # references ------------------------------------------------------------------------

    def _ref_path(self, key: str, seed: int, specs_json: str) -> Path | None:
        if self.root is None:
            return None
        return self.root / "refs" / key / f"{seed}-{_sha(specs_json)[:16]}.npz"

    def load_refs(self, key: str, seed: int, specs_json: str) -> list[np.ndarray] | None:
        entry = self._ref_path(key, seed, specs_json)
        if entry is None:
            return None
        try:
            with np.load(entry) as z:
                refs = [z[f"arr_{j}"].astype(np.float64) for j in range(len(z.files))]
            os.utime(entry)
        except (OSError, ValueError, KeyError):
            return None
        return refs

    def store_refs(self, key: str, seed: int, specs_json: str, refs: Sequence[np.ndarray]) -> None:
        entry = self._ref_path(key, seed, specs_json)
        if entry is None:
            return
        import io

        buf = io.BytesIO()
        np.savez(buf, *[np.asarray(r, dtype=np.float32) for r in refs])
        atomic_write(entry, buf.getvalue())
        try:
            older = sorted(entry.parent.glob("*.npz"), key=lambda p: p.stat().st_mtime, reverse=True)
            for stale in older[REF_SEEDS_KEPT:]:
                stale.unlink()
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
