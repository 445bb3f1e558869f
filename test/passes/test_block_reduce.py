"""cute-block-reduce (passes/cute/block_reduce.py) on Mirage's running max: one output per
block over a long loop tile takes the whole block; over at most `RUNNING_MAX_WARP_ELEMENTS`
elements it keeps its warp."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirage_xdsl.dialects import cute
from mirage_xdsl.driver.compile import prepare
from mirage_xdsl.driver.load import load_module

SUITE = Path(__file__).resolve().parents[2] / "examples" / "suite"


def running_max_threads(name: str) -> list[int]:
    """`cute.reduce_threads` of every running max (a max reduce with two outputs) of suite
    program `name` after mirage-transpile, and checks that the printed call uses it."""
    prepared = prepare(load_module(SUITE / f"{name}.mlir"), name, "sm_90a")
    ops = [op for op in prepared.module.walk() if isinstance(op, cute.ReduceOp) and len(op.outs) == 2]
    threads = [op.attributes[cute.REDUCE_THREADS].value.data for op in ops]  # type: ignore[attr-defined]
    for g in threads:
        assert f"mx::reduce_max_running<128, {g}," in prepared.program.source
    return threads


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_a_long_running_max_takes_the_whole_block(dtype: str) -> None:
    # the cross-entropy's loop tiles (1 x 2048 in fp16 / bf16, 1 x 1024 in fp32), one row
    # per 128-thread block
    assert running_max_threads(f"suite_cross_entropy_{dtype}") == [128]


@pytest.mark.parametrize("name", ["suite_decode_g1_kv1k_f16", "suite_decode_g1_kv1k_bf16"])
def test_a_short_running_max_keeps_its_warp(name: str) -> None:
    # decode attention over 1024 keys, 32 scores per running max
    assert running_max_threads(name) == [32]
