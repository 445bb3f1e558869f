"""The grid-sum epilogue in registers (`cute-grid-sum-epilogue`, passes/cute/grid_sum_epilogue.py): which ops after a
`cute.grid_sum` the printer fuses, the rules that keep it from fusing, and -- on the host
emulator, no GPU -- that the fused kernels compute exactly what the op-by-op ones did."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser

from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.grid_sum_epilogue import EPILOGUE_GLOBAL, EPILOGUE_PHASE, EPILOGUE_PHASES, EPILOGUE_STORED, EpiloguePlan
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.passes.cute.grid_sum_epilogue import plan_epilogue
from mirage_xdsl.passes.pipeline import MirageTranspilePass

DATA = Path(__file__).parents[1] / "data"


def lowered(stem: str, **options: bool) -> ModuleOp:
    """`stem` after mirage-transpile with equal splits (no late finisher, whose grid sums
    print their own epilogue) and `options`."""
    module = Parser(make_context(), (DATA / f"{stem}.mlir").read_text()).parse_module()
    MirageTranspilePass.from_options({"late_finisher": 0, **options}).apply(make_context(), module)
    return module


def grid_sum_and_rest(module: ModuleOp) -> tuple[cute.GridSumOp, list[Operation]]:
    (kernel,) = [op for op in module.walk() if isinstance(op, cute.KernelOp)]
    ops = list(kernel.body.block.ops)
    (k,) = [i for i, op in enumerate(ops) if isinstance(op, cute.GridSumOp)]
    grid_sum = ops[k]
    assert isinstance(grid_sum, cute.GridSumOp)
    return grid_sum, ops[k + 1 :]


def plan_of(module: ModuleOp) -> EpiloguePlan | None:
    grid_sum, rest = grid_sum_and_rest(module)
    (kernel,) = [op for op in module.walk() if isinstance(op, cute.KernelOp)]
    return plan_epilogue(grid_sum, rest, kernel.num_threads, set())


def test_gated_mlp_epilogue_is_one_phase() -> None:
    """silu(sum1) * sum2: both sums, silu and the product in one phase; only the product is
    stored -- straight to global memory, since the output copy was its one reader (the copy
    is not printed); the phase replaces every op up to the output copy."""
    module = lowered("split_k_gated")
    plan = plan_of(module)
    assert plan is not None and not plan.unfused_sums
    (phase,) = plan.phases
    assert phase.shape == (8, 32) and len(phase.sums) == 2
    assert [op.fn.data for op in phase.ops] == ["id", "mul"]  # silu is the id op's epilogue
    assert phase.stored == {phase.ops[-1].out}
    _, rest = grid_sum_and_rest(module)
    assert isinstance(rest[plan.consumed], cute.CopyS2GOp)
    assert plan.copies_out == {phase.ops[-1].out: rest[plan.consumed]}
    source = emit_cuda(module).source
    tail = source[source.index("grid_arrive") :]
    assert "grid_partial_sum_mine<128, 4, 512, 2>" in tail and "(o0 + blockIdx.x * 32)[" in tail
    assert "mx::elementwise<" not in tail and "s2g_" not in tail and tail.count("__syncthreads()") == 1


def test_rms_norm_epilogue_has_a_phase_per_shape() -> None:
    """rms_norm(X) @ W with reduced partials: the [2, 1] sum of squares and its sqrt are one
    phase (the sqrt stored: the next phase reads it as a broadcast), the [2, 32] matmul sum
    and the division the next, after a barrier."""
    plan = plan_of(lowered("split_k_grid_sum", reduce_partials=True))
    assert plan is not None
    first, second = plan.phases
    assert first.shape == (2, 1) and second.shape == (2, 32)
    assert first.stored == {first.ops[-1].out}
    assert second.ops[-1].ins[1] == first.ops[-1].out  # read from shared memory
    assert second.stored == {second.ops[-1].out}


def test_reduction_after_the_grid_sum_is_not_fused() -> None:
    """Without reduced partials the op after the grid sum is the row reduction of the sum of
    squares: not elementwise, so everything prints op by op."""
    assert plan_of(lowered("split_k_grid_sum", reduce_partials=False)) is None


def test_overlapping_store_and_read_are_not_fused() -> None:
    """A phase whose stored tile shares bytes with a tile it reads (threads no longer wait
    for each other inside a phase) is printed op by op."""
    module = lowered("split_k_grid_sum", reduce_partials=True)
    plan = plan_of(module)
    assert plan is not None
    second = plan.phases[1]
    read = second.ops[-1].ins[1].owner
    written = second.ops[-1].out.owner
    assert isinstance(read, cute.SmemAllocOp) and isinstance(written, cute.SmemAllocOp)
    written.properties["offsets"] = read.properties["offsets"]
    assert plan_of(module) is None


def without_epilogue(module: ModuleOp) -> ModuleOp:
    """`module` with cute-grid-sum-epilogue's decision undone: every op printed one by one."""
    clone = module.clone()
    for op in clone.walk():
        for name in (EPILOGUE_PHASE, EPILOGUE_STORED, EPILOGUE_GLOBAL):
            op.attributes.pop(name, None)
        if isinstance(op, cute.GridSumOp):
            op.attributes[EPILOGUE_PHASES] = cute.dense([-1] * len(op.outs))
    return clone


@pytest.mark.parametrize(("stem", "options"), [("split_k_gated", {}), ("split_k_grid_sum", {"reduce_partials": True})])
def test_fused_epilogue_matches_op_by_op(stem: str, options: dict[str, bool], monkeypatch: pytest.MonkeyPatch) -> None:
    """The host-emulated fused kernel gives bit-identical outputs to the op-by-op print of
    the same module (same split order of the sums, same fp16 rounding between the ops), on
    fresh random inputs, and matches the reference executor."""
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator, find_cxx

    if find_cxx() is None:
        pytest.skip("no host C++ compiler")
    module = lowered(stem, **options)
    fused = emit_cuda(module)
    assert "grid_partial_sum_mine" in fused.source
    op_by_op = emit_cuda(without_epilogue(module))
    assert "grid_partial_sum_mine" not in op_by_op.source
    (name,) = fused.plans
    plan = fused.plans[name]
    source = Parser(make_context(), (DATA / f"{stem}.mlir").read_text()).parse_module()
    rng = np.random.default_rng(11)
    inputs = [rng.uniform(-1, 1, size=s.shape).astype(np.float16) for s in plan.inputs]
    (want,) = HostEmulator(op_by_op).run(name, inputs)
    (got,) = HostEmulator(fused).run(name, inputs)
    assert np.array_equal(got, want)
    (ref,) = run_reference(source, [x.astype(np.float64) for x in inputs])
    assert np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2
