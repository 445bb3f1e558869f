"""Loop axes shorter than every loop tile (`DeviceModel.k_tiles`): matmul-free plans walk them
in tiles of their divisors, so a sum over a short dim still pipelines its rows."""

from __future__ import annotations

from pathlib import Path

from xdsl.context import Context

from mirage_xdsl.dialects import kn, tb
from mirage_xdsl.driver.load import load_module
from mirage_xdsl.passes.conversion.kn_fuse import KnFusePass

SUITE = Path(__file__).resolve().parents[2] / "examples" / "suite"


def test_a_sum_over_a_dim_of_16_walks_it_in_a_loop() -> None:
    # [16, 1024, 4096] summed over dim 0: 16 one-row tiles, double-buffered, instead of one
    # load of all 16 rows (H200: 70.4 against 92.7 µs in fp32)
    module = load_module(SUITE / "suite_reduce_sum_d0_f32.mlir")
    KnFusePass().apply(Context(), module)
    (op,) = [o for o in module.walk() if isinstance(o, kn.CustomizedOp)]
    assert op.forloop_range.value.data == 16  # type: ignore[attr-defined]
    (inp,) = [o for o in op.body.walk() if isinstance(o, tb.InputOp)]
    assert inp.forloop_dim.value.data == 0  # type: ignore[attr-defined]
    assert kn.shape_of(inp.result)[0] == 1  # type: ignore[attr-defined]
