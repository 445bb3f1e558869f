"""Prefill attention as one flash kernel: the planner's online-softmax choice
(`DeviceModel.auto_online_softmax`), the `cute.mma_chain ... online` lowering
(passes/conversion/register_chain.py) and `mx::mma_chain_online_run`, run in the host
emulator against the float64 reference executor (fresh seeded inputs, NaN-poisoned outputs).

At the emulator's small sizes no grid fills the 132 SMs the planner assumes, so these tests
plan for a device of a few SMs (`kn-fuse{num-sms=N}`), where the same rule picks the online
plans; the suite's sizes are checked on the GPU (last test) and by mirage-bench.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from mirage_xdsl.bench.fuzz_check import Outcome, compare, run_emulated
from mirage_xdsl.bench.fuzz_graphs import TOLERANCE, FuzzCase
from mirage_xdsl.bench.suite import graphs
from mirage_xdsl.runtime.host_emulator import find_cxx

needs_cxx = pytest.mark.skipif(find_cxx() is None, reason="the host emulator needs a C++ compiler")

CHAIN = re.compile(r"mx::mma_chain_online_run<128, decltype\(f\d+\), decltype\(f\d+\), (\d+), (\d+), ")


def _lowered(module: Any, num_sms: int, candidate: int = 0) -> Any:
    """`module` (a clone) through kn-fuse planned for `num_sms` SMs, then mirage-transpile."""
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.conversion.kn_fuse import KnFusePass
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    low = module.clone()
    # the generated (mma.sync) flash chain, not the sm_90a kernel (test_hopper_attention.py)
    KnFusePass(num_sms=num_sms, candidate=candidate, hopper_attention=False).apply(make_context(), low)
    MirageTranspilePass(fuse=False).apply(make_context(), low)
    return emit_cuda(low)


# (heads, seq, head_dim, num_sms, candidate) -> (query rows, keys) of the chain it plans
PLANS = {
    (1, 256, 128, 2, 0): (64, 64),  # 16-row warps, 64-key tiles
    (2, 256, 128, 4, 4): (128, 32),  # 32-row warps (two row blocks each), 32-key tiles
    (2, 192, 64, 2, 1): (64, 64),  # a head dim of 64, three query blocks per head
}


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("key", list(PLANS), ids=lambda k: "h{}_s{}_d{}".format(*k[:3]))
def test_online_chain_matches_the_reference(key: tuple[int, ...], dtype: str) -> None:
    heads, seq, d, sms, cand = key
    module = graphs.prefill_attention(dtype, "prefill", heads=heads, seq=seq, head_dim=d)
    prog = _lowered(module, sms, cand)
    found = CHAIN.findall(prog.source)
    assert [tuple(int(x) for x in f) for f in found] == [PLANS[key]], found
    assert len(prog.plans["prefill"].steps) == 1 and prog.plans["prefill"].steps[0].block == (128, 1, 1)
    case = FuzzCase("prefill", "kernel", dtype, module)
    out = run_emulated(Outcome("prefill", "ok", dtype=dtype, kind="kernel"), case, prog, 5, None)
    assert out.status == "ok", f"{out.reason}: {out.message}"


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_online_chain_with_scores_of_50(dtype: str) -> None:
    """Q and K scaled as the suite scales them (table.py `scaled_inputs`: scores reach about
    +-50): the chain keeps the scores in fp32 up to `exp`, as FlashAttention does, so the
    strict comparison with the float64 reference holds where the partitioned plan's
    fp16/bf16 score tiles miss it (test_suite.py `KNOWN_GAPS`)."""
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    module = graphs.prefill_attention(dtype, "prefill", heads=2, seq=256, head_dim=128)
    prog = _lowered(module, 4)
    assert CHAIN.search(prog.source)
    plan = prog.plans["prefill"]
    scales = (6.0, 6.0, 0.5)  # Q, K, V
    inputs = [random_inputs([spec], 11 + i, scale=s)[0] for i, (spec, s) in enumerate(zip(plan.inputs, scales))]
    values = [numpy_values(x, spec.dtype) for x, spec in zip(inputs, plan.inputs)]
    q, k = values[0], values[1]
    peak = float(np.abs((q @ k) / np.sqrt(q.shape[-1])).max())
    assert 40.0 <= peak <= 80.0, peak
    refs = run_reference(module, values, func_name="prefill")
    emu_in = [numpy_values(x, s.dtype) if s.dtype == "bfloat16" else x for x, s in zip(inputs, plan.inputs)]
    outs = HostEmulator(prog).run("prefill", emu_in)
    outs = [numpy_values(o, s.dtype) if s.dtype != "bfloat16" else o for o, s in zip(outs, plan.outputs)]
    ok, err, msg = compare(outs, refs, dtype)
    assert ok, f"error {err:.3g} > {TOLERANCE[dtype]} with scores of +-{peak:.0f}: {msg}"


def test_decode_attention_keeps_its_partition() -> None:
    """A decode grid (4 KV heads x 8 query rows) leaves most SMs idle: no one-kernel online
    plan; the keys are split, with a combine kernel (the plans of examples/suite's decode files)."""
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.conversion.kn_fuse import KnFusePass

    module = graphs.decode_attention("float16", "decode", kv_heads=4, group=8, kv_len=8192, head_dim=128)
    KnFusePass().apply(make_context(), module)
    templates = re.findall(r'kn.template = "(\w+)"', str(module))
    assert "split_reduce" in templates and len(templates) >= 2


def test_online_plans_need_a_full_grid() -> None:
    """The suite's prefill shapes get one online kernel on the 132-SM device model: 64-row
    blocks with 64-key tiles at 1024 tokens (128 blocks), 128-row blocks with 32-key tiles
    at 4096 (256 blocks: two per SM); the estimate follows the H200 figures it was fitted to."""
    from mirage_xdsl.passes.conversion.default_tb_graph import Planner
    from mirage_xdsl.passes.conversion.plan_group import fusible_op, group_from_ops

    for seq, rows, keys, lo, hi in ((1024, 64, 64, 25.0, 40.0), (4096, 128, 32, 230.0, 290.0)):
        module = graphs.prefill_attention("float16", "prefill", heads=8, seq=seq, head_dim=128)
        fn = module.body.block.first_op
        group, _ = group_from_ops([o for o in fn.body.block.ops if fusible_op(o)])  # type: ignore[union-attr]
        best = Planner().plan(group)
        assert best is not None and len(best.kernels) == 1
        k = best.kernels[0]
        mm = [n for n in k.needed if group.nodes[n].kind == "matmul"][0]
        assert k.online is not None and k.threads == 128 and k.tiles[mm][-2:] == (rows, keys)
        assert lo <= k.cost_us <= hi, k.cost_us


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_prefill_s1024_on_the_gpu(dtype: str) -> None:
    """The suite's 8 x 1024 x 1024 x 128 prefill through the default pipeline (one online
    kernel) on the GPU against the float64 reference (`check_gpu`)."""
    from mirage_xdsl.bench.fuzz_check import check_gpu

    module = graphs.prefill_attention(dtype, "prefill", heads=8, seq=1024, head_dim=128)
    out = check_gpu(FuzzCase("prefill", "kernel", dtype, module), seed=3)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"
