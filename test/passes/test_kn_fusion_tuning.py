"""Graph-kernel fusion, its tuning: kn-partition's ranked candidates (the plans a tuning
point picks by rank, with the same results) and its cut of a kernel that would recompute a
value another kernel makes (`_cheaper_cut`); helpers in test_kn_fusion.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_kn_fusion import (
    _context,
    customized_ops,
    example,
    fuse,
    plain_reference,
    rel_err,
    the_func,
)
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.parser import Parser

from mirage_xdsl.dialects import kn, tb
from mirage_xdsl.passes.conversion.default_tb_graph import Planner
from mirage_xdsl.passes.conversion.kn_fuse import KnFusePass
from mirage_xdsl.passes.conversion.plan_group import fusible_op, group_from_ops
from mirage_xdsl.passes.kn.expand_composites import KnExpandCompositesPass, KnRecognizeCompositesPass
from mirage_xdsl.passes.kn.simplify import KnSimplifyPass
from mirage_xdsl.passes.pipeline import MirageTranspilePass
from mirage_xdsl.reference.executor import run_reference
from mirage_xdsl.target.cost_model import DeviceModel

# ---------------------------------------------------------------------------------------
# tuning candidates


def test_candidate_ranks_follow_the_cost_order() -> None:
    """`candidate=r` lowers with the r-th cheapest plan (ranks past the end take the last);
    every rank computes the plain graph's function."""
    seen = set()
    for rank in (0, 1, 2, 10_000):
        module = fuse(example("gated_mlp"), candidate=rank, always_split=True)
        inputs, expected = plain_reference("gated_mlp")
        assert rel_err(expected, run_reference(module, inputs)) < 1e-6
        seen.add(tuple(tuple(k.grid) for k in customized_ops(module)))
    assert len(seen) >= 3


def test_rmsnorm_split_k_leaves_the_sum_of_squares_to_the_combine_kernel() -> None:
    """With split-K plans enumerated, rms_norm(X) @ W gets plans whose kernel 1 accumulates
    only the matmul (its partials keep W's column axis, so the grid tiles it with wide
    tiles) and whose combine kernel recomputes sum(x^2) from X; they compute the same."""
    ranks = []
    for rank in range(40):
        module = fuse(example("rmsnorm_linear"), candidate=rank, always_split=True, grid_sum=False)
        kernels = customized_ops(module)
        if len(kernels) == 2:
            ranks.append(rank)
            k1, k2 = kernels
            accums = [op.accum_kind for op in k1.body.block.ops if isinstance(op, tb.ForloopAccumOp)]
            assert accums == ["nored"]  # the matmul's partial sums only
            assert k1.grid[0] > 1 and k1.grid[1] > 1  # W's columns x the K split
            inputs, expected = plain_reference("rmsnorm_linear")
            assert rel_err(expected, run_reference(module, inputs)) < 1e-6
            if len(ranks) == 3:
                break
    assert ranks, "no split-K plan among the first 40 candidates"


def _planned_group(name: str) -> Any:
    module = example(name)
    for p in (KnExpandCompositesPass(), KnSimplifyPass(), KnRecognizeCompositesPass()):
        p.apply(_context(), module)
    group, _ = group_from_ops([op for op in the_func(module).body.block.ops if fusible_op(op)])
    return group


def test_register_chain_plans_are_costed_with_fewer_blocks() -> None:
    """The planner predicts which attention plans convert-tb-to-cute lowers to cute.mma_chain
    (query rows within `register_chain_max_rows`, one 16-row block per warp row, whole k16
    steps of keys per warp) and lets 2 resident blocks reach the full MMA rate for them, so
    gqa's 32-row x 128-key tiles (2 blocks per SM) rank first; matmul groups without
    attention are never register chains."""
    planner = Planner(DeviceModel())
    plans = planner.candidates(_planned_group("gqa"))
    chains = [fp for fp in plans if planner.cost.keeps_p_in_registers(fp.kernels[0])]
    assert chains and plans[0] in chains
    for fp in chains:
        k = fp.kernels[0]
        scores = next(n for n in k.needed if k.group.nodes[n].kind == "matmul")
        rows, keys = k.tiles[scores][-2:]
        assert rows <= 32 and keys % (16 * (4 // -(-rows // 16))) == 0
    best = plans[0].kernels[0]
    scores = next(n for n in best.needed if best.group.nodes[n].kind == "matmul")
    assert best.tiles[scores][-2:] == (32, 128)  # 32 query rows x 128 keys per iteration
    # the same plan costed with 4 blocks for the full MMA rate (the rule for other plans)
    four = Planner(DeviceModel(register_chain_blocks_for_full_mma_rate=4)).candidates(_planned_group("gqa"))
    same = next(fp for fp in four if fp.kernels[0].grid == best.grid and fp.kernels[0].tiles == best.tiles)
    assert plans[0].cost_us < same.cost_us
    rms = Planner(DeviceModel())
    assert not any(rms.cost.keeps_p_in_registers(fp.kernels[0]) for fp in rms.candidates(_planned_group("rmsnorm_linear")))


def _big_shift_exp() -> ModuleOp:
    """`exp(X - Y)` over [8, 4096, 4096] fp16 (prefill attention's scores at 4096 tokens):
    no tile of 4096 blocks fits, so the planner needs a larger grid."""
    from mirage_xdsl.frontends.builder import new_kernel_graph

    g = new_kernel_graph("bigexp")
    X = g.new_input((8, 4096, 4096), dtype="float16", name="X")
    Y = g.new_input((8, 4096, 1), dtype="float16", name="Y")
    g.mark_output(g.exp(g.sub(X, Y)))
    return g.module


def test_a_group_no_4096_block_grid_fits_gets_a_larger_grid() -> None:
    """Mirage's 4096-block cap leaves such a group without a plan (it stayed two library
    calls); the planner then tries up to `LARGE_GRID_BLOCKS` blocks."""
    from mirage_xdsl.passes.conversion import default_tb_graph as dtg

    module = _big_shift_exp()
    func = next(iter(module.ops))
    assert isinstance(func, FuncOp)
    group, _ = group_from_ops([o for o in func.body.block.ops if fusible_op(o)])
    assert Planner(DeviceModel(max_blocks=dtg.LARGE_GRID_BLOCKS)).plan(group) is not None
    capped = dtg.LARGE_GRID_BLOCKS
    try:
        dtg.LARGE_GRID_BLOCKS = 0  # the fallback off: no plan
        assert Planner().plan(group) is None
    finally:
        dtg.LARGE_GRID_BLOCKS = capped
    plan = Planner().plan(group)
    assert plan is not None and 4096 < np.prod(plan.kernels[0].grid) <= dtg.LARGE_GRID_BLOCKS
    KnFusePass().apply(Context(), module)
    assert [op.name for op in func.body.block.ops] == ["kn.customized", "func.return"]


@pytest.mark.gpu
def test_gpu_large_grid_fallback() -> None:
    """The larger grid's kernel on the GPU against the reference (the host emulator takes
    about three minutes over 128M elements, so the CPU suite checks the plan only)."""
    from mirage_xdsl.bench.fuzz_check import check_gpu
    from mirage_xdsl.bench.fuzz_graphs import FuzzCase

    out = check_gpu(FuzzCase("bigexp", "kernel", "float16", _big_shift_exp()), seed=1)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


# ---------------------------------------------------------------------------------------
# kn-partition's cut of a recomputing kernel (`_cheaper_cut`)


def _kernels_after_fuse(path: Path) -> list[kn.CustomizedOp]:
    from mirage_xdsl.driver.load import load_module

    module = load_module(path)
    KnFusePass().apply(Context(), module)
    return [op for op in module.walk() if isinstance(op, kn.CustomizedOp)]


def test_lora_rank_64_is_cut_after_x_at_a() -> None:
    """One kernel would make each of its 128 blocks recompute `X @ A` (A [4096, 64]); the cut
    computes it once in a split-K kernel and fuses `X @ W + T @ B` in a second one."""
    root = Path(__file__).resolve().parents[2]
    first, second = _kernels_after_fuse(root / "examples/suite/suite_lora_r64_f16.mlir")
    assert [tuple(kn.shape_of(r)) for r in first.results] == [(16, 64)]
    assert first.results[0] in second.operands
    # the small LoRA example stays one kernel: its W (2 MB) hides too little of a first kernel
    assert len(_kernels_after_fuse(root / "examples/lora.mlir")) == 1


@pytest.mark.parametrize(("stem", "inner_first"), [("suite_rotary_f16", True), ("suite_reduce_sum_d0_f16", False)])
def test_elementwise_grids_put_the_innermost_cut_dim_on_blockidx_x(stem: str, inner_first: bool) -> None:
    """An elementwise kernel's grid walks the output's innermost cut dim on blockIdx.x, so
    consecutive blocks stream neighbouring memory (rotary: the head pairs of one token group,
    not the token groups of one head pair; H200, 2026-11-27: fp16 / bf16 / fp32 19.4 / 26.0 /
    74.6 -> 18.4 / 22.8 / 68.0 us); other kernels keep the output's dim order."""
    from mirage_xdsl.driver.compile import make_context

    path = Path(__file__).resolve().parents[2] / "examples" / "suite" / f"{stem}.mlir"
    module = Parser(make_context(), path.read_text()).parse_module()
    MirageTranspilePass(to_cute=False).apply(make_context(), module)
    out = next(op for op in module.walk() if isinstance(op, tb.OutputOp))
    omap = [d for d in out.output_map.get_values() if d >= 0]
    assert len(omap) == 2
    assert (omap[0] > omap[1]) == inner_first, omap
