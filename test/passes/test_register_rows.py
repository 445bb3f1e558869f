"""Register-resident row chains (`cute-row-chains`, passes/cute/row_chains.py): which ops run in
registers, the rules that keep it from doing so, and -- on the host emulator, no GPU --
that the chain computes exactly what the op-by-op print did."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.parser import Parser

from mirage_xdsl.codegen import cuda_printer
from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.codegen.kernel_resources import reduce_threads
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.row_chains import (
    ROW_CHAIN_RUN,
    ROW_CHAIN_SMEM,
    ROW_CHAINS,
    RowChain,
    row_length,
)
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.passes.cute.row_chains import clear_row_chains, plan_row_chain
from mirage_xdsl.passes.pipeline import MirageTranspilePass

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def lowered(stem: str) -> ModuleOp:
    module = Parser(make_context(), (EXAMPLES / f"{stem}.mlir").read_text()).parse_module()
    MirageTranspilePass().apply(make_context(), module)
    return module


def without_chains(module: ModuleOp) -> ModuleOp:
    """`module` with cute-row-chains' decision undone: every op printed one by one."""
    from xdsl.dialects.builtin import IntegerAttr, i64

    clone = module.clone()
    for op in clone.walk():
        if isinstance(op, cute.KernelOp):
            clear_row_chains(op)
            op.attributes[ROW_CHAINS] = IntegerAttr(0, i64)
    return clone


def ntrans_chain(module: ModuleOp) -> tuple[RowChain | None, list]:
    (kernel,) = [op for op in module.walk() if isinstance(op, cute.KernelOp)]
    (loop,) = [op for op in kernel.body.block.ops if isinstance(op, cute.ForOp)]
    body = list(loop.body.block.ops)
    nt = kernel.num_threads
    return plan_row_chain(body, nt, set(), reduce_threads), body


def test_row_length() -> None:
    assert row_length((1, 4096)) == 4096 and row_length((4096,)) == 4096
    assert row_length((2, 4096)) is None and row_length(()) is None


def test_ntrans_is_one_chain() -> None:
    """nTrans's whole loop body (seven elementwise passes, two row sums) is one chain; only
    the accumulated output tile, which the copy after the loop reads, is stored."""
    chain, body = ntrans_chain(lowered("ntrans"))
    assert chain is not None and chain.length == 4096
    assert sum(isinstance(op, cute.ReduceOp) for op in chain.ops) == 2 and len(chain.ops) == 9
    assert chain.stored == {chain.values[-1]}
    assert all(isinstance(op, (cute.BarrierOp, cute.YieldOp)) for op in body[chain.consumed :])


def test_overlapping_store_and_read_stay_op_by_op() -> None:
    """A chain whose stored tile shares bytes with a tile it reads is not formed."""
    module = lowered("ntrans")
    chain, _ = ntrans_chain(module)
    assert chain is not None
    written = chain.values[-1].owner
    read = next(v for op in chain.ops if isinstance(op, cute.ElementwiseOp) for v in op.ins if v not in chain.values).owner
    assert isinstance(written, cute.SmemAllocOp) and isinstance(read, cute.SmemAllocOp)
    written.properties["offsets"] = read.properties["offsets"]
    assert ntrans_chain(module)[0] is None


def test_matmul_kernels_print_no_chain() -> None:
    """rms_norm @ W keeps its op-by-op epilogue: its row sums use a warp per row, not the
    whole block, and its tiles have several rows."""
    for stem in ("rmsnorm_linear", "rmsnorm_linear_bs8", "gated_mlp"):
        assert "mx::block_sum<" not in emit_cuda(lowered(stem)).source


@pytest.mark.parametrize("contiguous", [False, True])
def test_chain_matches_op_by_op(contiguous: bool) -> None:
    """The host-emulated nTrans kernel with the chain matches the op-by-op print on fresh
    random inputs: bit for bit when its threads own every NT-th element (the row sums add
    in the op-by-op order, the same rounding to fp16 between the ops), within fp16
    rounding when they own consecutive elements (16-byte vectors; the sums add in another
    order); and it matches the reference executor."""
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator, find_cxx

    if find_cxx() is None:
        pytest.skip("no host C++ compiler")
    module = lowered("ntrans")
    if not contiguous:  # the printer follows the pass's choice: make it every NT-th element
        for op in module.walk():
            if ROW_CHAIN_RUN in op.attributes:
                op.attributes[ROW_CHAIN_RUN] = IntegerAttr(0, i64)
    chained = emit_cuda(module)
    op_by_op = emit_cuda(without_chains(module))
    assert "block_sum" in chained.source and "block_sum" not in op_by_op.source
    assert ("mx::load_row<8>" in chained.source) == contiguous
    plan = chained.plans["ntrans"]
    rng = np.random.default_rng(12)
    inputs = [rng.uniform(-1, 1, size=s.shape).astype(np.float16) for s in plan.inputs]
    (want,) = HostEmulator(op_by_op).run("ntrans", inputs)
    (got,) = HostEmulator(chained).run("ntrans", inputs)
    if contiguous:
        assert np.abs(got.astype(np.float64) - want).max() <= 2 * np.spacing(np.abs(want).max().astype(np.float16))
    else:
        assert np.array_equal(got, want)
    source = Parser(make_context(), (EXAMPLES / "ntrans.mlir").read_text()).parse_module()
    (ref,) = run_reference(source, [x.astype(np.float64) for x in inputs])
    assert np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2


def test_ntrans_chain_skips_shared_memory_for_its_inputs_and_output() -> None:
    """H, X and alpha are read only by the chain: loaded from global memory into registers,
    once each, and their copies are not printed; the output accumulator (zero-filled, one
    trip, copied out after the loop) is stored straight to global memory."""
    source = emit_cuda(lowered("ntrans")).source
    assert "g2s_" not in source and "s2g_" not in source and "mx::fill<" not in source
    assert source.count("from global memory") == 3 and source.count("mx::load_row<8>(") == 3
    assert "mx::store_row<8>(&(o0 + blockIdx.x * 4096)[" in source


RMS_ROW = """
func.func @rms(%x: tensor<1x4096xf16> {kn.strides = array<i64: 4096, 1>}) -> tensor<1x4096xf16> {
  %0 = kn.rms_norm %x {normalized_shape = array<i64: 4096>} : tensor<1x4096xf16>
  func.return %0 : tensor<1x4096xf16>
}
"""


def test_a_128_thread_block_chains_a_4096_wide_row() -> None:
    """32 elements per thread (a megakernel's 128-thread rms_norm task) still run in registers,
    and the tiles the chain replaced leave no unused pointer behind (nvcc warns about those)."""
    from mirage_xdsl.passes.pipeline import fuse_plain_graphs

    module = Parser(make_context(), RMS_ROW).parse_module()
    fuse_plain_graphs(make_context(), module, block_threads=128)
    MirageTranspilePass(fuse=False).apply(make_context(), module)
    src = emit_cuda(module, "sm_90").source
    assert "float x0[32];" in src and "mx::block_sum<128>" in src
    assert "reinterpret_cast<mx::f16*>(smem +" not in src


def test_used_lines_drops_only_unreferenced_tile_pointers() -> None:
    lines = [
        "  mx::f16* s0 = reinterpret_cast<mx::f16*>(smem + 128);",
        "  float* s1_0 = reinterpret_cast<float*>(smem + 256);",
        "  {  // in registers: s0, s1_0",
        "  mx::fill<128, L>(s1_0, 0.0f, tid);",
    ]
    assert cuda_printer.used_lines(lines) == lines[1:]


def rotary_module(dtype: str, tokens: int = 64, heads: int = 4) -> ModuleOp:
    """The suite's rotary embedding (small by default), lowered by the default pipeline."""
    from mirage_xdsl.bench.suite import graphs

    module = graphs.rotary(dtype, "rot", tokens=tokens, heads=heads, head_dim=128)
    MirageTranspilePass().apply(make_context(), module)
    return module


def test_an_elementwise_kernel_over_a_whole_tile_is_one_chain() -> None:
    """Rotary's [tokens, heads, 64] tiles are not rows, but with no reduction every op walks
    the same tile row-major: the four products, the difference and the sum run in
    registers; X's halves and the cosine / sine rows (broadcast over the heads) load as
    16-byte vectors, and the two halves of the output (concat: zero-filled accumulators of
    one trip) are stored from registers (the suite's size: 16 elements per thread, two
    vectors each, interleaved across the block: vector c of thread tid at (c * 128 + tid) * 8)."""
    module = rotary_module("float16", tokens=4096, heads=32)
    (kernel,) = [op for op in module.walk() if isinstance(op, cute.KernelOp)]
    (loop,) = [op for op in kernel.body.block.ops if isinstance(op, cute.ForOp)]
    chain = plan_row_chain(list(loop.body.block.ops), kernel.num_threads, set(), reduce_threads)
    assert chain is not None and len(chain.ops) == 6 and row_length(chain.values[0].type.get_shape()) is None
    src = emit_cuda(module).source
    assert src.count("mx::load_vectors<16>(") == 4 and src.count("mx::store_vectors<16>(") == 2
    assert src.count("::raw((c * 128 + tid) * 8)]; }") == 6
    assert "mx::elementwise<" not in src and "mx::g2s_chunked<" not in src


def test_a_whole_tile_chain_takes_no_reduction() -> None:
    """A row sum reads a whole row with the whole block; over a tile of several rows a
    thread's registers do not hold one row, so such a chain ends before a reduction."""
    module = rotary_module("float16")
    (kernel,) = [op for op in module.walk() if isinstance(op, cute.KernelOp)]
    (loop,) = [op for op in kernel.body.block.ops if isinstance(op, cute.ForOp)]
    first = next(op for op in loop.body.block.ops if isinstance(op, cute.ElementwiseOp))
    from mirage_xdsl.passes.cute.row_chains import _Builder

    builder = _Builder(kernel.num_threads, set(), reduce_threads)
    assert builder.add(first) and builder.tile == tuple(first.out.type.get_shape())
    ntrans, _ = ntrans_chain(lowered("ntrans"))
    assert ntrans is not None
    row_sum = next(op for op in ntrans.ops if isinstance(op, cute.ReduceOp))
    assert _Builder(512, set(), reduce_threads).reduce_fits(row_sum, []) is not None  # fits a row chain
    assert builder.chain is not None and builder.reduce_fits(row_sum, builder.chain.values) is None


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_whole_tile_chain_matches_op_by_op(dtype: str) -> None:
    """The host-emulated rotary kernel with the chain equals the op-by-op print bit for bit
    (elementwise ops only: the same roundings in the same order) and the reference."""
    from mirage_xdsl.bench.suite import graphs
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator, find_cxx

    if find_cxx() is None:
        pytest.skip("no host C++ compiler")
    module = rotary_module(dtype)
    chained, op_by_op = emit_cuda(module), emit_cuda(without_chains(module))
    assert "in registers" in chained.source and "in registers" not in op_by_op.source
    plan = chained.plans["rot"]
    rng = np.random.default_rng(21)
    np_type = np.float16 if dtype == "float16" else np.float32
    inputs = [rng.uniform(-1, 1, size=s.shape).astype(np_type) for s in plan.inputs]
    (got,) = HostEmulator(chained).run("rot", inputs)
    (want,) = HostEmulator(op_by_op).run("rot", inputs)
    assert np.array_equal(got, want)
    (ref,) = run_reference(graphs.rotary(dtype, "rot", tokens=64, heads=4, head_dim=128), [x.astype(np.float64) for x in inputs])
    assert np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2


def test_chain_kernels_ask_only_for_the_shared_memory_they_touch() -> None:
    """A layernorm over 4096-wide fp32 rows keeps every value in registers: its launch asks
    for the header and the block-sum scratch, not tb-plan-smem's 98 KB of tiles it never
    touches (`cute.row_chain_smem`), so six 512-thread blocks fit an SM instead of two."""
    from mirage_xdsl.codegen.kernel_resources import launch_smem_bytes

    module = Parser(make_context(), (EXAMPLES / "suite" / "suite_layernorm_f32.mlir").read_text()).parse_module()
    MirageTranspilePass().apply(make_context(), module)
    (kernel,) = [op for op in module.walk() if isinstance(op, cute.KernelOp)]
    assert kernel.smem_bytes > 64 * 1024 and ROW_CHAIN_SMEM in kernel.attributes
    assert launch_smem_bytes(kernel) <= 256


@pytest.mark.parametrize("stem", sorted(p.stem for p in (EXAMPLES / "suite").glob("*.mlir")))
def test_printed_shared_offsets_lie_inside_the_launch(stem: str) -> None:
    """Every shared-memory offset the printed code uses (tile pointers, block-sum scratch)
    lies below the bytes its launch asks for: trimming the plan to the live tiles never
    leaves a touched byte outside."""
    import re

    module = Parser(make_context(), (EXAMPLES / "suite" / f"{stem}.mlir").read_text()).parse_module()
    MirageTranspilePass().apply(make_context(), module)
    program = emit_cuda(module)
    from mirage_xdsl.codegen.launch_plan import KernelLaunch

    for launch in program.plans[stem].steps:
        if not isinstance(launch, KernelLaunch):
            continue
        start = program.source.find(f" {launch.kernel}(")
        if start < 0:  # a templated sm_90a kernel (GEMM, attention): no chains, its own smem plan
            continue
        end = program.source.find("__global__", start)
        body = program.source[start : end if end > 0 else None]
        offsets = [int(m) for m in re.findall(r"\(smem \+ (\d+)\)", body)]
        assert all(off < launch.smem_bytes for off in offsets), (launch.kernel, max(offsets, default=0), launch.smem_bytes)
