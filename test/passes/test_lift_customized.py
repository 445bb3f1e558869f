"""kn-lift-customized: saved threadblock graphs raised to the kn ops they compute.

Candidates of every saved muGraph under examples/mugraphs are run by the float64 reference
executor before and after the pass on the same random inputs: a lifted graph must compute the
same values.  Which kernels lift is pinned for a few files (the rules are in the pass's module
docstring); the lit test test/filecheck/passes/kn-lift-customized.mlir shows the kn forms.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.dialects import kn
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.driver.load import functions, load_module
from mirage_xdsl.passes.conversion.lift_customized import NotLiftable, lift, lift_customized
from mirage_xdsl.passes.pipeline import MirageTranspilePass
from mirage_xdsl.reference.executor import run_function
from mirage_xdsl.reference.numpy_ops import value_shape

MUGRAPHS = Path(__file__).resolve().parents[2] / "examples" / "mugraphs"
FILES = sorted(MUGRAPHS.glob("*.json"))


def _single(path: Path, index: int) -> ModuleOp:
    fn = functions(load_module(path))[index]
    return ModuleOp([fn.clone()])


def _customized(module: ModuleOp) -> int:
    return sum(isinstance(op, kn.CustomizedOp) for op in module.walk())


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_lifted_graphs_compute_the_same(path: Path) -> None:
    """The first, middle and last candidate of each file (the files repeat their shapes)."""
    rng = np.random.default_rng(7)
    count = len(functions(load_module(path)))
    for index in sorted({0, count // 2, count - 1}):
        module = _single(path, index)
        fn = functions(module)[0]
        inputs = [rng.uniform(-0.5, 0.5, value_shape(a)) for a in fn.body.block.args]
        before = run_function(fn, inputs)
        kept = _customized(module)
        lifted = lift_customized(module, partial=True)
        module.verify()
        assert _customized(module) == kept - lifted
        after = run_function(fn, inputs)
        for want, got in zip(before, after):
            assert np.allclose(got, want, rtol=1e-9, atol=1e-12), f"{path.stem}:{fn.sym_name.data}"


@pytest.mark.parametrize(
    "stem, whole",
    [("single_gated_mlp", True), ("rmsnorm_bs1", True), ("ntrans_bs1", True), ("lora", True), ("gqa_bs1", False)],
)
def test_which_saved_graphs_lift(stem: str, whole: bool) -> None:
    """Row-wise, matmul and rms graphs lift whole; attention graphs whose first kernel sums K
    across blocks (split keys) keep that kernel and lift the combine."""
    module = _single(MUGRAPHS / f"{stem}.json", 0)
    before = _customized(module)
    lift_customized(module, partial=True)
    assert (_customized(module) == 0) == whole
    # by default a graph is lifted whole or not at all
    module = _single(MUGRAPHS / f"{stem}.json", 0)
    lift_customized(module)
    assert _customized(module) == (0 if whole else before)


def test_split_k_kernel_is_kept_with_the_rule() -> None:
    module = _single(MUGRAPHS / "gqa_bs1.json", 0)
    first = next(op for op in module.walk() if isinstance(op, kn.CustomizedOp))
    with pytest.raises(NotLiftable, match="cut by a grid axis"):
        lift(first)
    # a failed lift leaves no half-built ops behind
    assert all(use.operation.parent is not None for arg in first.operands for use in arg.uses)


def test_transpile_lifts_by_default_and_keeps_on_request() -> None:
    path = MUGRAPHS / "single_gated_mlp.json"
    lifted, kept = _single(path, 0), _single(path, 0)
    MirageTranspilePass(to_cute=False).apply(make_context(), lifted)
    MirageTranspilePass(to_cute=False, lift=False).apply(make_context(), kept)
    kernels = [op for op in lifted.walk() if isinstance(op, kn.CustomizedOp)]
    saved = [op for op in kept.walk() if isinstance(op, kn.CustomizedOp)]
    # the saved plan: 128 blocks walking K in 64 iterations; the lifted graph is planned by kn-fuse
    assert any(op.grid == (128, 1, 1) and op.num_iterations == 64 for op in saved)
    assert kernels and not any(op.num_iterations == 64 and op.grid == (128, 1, 1) for op in kernels)


def test_hand_written_threadblock_graphs_are_kept() -> None:
    """mirage-transpile lifts only kernels read from a saved muGraph (`kn.saved_plan`); the same
    threadblock graph without the mark (written by hand) is compiled as written."""
    module = _single(MUGRAPHS / "single_gated_mlp.json", 0)
    (saved,) = [op for op in module.walk() if isinstance(op, kn.CustomizedOp)]
    assert kn.SAVED_PLAN_ATTR in saved.attributes
    del saved.attributes[kn.SAVED_PLAN_ATTR]
    MirageTranspilePass(to_cute=False).apply(make_context(), module)
    assert any(op.grid == (128, 1, 1) and op.num_iterations == 64 for op in module.walk() if isinstance(op, kn.CustomizedOp))
