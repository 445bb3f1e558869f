"""The planner's device model (target/cost_model.py) as the cost model uses it: the streamed
short-row penalty of matmul-free plans over tensors larger than the L2."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.context import Context

from mirage_xdsl.dialects import kn
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.driver.load import functions, load_module
from mirage_xdsl.passes.conversion.default_tb_graph import Planner
from mirage_xdsl.passes.conversion.kernel_plan import FusionPlan
from mirage_xdsl.passes.conversion.kn_fuse import KnFusePass
from mirage_xdsl.passes.conversion.plan_cost import CostModel
from mirage_xdsl.passes.conversion.plan_group import elem_bytes, group_from_ops
from mirage_xdsl.target import SM90
from mirage_xdsl.target.cost_model import DeviceModel

SUITE = Path(__file__).resolve().parents[2] / "examples" / "suite"


def _plan(name: str, device: DeviceModel) -> FusionPlan:
    func = functions(load_module(SUITE / f"{name}.mlir"))[0]
    group, _ = group_from_ops([op for op in func.body.block.ops if isinstance(op, kn.KnOp)])
    plan = Planner(device).plan(group)
    assert plan is not None
    return plan


def _input_runs(plan: FusionPlan) -> list[int]:
    """Bytes of the contiguous run of each group input's tile in the first kernel."""
    k = plan.kernels[0]
    return [
        k.tiles[n.idx][-1] * elem_bytes(n.dtype)
        for n in k.group.nodes
        if n.kind == "input" and n.idx in k.needed and k.tiles[n.idx][-1] < n.shape[-1]
    ]


def test_streamed_row_penalty_applies_above_the_l2_only() -> None:
    dev = DeviceModel()
    big, small = SM90.l2_bytes + 1, SM90.l2_bytes // 2
    assert dev.streamed_row_penalty(64, big) == 1.45
    assert dev.streamed_row_penalty(128, big) == 1.2
    assert dev.streamed_row_penalty(256, big) == 1.0
    assert dev.streamed_row_penalty(16, big) == dev.narrow_row_penalty  # the larger of the two
    assert dev.streamed_row_penalty(64, small) == dev.row_penalty(64) == 1.0
    assert dev.streamed_row_penalty(64, 0) == 1.0  # not a stream (a matmul operand, a partial)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_column_sum_over_a_tensor_beyond_the_l2_reads_long_runs(dtype: str) -> None:
    # a sum over dim 1 of [16, 1024, 4096]: the grid cuts the 4096 columns; 64-byte runs
    # streamed 1.4x slower than 256-byte ones on an H200, which the estimate now charges
    plan = _plan(f"suite_reduce_sum_d1_{dtype}", DeviceModel())
    assert min(_input_runs(plan)) >= 256
    unpenalised = _plan(f"suite_reduce_sum_d1_{dtype}", DeviceModel(streamed_row_penalties=()))
    assert plan.cost_us > unpenalised.cost_us or min(_input_runs(unpenalised)) >= 256


def _fused_kernels(name: str) -> list[tuple[str, str]]:
    """(grid, estimate) of every kernel kn-fuse makes of suite program `name`."""
    module = load_module(SUITE / f"{name}.mlir")
    KnFusePass().apply(Context(), module)
    return [
        (str(op.properties.get("grid_dim", op.attributes.get("grid_dim"))), str(op.attributes.get("kn.cost_estimate_us")))
        for op in module.walk()
        if isinstance(op, kn.CustomizedOp)
    ]


@pytest.mark.parametrize("name", ["suite_gelu_mlp_bs1_f16", "suite_swiglu_mlp_bs16_bf16", "suite_decode_g1_kv32k_f16"])
def test_matmul_plans_are_not_charged_the_streamed_row_penalty(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # weight streams of matmul plans kept their bandwidth with 64-byte runs: their kernels and
    # estimates do not depend on the penalty
    with_penalty = _fused_kernels(name)
    monkeypatch.setattr(DeviceModel, "streamed_row_penalty", lambda self, row_bytes, tensor_bytes: self.row_penalty(row_bytes))
    assert _fused_kernels(name) == with_penalty


def test_matmul_weights_are_streamed_in_runs_longer_than_64_bytes() -> None:
    # gated_mlp's W1, W2 [4096, 4096] fp16: 32-column tiles (64-byte runs) streamed 1.10x
    # slower than 64-column ones on an H200; without the penalty the planner took the former
    examples = Path(__file__).resolve().parents[2] / "examples"
    func = functions(load_module(examples / "gated_mlp.mlir"))[0]
    group, _ = group_from_ops([op for op in func.body.block.ops if isinstance(op, kn.KnOp)])

    def weight_runs(device: DeviceModel) -> int:
        plan = Planner(device).plan(group)
        assert plan is not None
        k = plan.kernels[0]
        return min(k.tiles[n.idx][-1] * elem_bytes(n.dtype) for n in k.group.nodes if n.kind == "input" and n.weight)

    assert weight_runs(DeviceModel()) >= 128
    assert weight_runs(DeviceModel(weight_run_penalty=1.0)) == 64


def test_a_long_decode_split_fills_the_sms() -> None:
    # 32 query rows per KV head over 32768 keys: with at most 64 key chunks the flash-decoding
    # kernel had 128 blocks, fewer than the SMs (25.3 µs on an H200); `max_split` = 256 lets
    # it take 512 (23.4 µs)
    module = load_module(SUITE / "suite_decode_g32_kv32k_f16.mlir")
    KnFusePass().apply(make_context(), module)
    grids = [op.grid for op in module.walk() if isinstance(op, kn.CustomizedOp) and op.attributes["kn.template"].data == "flash_decoding"]  # type: ignore[attr-defined]
    assert grids and all(gx * gy * gz >= SM90.num_sms for gx, gy, gz in grids)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_loop_body_passes_are_charged_per_iteration(dtype: str) -> None:
    # the cross-entropy over [1024, 32768] walks its loop body's shared-memory tiles (max,
    # exp, rescaled sum, two more sums) once per iteration: 4-row blocks at 2 per SM had too
    # few warps for that work (130.8 us on an H200 where the one-row blocks took 81.1)
    plan = _plan(f"suite_cross_entropy_{dtype}", DeviceModel())
    k = plan.kernels[0]
    assert k.forloop_range > 1
    x = next(n.idx for n in k.group.nodes if n.kind == "input")
    assert k.tiles[x][0] == 1, k.tiles[x]
    assert CostModel._smem_element_ops(k) > k.forloop_range * k.tiles[x][-1]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_a_running_max_is_charged_per_row_not_per_tile(dtype: str) -> None:
    # an online max keeps per row the max so far and its correction (a running
    # tb.reduction_max), not a tile-wide fp32 accumulator: charged as one, the cross-entropy's
    # 1 x 1024 loop tiles looked like two waves and lost to 1 x 512 tiles, which ran slower
    # (H200: 81.1 / 80.8 us against 72.3 / 72.6 for fp16 / bf16)
    # (the 1 x 2048 tiles it picks now that the register sums are counted, next test)
    plan = _plan(f"suite_cross_entropy_{dtype}", DeviceModel())
    k = plan.kernels[0]
    x = next(n.idx for n in k.group.nodes if n.kind == "input")
    assert tuple(k.tiles[x]) == (1, 2048) and k.forloop_range == 16, (k.tiles[x], k.forloop_range)
    assert k.smem < 28 * 1024  # the old estimate, 28928 B, put it at 7 blocks per SM


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_register_sums_take_no_shared_memory_in_the_estimate(dtype: str) -> None:
    # tb-schedule keeps the sums of `exp(x - max)` and `p * x` in registers through the loop
    # (elementwise-chain accumulators); counted as shared-memory tiles, the estimate doubled
    # the cross-entropy's 1 x 2048 plan (49.4 KB: 4 blocks per SM, two waves) and chose 1 x 1024
    # tiles, slower on an H200 (2026-11-27, fp16 / bf16 / f32: 53.5 / 54.1 / 71.3 us against
    # 49.2 / 49.7 / 69.2)
    from mirage_xdsl.codegen.launch_plan import KernelLaunch
    from mirage_xdsl.driver.compile import prepare

    name = f"suite_cross_entropy_{dtype}"
    plan = _plan(name, DeviceModel())
    k = plan.kernels[0]
    assert len(CostModel(DeviceModel()).register_sums(k)) == 2
    real = prepare(load_module(SUITE / f"{name}.mlir"), name, "sm_90a").plan
    launch = next(s for s in real.steps if isinstance(s, KernelLaunch))
    assert abs(k.smem - launch.smem_bytes) <= 0.05 * launch.smem_bytes, (k.smem, launch.smem_bytes)
