"""Numerics of generated kernels without a GPU, in the host emulator against the numpy reference
executor: the FMA fallback, synthetic graphs with the ops no shared muGraph file uses (and one
nvcc run over them), forced cp.async pipeline depths, bfloat16, sliced K, a register
accumulator inside the cp.async rings, and a 512-thread row-wise block."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from codegen_support import RMSNORM_G0, assert_emulation_matches, find_nvcc, have_cxx, make_ctx, nvcc_compile, parse
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, f64
from xdsl.utils.exceptions import DiagnosticException

from mirage_xdsl.codegen import kernel_resources
from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.codegen.launch_plan import KernelLaunch
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.row_chains import ROW_CHAIN_SMEM
from mirage_xdsl.passes.conversion.tb_to_cute import ConvertTbToCutePass
from mirage_xdsl.passes.cute.register_accumulators import register_accumulators
from mirage_xdsl.passes.pipeline import CuteDecisionsPass


def test_host_emulation_fma_fallback() -> None:
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    source = RMSNORM_G0.read_text()
    module = parse(source)
    MirageTranspilePass(lift=False, to_cute=False).apply(make_ctx(), module)
    ConvertTbToCutePass(tensor_cores=False).apply(make_ctx(), module)
    CuteDecisionsPass().apply(make_ctx(), module)
    program = emit_cuda(module)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 4096)).astype(np.float16)
    w = rng.uniform(-1, 1, (4096, 6144)).astype(np.float16)
    (out,) = HostEmulator(program).run("graph_0", [x, w])
    (ref,) = run_reference(parse(source), [x.astype(np.float64), w.astype(np.float64)])
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-2


# ---------------------------------------------------------------------------------------
# Synthetic graphs: the ops no shared file uses (emulated numerics)


def graph_misc_ops() -> ModuleOp:
    """sub/clamp/gelu/mul_scalar chain into nored, concat + sum_todimx, max of sigmoid, rms of
    relu, post-loop add, tb.rms_norm and pow."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("misc")
    X = g.new_input(dims=(64, 256), dtype="float16")
    Y = g.new_input(dims=(64, 256), dtype="float16")
    tb = new_threadblock_graph(grid_dim=(4, 1, 1), forloop_range=4)
    a = tb.new_input(X, input_map=(0, -1, -1), forloop_dim=1)
    b = tb.new_input(Y, input_map=(0, -1, -1), forloop_dim=1)
    acc1 = tb.forloop_accum(tb.mul_scalar(tb.gelu(tb.clamp(tb.sub(a, b), -0.5, 0.7)), 0.5))
    acc2 = tb.forloop_accum(tb.concat(a, b, 1), "sum_todimx")
    acc3 = tb.forloop_accum_max(tb.sigmoid(a))
    acc4 = tb.forloop_accum(tb.relu(b), "rms")
    tb.new_output(tb.add(acc1, acc2), output_map=(0, -1, -1))
    tb.new_output(tb.rms_norm(acc3), output_map=(0, -1, -1))
    tb.new_output(tb.pow(acc3, acc4), output_map=(0, -1, -1))
    for out in g.customized([X, Y], tb):
        g.mark_output(out)
    return g.module


def graph_online_softmax() -> ModuleOp:
    """Flash-attention style: running reduction_max, exp(s - m), rescale accumulators."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("osm")
    Q = g.new_input(dims=(2, 64, 64), dtype="float16")
    K = g.new_input(dims=(2, 64, 512), dtype="float16")
    V = g.new_input(dims=(2, 512, 64), dtype="float16")
    tb = new_threadblock_graph(grid_dim=(2, 4, 1), forloop_range=4)
    q = tb.new_input(Q, input_map=(0, 1, -1), forloop_dim=-1)
    k = tb.new_input(K, input_map=(0, -1, -1), forloop_dim=2)
    v = tb.new_input(V, input_map=(0, -1, -1), forloop_dim=1)
    s = tb.matmul(q, k)
    m, delta = tb.reduction_max(s, 2)
    e = tb.exp(tb.sub(s, m))
    r = tb.exp(delta)
    total = tb.forloop_accum_rescale(e, r, "sum")
    o = tb.forloop_accum_rescale(tb.matmul(e, v), r)
    tb.new_output(tb.div(o, total), output_map=(0, 1, -1))
    (out,) = g.customized([Q, K, V], tb)
    g.mark_output(out)
    return g.module


def graph_fp32_fma() -> ModuleOp:
    """fp32 operands (UniversalFMA), an exp epilogue on the matmul, and kernel-level silu +
    strided reduction library steps over the workspace."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("f32mm")
    X = g.new_input(dims=(24, 96), dtype="float32")
    W = g.new_input(dims=(96, 40), dtype="float32")
    tb = new_threadblock_graph(grid_dim=(2, 1, 1), forloop_range=3)
    x = tb.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    w = tb.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    tb.new_output(tb.forloop_accum(tb.exp(tb.matmul(x, w))), output_map=(1, -1, -1))
    (out,) = g.customized([X, W], tb)
    g.mark_output(g.reduction(g.silu(out), 1, 4))
    return g.module


def graph_odd_matmul() -> ModuleOp:
    """M = 20, N = 12, K = 40 per block: nothing divides the 16x8x16 atom."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("odd")
    X = g.new_input(dims=(20, 120), dtype="float16")
    W = g.new_input(dims=(120, 36), dtype="float16")
    tb = new_threadblock_graph(grid_dim=(3, 1, 1), forloop_range=3)
    x = tb.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    w = tb.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    tb.new_output(tb.silu(tb.forloop_accum(tb.matmul(x, w))), output_map=(1, -1, -1))
    (out,) = g.customized([X, W], tb)
    g.mark_output(out)
    return g.module


SYNTHETIC = {
    "misc": (graph_misc_ops, 0.05, 0.5),
    "osm": (graph_online_softmax, -0.5, 0.5),
    "f32mm": (graph_fp32_fma, -0.5, 0.5),
    "odd": (graph_odd_matmul, -0.5, 0.5),
}


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_synthetic_graph_emulated(name: str) -> None:
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    build, lo, hi = SYNTHETIC[name]
    module = build()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    program = emit_cuda(lowered)
    plan = program.plans[name]
    rng = np.random.default_rng(1)
    inputs = [rng.uniform(lo, hi, size=s.shape).astype(s.dtype) for s in plan.inputs]
    outputs = HostEmulator(program).run(name, inputs)
    refs = run_reference(module, [x.astype(np.float64) for x in inputs])
    assert len(outputs) == len(refs)
    for out, ref in zip(outputs, refs):
        assert not np.isnan(out).any()
        err = np.abs(out.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-6)
        assert err < 1e-2, f"{name}: max error {err:.3g}"


def looped_matmul_graph(name: str, n: int, forloop_range: int) -> ModuleOp:
    """X [16, 256] @ W [256, n]: two blocks over W's columns, a for-loop over K."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph(name)
    X = g.new_input(dims=(16, 256), dtype="float16")
    W = g.new_input(dims=(256, n), dtype="float16")
    tb = new_threadblock_graph(grid_dim=(2, 1, 1), forloop_range=forloop_range)
    x = tb.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    w = tb.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    tb.new_output(tb.forloop_accum(tb.matmul(x, w)), output_map=(1, -1, -1))
    (out,) = g.customized([X, W], tb)
    g.mark_output(out)
    return g.module


def graph_deep_pipeline() -> ModuleOp:
    """A matmul over 8 iterations: both inputs cp.async pipelined, several stages deep."""
    return looped_matmul_graph("deep", 64, 8)


@pytest.mark.parametrize("stages", [2, 3, 5, 8])
def test_pipeline_stages_emulated(stages: int) -> None:
    """Forced pipeline depths give the same numbers; a cp.async wait one group too weak reads
    a buffer whose copy has not landed (the emulator lands copies only at the wait), so the
    emulation sees the poisoned shared memory."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    import dataclasses
    import re

    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    module = graph_deep_pipeline()
    lowered = module.clone()
    MirageTranspilePass(lift=False, tuning=f"stages={stages}").apply(make_ctx(), lowered)
    program = emit_cuda(lowered)
    assert f"mx::cp_async_wait<{stages - 1}>();" in program.source
    assert program.source.count("mx::cp_async_commit();") == stages  # prologue N-1 + the loop's
    rng = np.random.default_rng(3)
    inputs = [rng.uniform(-0.5, 0.5, size=s.shape).astype(s.dtype) for s in program.plans["deep"].inputs]
    (ref,) = run_reference(module, [x.astype(np.float64) for x in inputs])
    (out,) = HostEmulator(program).run("deep", inputs)
    assert np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2
    weak = re.sub(r"cp_async_wait<(\d+)>", lambda m: f"cp_async_wait<{int(m.group(1)) + 1}>", program.source)
    (bad,) = HostEmulator(dataclasses.replace(program, source=weak)).run("deep", inputs)
    assert np.isnan(bad).any() or np.abs(bad.astype(np.float64) - ref).max() / np.abs(ref).max() > 1e-2


def test_synthetic_graphs_compile() -> None:
    """The synthetic graphs (and a bf16 variant of the odd matmul) in one nvcc run."""
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    funcs = []
    for build, _, _ in SYNTHETIC.values():
        module = build()
        MirageTranspilePass(lift=False).apply(make_ctx(), module)
        funcs += [op.clone() for op in module.body.block.ops]
    bf = graph_odd_matmul()
    text = str(bf).replace("f16", "bf16").replace("@odd", "@odd_bf16")
    bf = parse(text)
    MirageTranspilePass(lift=False).apply(make_ctx(), bf)
    funcs += [op.clone() for op in bf.body.block.ops]
    program = emit_cuda(ModuleOp(funcs))
    assert "SM80_16x8x16_F32BF16BF16F32_TN" in program.source
    assert "mx::reduce_max_running<" in program.source and "mx::fma_run<" in program.source
    out = nvcc_compile(program.source, nvcc)
    assert out["rc"] == 0 and "warning" not in out["stderr"].lower(), out["stderr"][:3000]


def graph_bf16_kernel_and_library() -> ModuleOp:
    """bf16 (how a data_type-941 muGraph file imports by default): a kernel-level matmul and
    exp next to a customized op (mha_bs1-style), so both kernels and kernel-level steps run."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("bf")
    X = g.new_input(dims=(2, 16, 64), dtype="bfloat16")
    W = g.new_input(dims=(2, 64, 32), dtype="bfloat16")
    E = g.exp(g.matmul(X, W))
    tb = new_threadblock_graph(grid_dim=(2, 2, 1), forloop_range=2)
    e = tb.new_input(E, input_map=(0, 1, -1), forloop_dim=2)
    tb.new_output(tb.forloop_accum(e, "sum"), output_map=(0, 1, -1))
    (out,) = g.customized([E], tb)
    g.mark_output(out)
    g.mark_output(E)
    return g.module


def test_host_emulation_bfloat16() -> None:
    """The host emulator stores bfloat16 as uint16 bits (numpy has no bf16): it used to raise
    KeyError('bfloat16') for every bf16 plan (e.g. era-B muGraph files imported as era C)."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator
    from mirage_xdsl.runtime.library_ops import load, store

    module = graph_bf16_kernel_and_library()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    program = emit_cuda(lowered)
    plan = program.plans["bf"]
    assert [s.dtype for s in plan.inputs] == ["bfloat16", "bfloat16"]
    rng = np.random.default_rng(5)
    inputs = [rng.uniform(-0.5, 0.5, size=s.shape).astype(np.float32) for s in plan.inputs]
    rounded = []
    for x in inputs:  # the values the emulator actually sees
        bits = np.empty(x.shape, np.uint16)
        store(bits, x, "bfloat16", np)
        rounded.append(load(bits, "bfloat16", np).astype(np.float64))
    outputs = HostEmulator(program).run("bf", inputs)
    refs = run_reference(module, rounded)
    assert [o.dtype for o in outputs] == [np.float32, np.float32]
    for out, ref in zip(outputs, refs):
        assert out.shape == ref.shape and not np.isnan(out).any()
        err = np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max()
        assert err < 2e-2, f"max error {err:.3g}"  # bf16: 8-bit mantissa


# ---------------------------------------------------------------------------------------
# Sliced K, register accumulators, wide blocks


def graph_sliced_k() -> ModuleOp:
    """16-column blocks: a (1, 2) thr_layout in a block of four warps, so the two idle warps
    take half of every call's k-steps (sliced K)."""
    return looped_matmul_graph("sliced", 32, 4)


def test_sliced_k_emulated() -> None:
    """Sliced K: the accumulator is declared with 2 slices, the launch adds the partial-sum
    scratch to the plan's shared memory, and the emulated numbers match the reference."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = graph_sliced_k()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    kernel = next(op for op in lowered.walk() if isinstance(op, cute.KernelOp))
    slicing = kernel_resources.mma_slicing(kernel)
    assert list(slicing.slices.values()) == [2]
    assert slicing.total == 1 * 2 * 32 * 4 * 4  # one extra slice of two warps, 4 floats per lane
    program = emit_cuda(lowered)
    assert ", 2> f0;" in program.source and "K sliced over 2 warp groups" in program.source
    (step,) = program.plans["sliced"].steps
    assert isinstance(step, KernelLaunch) and step.smem_bytes == slicing.base + slicing.total > kernel.smem_bytes
    assert_emulation_matches(module, program, "sliced", scale=0.5, seed=5)


def test_register_accumulator_shares_the_ring_after_the_loop() -> None:
    """tb-schedule marks rms_norm's fp32 sum-of-squares accumulator `tb.accum_in_reg`, so
    tb-plan-smem gives its [16,64] tile (4 KiB) shared memory only after the loop, inside
    the space of the cp.async rings; the fill carries `cute.accum_in_reg` and the printer
    keeps the tile in registers, storing it once after the loop.  A marked fill the printer
    cannot keep in registers is an error, not a silent overlap."""
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    text = (Path(__file__).resolve().parents[2] / "examples" / "rmsnorm_linear_bs8.mlir").read_text()
    lowered = Parser(make_ctx(), text).parse_module()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    kernel = next(op for op in lowered.walk() if isinstance(op, cute.KernelOp))
    marked = [op for op in kernel.walk() if isinstance(op, cute.FillOp) and cute.ACCUM_IN_REG in op.attributes]
    assert len(marked) == 1
    acc = marked[0].dst
    assert register_accumulators(kernel) == {acc: 16 * 64 // 128}
    rings = [
        op for op in kernel.walk() if isinstance(op, cute.SmemAllocOp) and op.num_buffers > 1
    ]
    ring_end = max(op.byte_offsets[-1] + (op.byte_offsets[1] - op.byte_offsets[0]) for op in rings)
    (offset,) = acc.owner.byte_offsets  # type: ignore[union-attr]
    assert offset + 16 * 64 * 4 <= ring_end  # the tile lies inside the rings' space
    source = emit_cuda(lowered).source
    assert source.count("mx::RegTile<8>") == 1 and source.index("mx::reg_store<") > source.index("for (int it")
    marked[0].properties["value"] = FloatAttr(1.0, f64)  # no longer a cleared accumulator
    with pytest.raises(DiagnosticException, match="planned in registers"):
        register_accumulators(kernel)
    del marked[0].attributes[cute.REG_ACCUM]  # a printer given a marked fill cute-register-accumulators did not keep
    with pytest.raises(kernel_resources.CudaEmitError, match="planned in registers"):
        kernel_resources.register_accumulators(kernel)


def test_wide_block_emulated() -> None:
    """nTrans (8 rows, one block each, no matmul) gets 512-thread blocks and block-wide row
    sums; the emulated kernel matches the reference."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    text = (Path(__file__).resolve().parents[2] / "examples" / "ntrans.mlir").read_text()
    module = Parser(make_ctx(), text).parse_module()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    program = emit_cuda(lowered)
    (step,) = program.plans["ntrans"].steps
    assert isinstance(step, KernelLaunch) and step.block == (512, 1, 1)
    # one row sum per block: the whole block reduces it, warps meet in the appended scratch
    # (in the register-resident row chain, passes/cute/row_chains.py)
    assert program.source.count("mx::block_sum<512>(") == 2
    kernel = next(op for op in lowered.walk() if isinstance(op, cute.KernelOp))
    # the chain keeps every tile in registers: the launch asks for the header and the
    # scratch (cute.row_chain_smem), not tb-plan-smem's whole plan
    live = kernel.attributes[ROW_CHAIN_SMEM]
    assert isinstance(live, IntegerAttr) and live.value.data < kernel.smem_bytes
    assert step.smem_bytes == live.value.data + 512 // 32 * 4
    assert_emulation_matches(module, program, "ntrans", scale=1.0, seed=4)
