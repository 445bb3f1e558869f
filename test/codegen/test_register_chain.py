"""Matmul -> exp -> matmul with P kept in registers (`cute.mma_chain`): the lowered loop and the
emulated kernel against the numpy reference executor, for a lit input and for kn-fuse's plans."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from codegen_support import assert_emulation_matches, fused_and_lowered, have_cxx, make_ctx

from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.dialects import cute

REGISTER_CHAIN = Path(__file__).parents[1] / "filecheck" / "codegen" / "register-chain.mlir"


@pytest.mark.parametrize(("rows", "dtype", "warps"), [(16, "f16", (1, 4)), (16, "bf16", (1, 4)), (32, "f16", (2, 2)), (64, "f16", (4, 1))])
def test_register_chain_emulated(rows: int, dtype: str, warps: tuple[int, int]) -> None:
    """Attention with 16, 32 or 64 query rows per block: one cute.mma_chain per iteration (no
    shared P tile, no barrier between the two products), a warp row per 16 query rows and
    the other warps splitting the keys of P @ V, and the emulated kernel computes the
    reference (bf16: P rounded to bf16 like the shared tile it replaces)."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    text = REGISTER_CHAIN.read_text().replace("f16", dtype).replace("x16x", f"x{rows}x")
    module = Parser(make_ctx(), text).parse_module()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    (loop,) = [op for op in lowered.walk() if isinstance(op, cute.ForOp)]
    names = [op.name for op in loop.body.block.ops]
    assert names.count("cute.mma_chain") == 1 and "cute.mma" not in names
    (chain,) = [op for op in loop.body.block.ops if isinstance(op, cute.MmaChainOp)]
    assert chain.sum.type.mma.tg == warps  # type: ignore[attr-defined]
    assert names.count("cute.barrier") == 2  # after the loads, at the end of the iteration
    assert not any(isinstance(op, cute.SmemAllocOp) and not op.result.uses for op in lowered.walk())
    program = emit_cuda(lowered)
    rng = np.random.default_rng(5)
    inputs = [rng.uniform(-0.3, 0.3, size=s.shape).astype(np.float32) for s in program.plans["attn"].inputs]
    (ref,) = run_reference(module, [x.astype(np.float64) for x in inputs])
    (out,) = HostEmulator(program).run("attn", [x.astype(np.float16) for x in inputs] if dtype == "f16" else inputs)
    assert not np.isnan(out).any()
    assert np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2


def test_planned_register_chains_emulated() -> None:
    """kn-fuse's attention plans of a small GQA graph that lower to cute.mma_chain (its warps
    own 16 keys each) compute the plain graph; plans that do not fit the pattern keep the
    shared P tile."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    text = """
    func.func @gqa(%Q: tensor<2x32x64xf16>, %K: tensor<2x64x512xf16>, %V: tensor<2x512x64xf16>) -> tensor<2x32x64xf16> {
      %s = kn.matmul %Q, %K : tensor<2x32x64xf16>, tensor<2x64x512xf16> -> tensor<2x32x512xf16>
      %e = kn.exp %s : tensor<2x32x512xf16>
      %z = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<2x32x512xf16> -> tensor<2x32x1xf16>
      %p = kn.div %e, %z : tensor<2x32x512xf16>, tensor<2x32x1xf16> -> tensor<2x32x512xf16>
      %o = kn.matmul %p, %V : tensor<2x32x512xf16>, tensor<2x512x64xf16> -> tensor<2x32x64xf16>
      func.return %o : tensor<2x32x64xf16>
    }"""
    found = 0
    for rank, module, lowered in fused_and_lowered(text, 8):
        if not any(isinstance(op, cute.MmaChainOp) for op in lowered.walk()):
            continue
        assert_emulation_matches(module, emit_cuda(lowered), "gqa", scale=0.3, seed=rank)
        found += 1
    assert found >= 1
