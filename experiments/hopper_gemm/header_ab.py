"""A/B of the device headers on the sm_90a GEMM: each workload compiled against the tree's
headers ("new") and against an older copy of them in codegen/include/mirage_xdsl_old/ ("old"),
checked against torch and timed beside cuBLAS in one process (`bench.contraction.probe`:
interleaved rounds of CUDA-graph replays), two passes.  Prints TFLOP/s per variant.

Before the device call, copy the older headers (REV: the commit to compare with):

    mkdir -p codegen/include/mirage_xdsl_old
    for f in $(git ls-tree --name-only REV codegen/include/mirage_xdsl/); do
      git show REV:$f > codegen/include/mirage_xdsl_old/$(basename "$f"); done
    python experiments/hopper_gemm/header_ab.py      # on the GPU machine

The folder is git-ignored: name it in the device call's `carry`.  The headers include each other
by relative paths, so the copy is self-contained; the generated source's `#include
"mirage_xdsl/..."` lines are pointed at it for the "old" variants.
"""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mirage_xdsl.driver.einsum as einsum_driver
import mirage_xdsl.driver.nvcc as nvcc
from mirage_xdsl.bench.contraction import probe
from mirage_xdsl.bench.workloads import CONTRACTIONS_BY_NAME, ContractionWorkload
from mirage_xdsl.driver.compile import prepare
from mirage_xdsl.frontends.einsum import einsum_module

OLD_DIR = Path(nvcc.CODEGEN_INCLUDE) / "mirage_xdsl_old"
_use_old = [False]
_compile_cuda = nvcc.compile_cuda
_compile_einsum = einsum_driver.compile_einsum


def _with_old_headers(source: str) -> str:
    return source.replace('#include "mirage_xdsl/', '#include "mirage_xdsl_old/')


def compile_cuda(source, arch, **kw):  # type: ignore[no-untyped-def]
    return _compile_cuda(_with_old_headers(source) if _use_old[0] else source, arch, **kw)


def compile_einsum(equation, shapes, dtype, old=False, **kw):  # type: ignore[no-untyped-def]
    _use_old[0] = old
    einsum_driver._CACHE.clear()  # its key does not tell the headers apart
    try:
        return _compile_einsum(equation, shapes, dtype, **kw)
    finally:
        _use_old[0] = False


nvcc.compile_cuda = compile_cuda
einsum_driver.compile_einsum = compile_einsum
import mirage_xdsl.bench.contraction as contraction  # noqa: E402

contraction.compile_einsum = compile_einsum  # type: ignore[attr-defined]

AB = {"new": {}, "old": {"old": True}}
PINGPONG = {"new": {}, "old": {"old": True}, "new pp": {"pingpong": 1}, "old pp": {"old": True, "pingpong": 1}}
WORK = [
    (ContractionWorkload("bmm_nt_8x1024", "cmk,cnk->cmn", ((8, 1024, 1024), (8, 1024, 1024))), AB),
    (ContractionWorkload("bmm_nt_8x1024_bf16", "cmk,cnk->cmn", ((8, 1024, 1024), (8, 1024, 1024)), "bfloat16"), AB),
    (ContractionWorkload("gemm_2048", "mk,kn->mn", ((2048, 2048), (2048, 2048))), AB),
    (CONTRACTIONS_BY_NAME["gemm_4096_fp16"], PINGPONG),
    (CONTRACTIONS_BY_NAME["bshd_hdn"], PINGPONG),
]


def _compile_all() -> None:
    """Every variant's cubin, compiled in parallel first (nvcc is the slow part)."""
    jobs = []
    for w, variants in WORK:
        for options in variants.values():
            options = dict(options)
            old = options.pop("old", False)
            program = prepare(einsum_driver.lower_einsum(einsum_module(w.equation, w.shapes, w.dtype), **options), arch=einsum_driver.ARCH)
            jobs.append((_with_old_headers(program.program.source) if old else program.program.source, program.arch))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda job: _compile_cuda(*job), jobs))


if __name__ == "__main__":
    if not OLD_DIR.is_dir():
        raise SystemExit(f"header_ab: {OLD_DIR} is missing: copy the older headers there first (module docstring)")
    _compile_all()
    for _ in range(2):
        for w, variants in WORK:
            probe([w], variants)
