"""The causal mask (`kn.causal_mask`, issue #30 item 2): builder, reference executor, the
threadblock graphs kn-fuse plans for it (every candidate plan computes the kernel graph's
value in the reference executor), and the generated kernels -- cute.causal_mask on shared
tiles and the flash chain's in-register mask -- in the host emulator and on the GPU against
the float64 reference (seeded inputs, NaN-poisoned outputs; bench.fuzz_check)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mirage_xdsl.bench.fuzz_check import Outcome, run_emulated
from mirage_xdsl.bench.fuzz_graphs import FuzzCase
from mirage_xdsl.bench.suite import graphs
from mirage_xdsl.frontends.builder import GraphBuildError, new_kernel_graph
from mirage_xdsl.reference.executor import run_reference
from mirage_xdsl.runtime.host_emulator import find_cxx

sys.path.insert(0, str(Path(__file__).parent))
from test_online_chain import CHAIN, PLANS, _lowered  # noqa: E402

needs_cxx = pytest.mark.skipif(find_cxx() is None, reason="the host emulator needs a C++ compiler")


def test_builder_default_offset_is_bottom_right() -> None:
    g = new_kernel_graph("m")
    x = g.new_input((2, 3, 5), dtype="float16", name="X")
    g.mark_output(g.causal_mask(x))
    assert "kn.causal_mask %X {offset = 2 : i64}" in str(g.module)
    (out,) = run_reference(g.module, [np.ones((2, 3, 5))])
    keep = np.arange(5)[None, :] <= np.arange(3)[:, None] + 2
    assert np.array_equal(np.isfinite(out[1]), keep) and np.all(out[np.isfinite(out)] == 1.0)


@pytest.mark.parametrize(("shape", "offset", "match"), [((8,), None, "rank >= 2"), ((4, 2), None, "offset -2 < 0"),
                                                       ((4, 4), -1, "offset -1 < 0"), ((4, 4), 1.5, "must be an int")])
def test_builder_rejects(shape: tuple[int, ...], offset: Any, match: str) -> None:
    g = new_kernel_graph("m")
    x = g.new_input(shape, dtype="float16")
    with pytest.raises(GraphBuildError, match=match):
        g.causal_mask(x, offset)


# the generated kernels' plans (hopper-attention=false: not the sm_90a flash kernel)
@pytest.mark.parametrize(
    "options",
    [
        f"kn-fuse{{{o}hopper-attention=false}}"
        for o in ("", "candidate=1 ", "candidate=2 ", "candidate=3 ", "always-split=true ", "online-softmax=true ", "num-sms=2 ")
    ],
)
def test_every_plan_masks_its_tiles(options: str) -> None:
    """The tb graphs of several plans (whole key rows after the loop, key tiles walked by the
    loop with a running max, the flash plan of a small device) equal the kernel graph in the
    reference executor: tb.causal_mask's grid_dims / forloop_dims place every tile."""
    from xdsl.passes import PassPipeline

    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes import get_all_passes

    module = graphs.prefill_attention_causal("float16", "p", heads=2, seq=256, head_dim=64)
    fn = module.body.block.first_op
    rng = np.random.default_rng(3)
    xs = [rng.uniform(-1, 1, tuple(a.type.get_shape())) for a in fn.args]  # type: ignore[union-attr]
    (ref,) = run_reference(module, xs)
    fused = module.clone()
    PassPipeline.parse_spec(get_all_passes(), options).apply(make_context(), fused)
    assert "tb.causal_mask" in str(fused)
    (got,) = run_reference(fused, xs)
    assert np.isfinite(got).all() and float(np.abs(got - ref).max()) < 1e-12


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("key", list(PLANS), ids=lambda k: "h{}_s{}_d{}".format(*k[:3]))
def test_flash_chain_masks_in_registers(key: tuple[int, ...], dtype: str) -> None:
    """The flash chains of test_online_chain.py's plans, causal: `mx::mma_chain_online_run`
    without the mask below the diagonal and with `mx::CausalMask` on it (cute-causal-skip,
    test_causal_skip.py), equal to the reference in the emulator."""
    heads, seq, d, sms, cand = key
    module = graphs.prefill_attention_causal(dtype, "prefill", heads=heads, seq=seq, head_dim=d)
    prog = _lowered(module, sms, cand)
    assert [tuple(int(x) for x in f) for f in CHAIN.findall(prog.source)] == [PLANS[key]] * 2
    assert "mx::CausalMask{" in prog.source and "mx::causal_mask<" not in prog.source
    out = run_emulated(Outcome("prefill", "ok", dtype=dtype, kind="kernel"), FuzzCase("prefill", "kernel", dtype, module),
                       prog, 5, None)
    assert out.status == "ok", f"{out.reason}: {out.message}"


@needs_cxx
@pytest.mark.parametrize("options", [None, {"candidate": 1}, {"candidate": 3}, {"online_softmax": True}])
def test_shared_tile_mask_in_the_emulator(options: Any) -> None:
    """Plans that mask a shared tile (cute.causal_mask): after the loop, or in it on key tiles."""
    from mirage_xdsl.bench.fuzz_check import check_emulated

    module = graphs.prefill_attention_causal("float16", "p", heads=1, seq=512, head_dim=128)
    out = check_emulated(FuzzCase("p", "kernel", "float16", module), seed=4, options=options)
    assert out.status == "ok", f"{out.reason}: {out.message}"


@pytest.mark.gpu
@pytest.mark.parametrize("seq", [1024, 4096])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_suite_causal_prefill_on_the_gpu(seq: int, dtype: str) -> None:
    """The suite's causal prefills through the default pipeline (one flash kernel) on the GPU."""
    from mirage_xdsl.bench.fuzz_check import check_gpu

    module = graphs.prefill_attention_causal(dtype, "prefill", heads=8, seq=seq, head_dim=128)
    out = check_gpu(FuzzCase("prefill", "kernel", dtype, module), seed=3)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"
