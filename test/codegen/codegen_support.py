"""Helpers the codegen tests share: the MLIR context and parser, the rmsnorm graph-0 lit input,
nvcc (found and run with the results cached by content), the host C++ compiler, the emulated
comparison with the reference executor, and kn-fuse's plans of a plain graph lowered."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.codegen import cuda_printer
from mirage_xdsl.codegen.cuda_target import CudaProgram
from mirage_xdsl.driver.compile import make_context

make_ctx = make_context


def find_nvcc() -> str | None:
    try:
        from mirage_xdsl.driver.nvcc import find_nvcc as runtime_find

        found = runtime_find()
    except ImportError:  # pragma: no cover - runtime helper absent
        found = None
    return found or shutil.which("nvcc")


def nvcc_command(nvcc: str, src: Path, out: Path, arch: str = "sm_90") -> list[str]:
    include = Path(cuda_printer.__file__).resolve().parent / "include"
    return [
        nvcc,
        "-cubin",
        "-std=c++17",
        "-O3",
        "--expt-relaxed-constexpr",
        f"-arch={arch}",
        f"-I{include}",
        "-o",
        str(out),
        str(src),
    ]


def headers_digest() -> str:
    include = Path(cuda_printer.__file__).resolve().parent / "include"
    h = hashlib.sha256()
    for p in sorted(include.rglob("*")):
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def cache_dir() -> Path:
    base = os.environ.get("MIRAGE_XDSL_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "mirage_xdsl") / "codegen-test"


def nvcc_compile(source: str, nvcc: str) -> dict:
    """{rc, stderr, seconds} of `nvcc -cubin` for sm_90, cached by content."""
    key = hashlib.sha256((source + headers_digest() + nvcc + "sm_90").encode()).hexdigest()[:32]
    cdir = cache_dir()
    cached = cdir / f"{key}.json"
    if cached.is_file():
        return json.loads(cached.read_text()) | {"cached": True}
    cdir.mkdir(parents=True, exist_ok=True)
    tmp = cdir / f"tmp-{key}-{os.getpid()}"
    tmp.mkdir(exist_ok=True)
    try:
        src = tmp / "module.cu"
        src.write_text(source)
        t0 = time.perf_counter()
        proc = subprocess.run(nvcc_command(nvcc, src, tmp / "module.cubin"), capture_output=True, text=True)
        out = {"rc": proc.returncode, "stderr": proc.stderr + proc.stdout, "seconds": time.perf_counter() - t0}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if out["rc"] == 0:
        cached.write_text(json.dumps(out))
    return out | {"cached": False}


RMSNORM_G0 = Path(__file__).parents[1] / "filecheck" / "codegen" / "rmsnorm-graph0.mlir"


def parse(text: str) -> ModuleOp:
    from xdsl.parser import Parser

    return Parser(make_ctx(), text).parse_module()


def have_cxx() -> bool:
    from mirage_xdsl.runtime.host_emulator import find_cxx

    return find_cxx() is not None


def assert_emulation_matches(module: ModuleOp, program: CudaProgram, name: str, scale: float, seed: int) -> None:
    """The host-emulated `program` computes `module`'s function `name` on fresh fp16 inputs
    uniform(-scale, scale): no NaN (nothing unwritten read) and relative error < 1e-2."""
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-scale, scale, size=s.shape).astype(np.float16) for s in program.plans[name].inputs]
    (ref,) = run_reference(module, [x.astype(np.float64) for x in inputs])
    (out,) = HostEmulator(program).run(name, inputs)
    assert not np.isnan(out).any()
    assert np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2


def fused_and_lowered(text: str, ranks: int) -> Iterator[tuple[int, ModuleOp, ModuleOp]]:
    """(rank, the plain graph `text` fused with kn-fuse's plan of that cost rank, the same
    after mirage-transpile) for ranks 0 .. ranks-1."""
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass, fuse_plain_graphs

    for rank in range(ranks):
        module = Parser(make_ctx(), text).parse_module()
        fuse_plain_graphs(make_ctx(), module, candidate=rank)
        lowered = module.clone()
        MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
        yield rank, module, lowered
