"""Inputs that the previous grid (programmatic dependent launch) or another megakernel task
writes must not be read through the non-coherent cache: nvcc emits `ld.global.nc` for a const
input only when it can prove that nothing the kernel stores aliases it, which `__restrict__`
on the kernel's pointers allows.  A decoder layer's per-kernel rms_norm read stale lines that
way after the o-projection kernel triggered its launch (H200, 2026-11-26: output error 1.3,
correct with PDL off).  Compiled to PTX here (skipped without nvcc)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import mirage_xdsl as mx
from mirage_xdsl.driver.compile import prepare


def _graph(weight: bool):
    """x [1, 4096] -> x @ W -> + x -> rms_norm: the last kernel is a register row chain over
    the previous kernel's output."""
    g = mx.new_kernel_graph("pdl_rows")
    x = g.new_input((1, 4096), dtype="float16", name="x")
    w = g.new_input((4096, 4096), dtype="float16", name="W", weight=weight)
    h = g.add(x, g.matmul(x, w))
    g.mark_output(g.rms_norm(h, (4096,)))
    return g.module


def _ptx(source: str, tmp_path: Path) -> str:
    from mirage_xdsl.codegen.device_library import DEVICE_LIBRARY_INCLUDE

    src = tmp_path / "k.cu"
    src.write_text(source)
    out = tmp_path / "k.ptx"
    cmd = ["nvcc", "-arch=sm_90a", "-ptx", "-std=c++17", f"-I{DEVICE_LIBRARY_INCLUDE}", "-o", str(out), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[:2000]
    return out.read_text()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_no_kernel_reads_an_intermediate_through_the_non_coherent_cache(tmp_path: Path) -> None:
    prepared = prepare(_graph(weight=False), None, "sm_90")
    assert len([s for s in prepared.plan.steps if getattr(s, "pdl", False)]) >= 2
    ptx = _ptx(prepared.program.source, tmp_path)
    entries = re.split(r"\.entry ", ptx)[1:]
    assert entries and all("ld.global.nc" not in body for body in entries)


def test_outputs_are_not_restrict_and_weights_are() -> None:
    """Outputs lose `__restrict__` (it lets nvcc prove const inputs read-only); kn.weight
    inputs keep `const __restrict__` (nothing queued before the launch writes them)."""
    source = prepare(_graph(weight=True), None, "sm_90").program.source
    assert re.search(r"mx::f16\* o\d", source) and not re.search(r"mx::f16\* __restrict__ o\d", source)
    assert re.search(r"const mx::f16\* __restrict__ i\d", source)
