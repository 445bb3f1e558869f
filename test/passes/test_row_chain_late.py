"""`cute.row_chain_late` (cute-row-chains, passes/cute/row_chains.py): a chain's global input
that every block reads alike (a norm's gain, its bias) is loaded just before the first op
that reads it, not with the row, so its registers are not live across the row sums."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.row_chains import ROW_CHAIN_GLOBAL, ROW_CHAIN_LATE
from mirage_xdsl.driver.compile import prepare
from mirage_xdsl.driver.load import load_module

SUITE = Path(__file__).resolve().parents[2] / "examples" / "suite"


@pytest.mark.parametrize("name", ["suite_rmsnorm_f16", "suite_layernorm_bf16"])
def test_block_invariant_inputs_load_after_the_row_sums(name: str) -> None:
    prepared = prepare(load_module(SUITE / f"{name}.mlir"), name, "sm_90a")
    loads = [op for op in prepared.module.walk() if isinstance(op, cute.CopyG2SOp) and ROW_CHAIN_GLOBAL in op.attributes]
    late = [op for op in loads if ROW_CHAIN_LATE in op.attributes]
    # the row X moves with its block; the [1, C] gain (and layernorm's bias) is every block's
    assert len(loads) - len(late) == 1
    assert all(not any(cute.dense_ints(op.block_offset)) for op in late) and late
    source = prepared.program.source
    last_sum = source.rindex("mx::block_sum<")
    first_load = source.index("mx::load_vectors<")
    assert first_load < source.index("mx::block_sum<")  # the row, before the first sum
    late_loads = source[last_sum:].count("mx::load_vectors<")
    assert late_loads == len(late)  # gain (and bias) after the last row sum
