"""Split-K combined inside the kernel (`tb.grid_sum` -> `cute.grid_sum`): the grid sum and its
arrival counters, the late finisher (`cute-late-finisher`), the device library's partial sums
and L2 discards checked on the host, and kn-fuse's grid-sum plans, emulated against the
numpy reference executor."""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from codegen_support import assert_emulation_matches, fused_and_lowered, have_cxx, make_ctx, parse
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, f32, i64

from mirage_xdsl.codegen.cuda_target import CudaProgram, emit_cuda
from mirage_xdsl.codegen.launch_plan import KernelLaunch
from mirage_xdsl.dialects import cute


def emulate_split_k_rms_twice(module: ModuleOp, program: CudaProgram, seed: int) -> None:
    """Two host-emulated runs of split_k_rms in a row on fresh inputs match the reference of
    `module`, and each leaves the counter buffer zero (re-armed for the next launch)."""
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    plan = program.plans["split_k_rms"]
    emu = HostEmulator(program)
    rng = np.random.default_rng(seed)
    for _ in range(2):
        inputs = [rng.uniform(-1, 1, size=s.shape).astype(np.float16) for s in plan.inputs]
        (ref,) = run_reference(module, [x.astype(np.float64) for x in inputs])
        (out,) = emu.run("split_k_rms", inputs)
        assert not np.isnan(out).any()
        assert np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2
        assert not emu.counters["split_k_rms"].any()  # re-armed for the next launch


@pytest.mark.parametrize("reduce_partials", [False, True])
def test_grid_sum_emulated(reduce_partials: bool) -> None:
    """A split-K rms_norm(X) @ W kernel whose four split blocks per column tile meet in a grid
    sum: the plan passes the workspace scratch and one arrival counter per group, the last
    block stores, and two runs in a row (the counters must be re-armed by the first) match
    the reference.  With `reduce_partials` the sum of squares is reduced to [2, 1] before
    the grid sum, in fp32, so each block's partials shrink."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    text = (Path(__file__).parents[1] / "data" / "split_k_grid_sum.mlir").read_text()
    module = Parser(make_ctx(), text).parse_module()
    lowered = module.clone()
    # equal splits (late_finisher=0): the last block to arrive sums (the late finisher's
    # protocol has its own tests)
    MirageTranspilePass(lift=False, tuning=f"reduce_partials={reduce_partials},late_finisher=0").apply(make_ctx(), lowered)
    (grid_sum,) = [op for op in lowered.walk() if isinstance(op, cute.GridSumOp)]
    assert len(grid_sum.ins) == 2 and grid_sum.grid_axis == 1
    partial_shapes = sorted(tuple(v.type.get_shape()) for v in grid_sum.ins)
    assert all(v.type.element_type == f32 for v in grid_sum.ins)
    program = emit_cuda(lowered)
    # the last block drops its group's partials from L2 after its last use of them (the
    # emulator poisons the discarded lines, so a discard too early shows up as NaN below)
    discard = program.source.index("mx::grid_discard_partials<")
    assert discard > program.source.rindex("mx::grid_partial_sum")
    plan = program.plans["split_k_rms"]
    (step,) = plan.steps
    assert isinstance(step, KernelLaunch) and plan.counters == 2  # one per column tile
    assert [r.kind for r in step.args[-2:]] == ["workspace", "counters"]
    if reduce_partials:  # 8 blocks x fp32 [2, 1] + [2, 32] partials
        assert partial_shapes == [(2, 1), (2, 32)]
        assert 2 * 4 * (2 + 64) * 4 <= plan.workspace_bytes < 2 * 4 * (64 + 64) * 4
    else:  # 8 blocks x two fp32 [2, 32] partials
        assert partial_shapes == [(2, 32), (2, 32)]
        assert plan.workspace_bytes >= 2 * 4 * (64 + 64) * 4
    emulate_split_k_rms_twice(module, program, seed=3)


def split_k_rms_text(rows: int) -> str:
    """test/data/split_k_grid_sum.mlir (X [2, 256]) with X and the output widened to `rows` rows."""
    text = (Path(__file__).parents[1] / "data" / "split_k_grid_sum.mlir").read_text()
    return re.sub(r"(?<![0-9])2x(256|32|64|1)x", rf"{rows}x\1x", text)


@pytest.mark.parametrize("rows", [2, 16])
def test_late_finisher_emulated(rows: int) -> None:
    """The split-K kernel with a late finisher (mirage-transpile's default `late_finisher=1`): partners
    run 1 of the 8 iterations of a column tile each, the finisher 5; the plan passes only
    the counter buffer, sized for the partners' words (2 groups x 3 partners x one slot);
    two runs in a row match the reference (the finisher re-armed every word, so the second
    run waits on fresh partials) and leave the buffer zero.  With 16 rows the sum of
    squares runs on the tensor cores (mx::SquareSumMma), whose result feeds the rms."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = Parser(make_ctx(), split_k_rms_text(rows)).parse_module()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    (grid_sum,) = [op for op in lowered.walk() if isinstance(op, cute.GridSumOp)]
    assert grid_sum.partner_trip_count == 1
    slot = sum(math.prod(v.type.get_shape()) for v in grid_sum.ins)
    program = emit_cuda(lowered)
    assert ("mx::SquareSumMma<" in program.source) == (rows == 16)
    assert "grid_arrive" not in program.source and "gw0.wait(" in program.source
    plan = program.plans["split_k_rms"]
    (step,) = plan.steps
    assert isinstance(step, KernelLaunch) and plan.counters == 2 * 3 * slot
    assert [r.kind for r in step.args[-2:]] == ["input", "counters"]
    emulate_split_k_rms_twice(module, program, seed=5)


def test_late_finisher_skips_wide_splits() -> None:
    """cute-late-finisher leaves a kernel alone when its finisher would hold more than
    MAX_PARTNER_WORDS partner words per thread (rmsnorm bs8's 8-way split plans: those
    kernels spilled and ptxas emitted an illegal instruction), and takes the 4-way one."""
    from mirage_xdsl.bench.prepare import _module, _variant_module
    from mirage_xdsl.passes.cute.late_finisher import MAX_PARTNER_WORDS, partner_words_per_thread

    module = _module(str(Path(__file__).parents[2] / "examples" / "rmsnorm_linear_bs8.mlir"))
    for variant, late in (("c4s4xrf1", False), ("c0s7xrf1", True)):
        lowered = _variant_module(module, "rmsnorm_linear_bs8", variant)
        (kernel,) = [op for op in lowered.walk() if isinstance(op, cute.KernelOp)]
        (grid_sum,) = [op for op in kernel.walk() if isinstance(op, cute.GridSumOp)]
        assert (grid_sum.partner_trip_count is not None) == late
        assert (partner_words_per_thread(kernel, grid_sum) <= MAX_PARTNER_WORDS) == late


def test_late_finisher_weight_streams_without_l2_policy_by_default() -> None:
    """The evict_first L2 policy on the finisher's weight loads is opt-in (`evict_first`):
    ptxas (CUDA 13.0) gave its cp.async descriptor an odd uniform-register pair in
    rmsnorm_linear's c0s8xrf1 / c0s8xrf2 / c0s4xrf2 kernels, which fault with an illegal
    instruction on an H100 (found by mirage-tune; test_gpu_late_finisher_stage_shift_grid)."""
    from mirage_xdsl.bench.prepare import _module, _variant_module
    from mirage_xdsl.passes.cute.late_finisher import LateFinisherPass

    module = _module(str(Path(__file__).parents[2] / "examples" / "rmsnorm_linear.mlir"))
    for variant in ("c0s8xrf1", "c0s4xrf2", "c0s7xrf1"):
        lowered = _variant_module(module, "rmsnorm_linear", variant)
        assert not any(cute.L2_EVICT_FIRST in op.attributes for op in lowered.walk())
        assert "g2s_async_evict_first" not in emit_cuda(lowered).source
    lowered = _variant_module(module, "rmsnorm_linear", "c0s7x")
    for grid_sum in [op for op in lowered.walk() if isinstance(op, cute.GridSumOp)]:
        grid_sum.partner_trips = None
    LateFinisherPass(shift=1, evict_first=True).apply(make_ctx(), lowered)
    assert any(cute.L2_EVICT_FIRST in op.attributes for op in lowered.walk())


def test_late_finisher_verifier_rejects_bad_splits() -> None:
    """cute.grid_sum's partner_trips must leave the finisher work: 1 <= E < the loop's trip count."""
    from xdsl.utils.exceptions import VerifyException

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    lowered = parse(split_k_rms_text(2))
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    (grid_sum,) = [op for op in lowered.walk() if isinstance(op, cute.GridSumOp)]
    grid_sum.partner_trips = IntegerAttr(2, i64)
    with pytest.raises(VerifyException, match=r"partner_trips = 2 must lie in \[1, 2\)"):
        grid_sum.verify()


GRID_PARTIAL_SUM_CHECK = r"""
#include "mirage_xdsl/grid.cuh"
#include <cstdio>
#include <vector>
template <int N> struct Flat { static constexpr int size = N; static int off(int i) { return i; } };
template <int NT, int S, int N> int check() {
  constexpr int SLOT = N + 8;
  std::vector<float> parts(S * SLOT), out(N, -1.0f);
  for (int s = 0; s < S; ++s)
    for (int i = 0; i < N; ++i) parts[s * SLOT + i] = float((i * 7 + s * 3) % 11) - 5.0f;
  for (int tid = 0; tid < NT; ++tid) mx::grid_partial_sum<NT, S, SLOT, Flat<N>>(out.data(), parts.data(), tid);
  int bad = 0;
  for (int i = 0; i < N; ++i) {
    float want = 0.0f;
    for (int s = 0; s < S; ++s) want += parts[s * SLOT + i];
    bad += out[i] != want;
  }
  std::printf("%d %d %d %d\n", NT, S, N, bad);
  return bad;
}
int main() {
  return check<128, 8, 2>() + check<128, 4, 16>() + check<128, 8, 128>() + check<128, 4, 200>()
       + check<128, 4, 1024>() + check<128, 2, 1029>() + check<64, 3, 64 * 11 + 5>() + check<256, 4, 256 * 17>();
}
"""


def run_host_check(tmp_path: Path, source: str) -> str:
    """Build the C++ program `source` against the device library in host emulation
    (-DMX_HOST) and run it; its stdout, after asserting that it exited 0 (its count of wrong
    values).  Skips the test without a host C++ compiler."""
    from mirage_xdsl.runtime.host_emulator import INCLUDE_DIR, find_cxx

    cxx = find_cxx()
    if cxx is None:
        pytest.skip("no host C++ compiler")
    src = tmp_path / "check.cpp"
    src.write_text(source)
    exe = tmp_path / "check"
    subprocess.run([cxx, "-std=c++17", "-O1", "-DMX_HOST", "-w", f"-I{INCLUDE_DIR}", "-o", str(exe), str(src)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    return run.stdout


def test_grid_partial_sum_host(tmp_path: Path) -> None:
    """mx::grid_partial_sum adds every element's partials, for tiles of fewer elements than
    threads, whole trips (one batch, several, a remainder batch) and a partial last trip."""
    report = run_host_check(tmp_path, GRID_PARTIAL_SUM_CHECK)
    assert len(report.split("\n")) == 9  # eight cases, each reporting 0 wrong elements


GRID_DISCARD_CHECK = r"""
#include "mirage_xdsl/grid.cuh"
#include <cmath>
#include <cstdio>
#include <vector>
// Discard the group [first, first + floats) of a 128-byte-aligned buffer with a block of NT
// threads; the poisoned floats must be exactly those of the 128-byte lines wholly inside it.
template <int NT>
int check(int first, int floats) {
  std::vector<float> buf(8192 + 32, 1.0f);
  float* base = reinterpret_cast<float*>((reinterpret_cast<unsigned long long>(buf.data()) + 127) & ~127ull);
  mxh::run_block({0, 0, 0}, {NT, 1, 1}, [&] { mx::grid_discard_partials<NT>(base + first, floats, (int)threadIdx.x); });
  int bad = 0;
  for (int i = 0; i < 8192; ++i) {
    const int line = i / 32;
    const bool inside = line * 32 >= first && line * 32 + 32 <= first + floats;
    bad += std::isnan(base[i]) != inside;
  }
  std::printf("%d %d %d %d\n", NT, first, floats, bad);
  return bad;
}
int main() {
  return check<128>(0, 4160) + check<128>(1040, 1040) + check<32>(5, 3000) + check<64>(16, 20) + check<128>(96, 32);
}
"""


def test_grid_discard_partials_host(tmp_path: Path) -> None:
    """mx::grid_discard_partials drops exactly the 128-byte lines wholly inside a group's slots
    (poisoned with NaN on the host): none at the group's unaligned edges, which it shares with
    its neighbours, none outside, and every line for blocks of any width."""
    report = run_host_check(tmp_path, GRID_DISCARD_CHECK)
    assert len(report.split("\n")) == 6  # five cases, each reporting 0 wrong floats


def test_planned_grid_sum_emulated() -> None:
    """kn-fuse's grid-sum plans of a small rms_norm(X) @ W compute the plain graph."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    text = """
    func.func @small(%X: tensor<2x1024xf16>, %W: tensor<1024x256xf16>) -> tensor<2x256xf16> {
      %n = kn.rms_norm %X {normalized_shape = array<i64: 1024>} : tensor<2x1024xf16>
      %o = kn.matmul %n, %W : tensor<2x1024xf16>, tensor<1024x256xf16> -> tensor<2x256xf16>
      func.return %o : tensor<2x256xf16>
    }"""
    found = 0
    for rank, module, lowered in fused_and_lowered(text, 12):
        kernels = [op for op in module.walk() if op.name == "kn.customized"]
        if len(kernels) != 1 or not kernels[0].attributes["kn.template"].data.endswith("_grid_sum"):  # type: ignore[attr-defined]
            continue
        assert_emulation_matches(module, emit_cuda(lowered), "small", scale=0.5, seed=rank)
        found += 1
        if found == 2:
            break
    assert found == 2
