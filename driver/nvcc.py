"""nvcc compilation of generated CUDA to a cubin, with a content-addressed disk cache.

`compile_cuda(source, arch)` runs

    nvcc -cubin -std=c++17 -O3 --expt-relaxed-constexpr -arch=<arch>
         -I<mirage_xdsl>/codegen/include [-I<nvidia-cutlass wheel>/include] -o <cubin> <source>

and returns the path of the cubin.  It needs nvcc but no GPU (and no CuPy), so CI machines
without a device can compile every generated program.

Cache: `<cache dir>/<key>.cubin` where `key = sha256(source, options, nvcc version, arch,
digest of the headers in codegen/include)`, and its sidecar `<key>.cubin.json` recording the
key, the cubin's sha256 and size, the nvcc version and the arch (driver/disk_cache.py).  The
cache dir is the `cache_dir` argument, else the environment variable `MIRAGE_XDSL_CACHE_DIR`,
else `~/.cache/mirage_xdsl`.  The cubin and then the sidecar are written to temporary files in
the cache dir and moved into place with `os.replace`, so a reader never sees a partial file
and concurrent compiles of one source are harmless.  A hit needs a sidecar naming the key and
nvcc version and matching the cubin's bytes; anything else (a truncated or garbled cubin,
another kernel's cubin, no sidecar) is a miss: nvcc runs again and the entry is overwritten.
A cache hit does not run nvcc at all (not even `nvcc --version`: the version is read once per
nvcc path and process).  The first use of a cache dir in a process removes temporaries
older than an hour that killed processes left (`mirage_nvcc_*` folders, `.*.tmp` files).

Environment: `MIRAGE_XDSL_NVCC` (path of nvcc; else `$CUDA_HOME/bin/nvcc`, `$CUDA_PATH/bin/nvcc`,
`nvcc` on PATH, `/usr/local/cuda/bin/nvcc`), `MIRAGE_XDSL_NVCC_FLAGS` (extra flags, split on
whitespace, part of the cache key), `MIRAGE_XDSL_CUTLASS_INCLUDE` (a CUTLASS/CuTe include
directory to use instead of the `nvidia-cutlass` wheel's).

Errors: `CudaCompileError` (a `RuntimeError`) with nvcc's first error lines and the path of
the failing source kept in the cache dir (`failed-<key>.cu`); `NvccNotFoundError` when no nvcc
can be found.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

from mirage_xdsl.codegen.device_library import DEVICE_LIBRARY_INCLUDE
from mirage_xdsl.driver.disk_cache import TEMP_DIR_PREFIX, atomic_write_bytes, clean_stale_temporaries, read_entry, write_entry
from mirage_xdsl.driver.ptxas_guard import (
    PTXAS_GUARD,
    SAFE_PTXAS_OPTIONS,
    PtxasGuardWarning,
    separate_shared_addresses,
    smem_register_reuse,
)

__all__ = [
    "CudaCompileError",
    "atomic_write_bytes",
    "NvccNotFoundError",
    "cache_key",
    "compile_cuda",
    "default_cache_dir",
    "find_nvcc",
    "include_dirs",
    "normalize_arch",
    "nvcc_options",
    "nvcc_version",
]

CODEGEN_INCLUDE = DEVICE_LIBRARY_INCLUDE
"""Headers included by the generated CUDA (`#include "..."`)."""

BASE_OPTIONS: tuple[str, ...] = ("-std=c++17", "-O3", "--expt-relaxed-constexpr")
"""nvcc options of every compile, before `-arch`, the include directories and `extra_flags()`
(`--expt-relaxed-constexpr` lets device code call `constexpr` host functions; nvcc's manual)."""

NVCC_TIMEOUT_S = 900
"""CuTe-heavy translation units take seconds to a few minutes; a hung nvcc is an error."""


class CudaCompileError(RuntimeError):
    """nvcc rejected a generated program (message: nvcc's first errors and the kept source)."""


class NvccNotFoundError(CudaCompileError):
    """No nvcc could be found (set MIRAGE_XDSL_NVCC or put nvcc on PATH)."""


# ---------------------------------------------------------------------------------------
# Toolchain discovery


def find_nvcc() -> str | None:
    """Path of nvcc, or None: `MIRAGE_XDSL_NVCC`, `$CUDA_HOME/bin`, `$CUDA_PATH/bin`, PATH,
    `/usr/local/cuda/bin`, in that order."""
    explicit = os.environ.get("MIRAGE_XDSL_NVCC")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    fallback = Path("/usr/local/cuda/bin/nvcc")
    return str(fallback) if fallback.is_file() else None


@functools.cache
def nvcc_version(nvcc: str) -> str:
    """The release line of `nvcc --version` (e.g. `Cuda compilation tools, release 13.0, V13.0.88`).

    Cached per `nvcc` path for the life of the process.

    Raises:
        NvccNotFoundError: `nvcc` cannot be run (not executable, or it took over 60 s).
    """
    try:
        proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        raise NvccNotFoundError(f"cannot run {nvcc} --version: {err}") from None
    lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
    release = [ln for ln in lines if "release" in ln]
    return release[-1] if release else (lines[-1] if lines else "unknown")


@functools.lru_cache(maxsize=1)
def cutlass_include_dir() -> Path | None:
    """CuTe/CUTLASS headers: `MIRAGE_XDSL_CUTLASS_INCLUDE`, else the `nvidia-cutlass` wheel's
    `cutlass_library/source/include` (found without importing the package), else None."""
    explicit = os.environ.get("MIRAGE_XDSL_CUTLASS_INCLUDE")
    if explicit:
        return Path(explicit) if Path(explicit).is_dir() else None
    try:
        spec = importlib.util.find_spec("cutlass_library")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        for candidate in (Path(loc) / "source" / "include", Path(loc) / "include"):
            if (candidate / "cute").is_dir() or (candidate / "cutlass").is_dir():
                return candidate
    return None


def include_dirs() -> list[Path]:
    """Include directories of generated code: ours (`codegen/include`) then CUTLASS's if found."""
    dirs = [CODEGEN_INCLUDE]
    cutlass = cutlass_include_dir()
    if cutlass is not None:
        dirs.append(cutlass)
    return dirs


def normalize_arch(arch: str | int) -> str:
    """`"sm_90"`, `"sm_90a"`, `"90"`, `90`, `"compute_90"` -> `"sm_90"` / `"sm_90a"`.

    Raises:
        ValueError: `arch` is not of that form.
    """
    text = str(arch).strip().lower()
    m = re.fullmatch(r"(?:sm_|compute_|sm)?(\d{2,3})([a-z]?)", text)
    if not m:
        raise ValueError(f"unknown CUDA architecture {arch!r}; expected e.g. 'sm_90' or 'sm_90a'")
    return f"sm_{m.group(1)}{m.group(2)}"


def extra_flags() -> tuple[str, ...]:
    """The extra nvcc flags of `MIRAGE_XDSL_NVCC_FLAGS`, split like a shell command line.

    Raises:
        ValueError: the variable has unbalanced quotes (from `shlex.split`).
    """
    return tuple(shlex.split(os.environ.get("MIRAGE_XDSL_NVCC_FLAGS", "")))


def nvcc_options(arch: str) -> list[str]:
    """The nvcc options for `arch` (without input/output file names): `BASE_OPTIONS`, `-arch`,
    the include directories and `extra_flags()`.

    Raises:
        ValueError: `arch` is not a CUDA architecture name, or `MIRAGE_XDSL_NVCC_FLAGS` does
            not split.
    """
    arch = normalize_arch(arch)
    if arch.endswith("a"):  # architecture-specific features (wgmma, setmaxnreg): name the one target
        # explicitly with -gencode (nvcc manual, "--generate-code"), no extra plain-sm_90 pass
        opts = list(BASE_OPTIONS) + [f"-gencode=arch=compute_{arch[3:]},code={arch}"]
    else:
        opts = list(BASE_OPTIONS) + [f"-arch={arch}"]
    opts += [f"-I{d}" for d in include_dirs()]
    opts += list(extra_flags())
    return opts


def _headers_digest() -> str:
    """sha256 over our own headers (names and contents), so editing a header invalidates the cache.
    CUTLASS headers are covered by their path (a different wheel version lives elsewhere)."""
    h = hashlib.sha256()
    if CODEGEN_INCLUDE.is_dir():
        for path in sorted(p for p in CODEGEN_INCLUDE.rglob("*") if p.is_file()):
            h.update(str(path.relative_to(CODEGEN_INCLUDE)).encode())
            h.update(b"\0")
            h.update(path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def cache_key(source: str, options: Sequence[str], version: str, arch: str) -> str:
    """sha256 hex of (source, options, nvcc version, arch, our headers).

    Raises:
        ValueError: `arch` is not a CUDA architecture name.
    """
    h = hashlib.sha256()
    for part in (source, "\x1f".join(options), version, normalize_arch(arch), _headers_digest()):
        h.update(part.encode())
        h.update(b"\x1e")
    return h.hexdigest()


def default_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """`cache_dir`, else `$MIRAGE_XDSL_CACHE_DIR`, else `~/.cache/mirage_xdsl`."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("MIRAGE_XDSL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "mirage_xdsl"


# ---------------------------------------------------------------------------------------
# Compilation


def _run_nvcc(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """Run one nvcc command (a separate function so tests can count or fake nvcc runs)."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)


def _first_errors(text: str, limit: int = 12) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    picked = (errors or lines)[:limit]
    more = len(errors or lines) - len(picked)
    return "\n".join(picked) + (f"\n... ({more} more lines)" if more > 0 else "")


def compile_cuda(
    source: str,
    arch: str = "sm_90",
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    nvcc: str | None = None,
) -> Path:
    """Compile a CUDA translation unit to a cubin for `arch`; return the cached cubin's path.

    A second call with the same source, options, nvcc and arch returns the cached file
    without running nvcc.  Works on machines without a GPU.  A module whose PTX has the
    pattern ptxas miscompiles (`ptxas_guard.smem_register_reuse`) is rewritten
    (`ptxas_guard.separate_shared_addresses`) and assembled again (a second nvcc run on the kept
    PTX; at `SAFE_PTXAS_OPTIONS` should the rewrite leave the pattern).

    Args:
        source: the CUDA C++ translation unit (e.g. `CudaProgram.source`).
        arch: the nvcc architecture (`sm_90`, `sm_90a`, `90`, ...).
        cache_dir: the cubin cache folder (None: see `default_cache_dir`).
        nvcc: the nvcc executable (None: `find_nvcc()`).

    Returns:
        `<cache dir>/<key>.cubin`, its sidecar checked or freshly written.

    Raises:
        NvccNotFoundError: no nvcc found, or it cannot be run.
        CudaCompileError: nvcc failed (or timed out after `NVCC_TIMEOUT_S`); the source is
            kept as `failed-<first 16 hex digits of the key>.cu` in the cache dir.
        ValueError: `arch` is not a CUDA architecture name, or `MIRAGE_XDSL_NVCC_FLAGS` does
            not split.
        OSError: the cache dir cannot be created or written.
    """
    arch = normalize_arch(arch)
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise NvccNotFoundError("nvcc not found: install the CUDA toolkit or set MIRAGE_XDSL_NVCC")
    options = nvcc_options(arch)
    version = nvcc_version(nvcc)
    key = cache_key(source, [*options, PTXAS_GUARD], version, arch)
    directory = default_cache_dir(cache_dir)
    _open_cache(directory)
    cubin = directory / f"{key}.cubin"
    if read_entry(cubin, key, {"nvcc": version}) is not None:
        return cubin
    # a miss, or an entry that failed its check (truncated, garbled, another kernel's,
    # no sidecar): compile again and overwrite it
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=TEMP_DIR_PREFIX, dir=directory) as tmp:
        src = Path(tmp) / f"{key[:16]}.cu"
        out = Path(tmp) / f"{key[:16]}.cubin"
        src.write_text(source)
        keep = Path(tmp) / "keep"
        keep.mkdir()
        # --keep: the PTX stays beside the cubin for the ptxas guard (driver/ptxas_guard.py)
        _nvcc_to_cubin(nvcc, [*options, "--keep", f"--keep-dir={keep}"], src, out, directory, key, source, arch)
        ptx = sorted(keep.glob("*.ptx"))  # one module: one architecture per compile
        if ptx and smem_register_reuse(text := ptx[0].read_text(errors="replace")):
            _assemble_guarded(nvcc, options, text, Path(tmp), out, (directory, key, source, arch))
        write_entry(cubin, key, out.read_bytes(), {"nvcc": version, "arch": arch})
    return cubin


def _assemble_guarded(nvcc: str, options: Sequence[str], ptx: str, tmp: Path, out: Path, context: tuple[Path, str, str, str]) -> None:
    """Assemble `ptx`, which has the register reuse ptxas 13.0 miscompiles, into `out`: its
    rewrite (`separate_shared_addresses`) with the usual options, or -- when the rewrite leaves
    a reuse -- `ptx` itself without ptxas's optimizer, with a `PtxasGuardWarning`."""
    rewritten = separate_shared_addresses(ptx)
    left = smem_register_reuse(rewritten)
    path = tmp / "guarded.ptx"
    path.write_text(ptx if left else rewritten)
    _nvcc_to_cubin(nvcc, [*options, *(SAFE_PTXAS_OPTIONS if left else ())], path, out, *context)
    if left:
        kernels = ", ".join(sorted({h.kernel for h in left}))
        warnings.warn(
            f"{kernels}: assembled with {' '.join(SAFE_PTXAS_OPTIONS)} to avoid a ptxas miscompile "
            "(driver/ptxas_guard.py); the numbers are right, the kernels slower",
            PtxasGuardWarning,
            stacklevel=3,
        )


def _nvcc_to_cubin(nvcc: str, options: Sequence[str], src: Path, out: Path, directory: Path, key: str, source: str, arch: str) -> None:
    """Run `nvcc -cubin` on `src` (CUDA or PTX) into `out`.

    Raises:
        CudaCompileError: nvcc failed or timed out (the CUDA source is kept, `_keep_failed`).
        NvccNotFoundError: nvcc cannot be run."""
    cmd = [nvcc, "-cubin", *options, "-o", str(out), str(src)]
    try:
        proc = _run_nvcc(cmd)
    except subprocess.TimeoutExpired:
        kept = _keep_failed(directory, key, source)
        raise CudaCompileError(f"nvcc timed out after {NVCC_TIMEOUT_S} s (source kept at {kept})") from None
    except OSError as err:
        raise NvccNotFoundError(f"cannot run {nvcc}: {err}") from None
    if proc.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
        kept = _keep_failed(directory, key, source)
        detail = _first_errors(proc.stderr + proc.stdout)
        raise CudaCompileError(f"nvcc failed for {arch} (exit {proc.returncode}; source kept at {kept}):\n{detail}")


_OPENED: set[Path] = set()


def _open_cache(directory: Path) -> None:
    """First use of a cache dir in this process: remove temporaries that killed processes
    left behind (stale `mirage_nvcc_*` folders and `.tmp` files, see driver/disk_cache.py)."""
    if directory in _OPENED:
        return
    _OPENED.add(directory)
    if directory.is_dir():
        clean_stale_temporaries(directory)


def _keep_failed(directory: Path, key: str, source: str) -> Path:
    kept = directory / f"failed-{key[:16]}.cu"
    try:
        atomic_write_bytes(kept, source.encode())
    except OSError:
        pass
    return kept
