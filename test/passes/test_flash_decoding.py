"""Splits of an axis a max reduces (issue #30): flash decoding (decode attention with one query
per KV head, and several, folded by the combine) and the max pass over one long row.  Flash decoding's kernel 1 runs the online
softmax over one of S chunks of the keys and stores its running max, row sum and P @ V as the
S rows of `[heads, S, n]` partials; the combine kernel rescales them by exp(m_s - max_s m_s)
(`split_combine.combine_group`); a max pass alone stores partial maxima that the combine
reduces by a max.  Checked as IR, in the reference executor (the block graphs' float64 value
against the kernel graph's, scores up to +-50), in the host emulator and on the GPU against
the float64 reference (seeded inputs, NaN-poisoned outputs; bench.fuzz_check)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from xdsl.ir import Operation

from mirage_xdsl.bench.fuzz_check import check_emulated, check_gpu
from mirage_xdsl.bench.fuzz_graphs import FuzzCase
from mirage_xdsl.bench.suite import graphs
from mirage_xdsl.dialects import kn, tb
from mirage_xdsl.dialects.kn.reshape_op import ReshapeOp
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.driver.load import load_module
from mirage_xdsl.frontends.builder import new_kernel_graph
from mirage_xdsl.passes.conversion.kn_fuse import KnFusePass
from mirage_xdsl.reference.executor import run_reference
from mirage_xdsl.runtime.host_emulator import find_cxx

SUITE = Path(__file__).resolve().parents[2] / "examples" / "suite"
needs_cxx = pytest.mark.skipif(find_cxx() is None, reason="the host emulator needs a C++ compiler")


def _fused(module: Operation, **options: bool) -> list[kn.CustomizedOp]:
    KnFusePass(**options).apply(make_context(), module)  # type: ignore[arg-type]
    return [op for op in module.walk() if isinstance(op, kn.CustomizedOp)]


def _ops(op: kn.CustomizedOp, kind: type) -> list[Operation]:
    return [o for o in op.body.walk() if isinstance(o, kind)]


def test_decode_with_one_query_per_kv_head_is_split_along_the_keys() -> None:
    # the generated kernels (targets other than sm_90; there it is one cute.decode_attention)
    kernels = _fused(load_module(SUITE / "suite_decode_g1_kv32k_f16.mlir"), hopper_attention=False)
    assert len(kernels) == 2
    main, combine = kernels
    assert main.attributes["kn.template"].data == "flash_decoding"  # type: ignore[attr-defined]
    heads, split = main.grid_dim.get_values()[:2]  # type: ignore[attr-defined]
    assert heads == 32 and split > 1
    # the running max is stored (its final value: a max accumulator), beside the row sum and P @ V
    assert len(_ops(main, tb.ReductionMaxOp)) == 1
    assert [o.kind.data for o in _ops(main, tb.ForloopAccumOp)] == ["red_ld_sum_rescale", "nored_rescale", "max"]  # type: ignore[attr-defined]
    assert [kn.shape_of(r) for r in main.results] == [(32, split, 1), (32, split, 1), (32, split, 128)]
    # the combine: the max of the partial maxima over the S rows, the rescaled sums
    (gmax,) = _ops(combine, tb.ReduceMaxOp)
    assert gmax.dim.value.data == 1  # type: ignore[attr-defined]
    assert len(_ops(combine, tb.ExpOp)) == 1 and len(_ops(combine, tb.ReductionOp)) == 2


def grouped_decode_then_projection(dtype: str, kv_heads: int = 8, group: int = 4, kv_len: int = 4096) -> Operation:
    """Grouped-query decode attention whose output feeds an output projection (as in a decoder
    layer): [kv_heads, group, 128] attention, viewed as [kv_heads * group, 128], @ W [128, 128]."""
    g = new_kernel_graph("gdec")
    Q = g.new_input((kv_heads, group, 128), dtype=dtype, name="Q")
    K = g.new_input((kv_heads, 128, kv_len), strides=(kv_len * 128, 1, 128), dtype=dtype, name="K")
    V = g.new_input((kv_heads, kv_len, 128), dtype=dtype, name="V")
    W = g.new_input((128, 128), dtype=dtype, name="W")
    att = graphs.attention(g, Q, K, V, 1.0 / math.sqrt(128))
    g.mark_output(g.matmul(g.reshape(att, (kv_heads * group, 128)), W))
    return g.module


def test_several_query_rows_per_kv_head_fold_into_the_combine() -> None:
    """g = 4 query rows per KV head: kernel 1 stores the partials of each row side by side
    ([8, 4, S * x]), the combine reads them folded as [32, S, x] (no-copy reshapes) and takes
    the max of the partial maxima over dim 1; its [32, 1, 128] result is reshaped back."""
    module = grouped_decode_then_projection("float16")
    _fused(module)
    ops = list(module.body.block.first_op.body.block.ops)  # type: ignore[attr-defined]
    main = next(o for o in ops if isinstance(o, kn.CustomizedOp) and o.attributes["kn.template"].data == "flash_decoding")  # type: ignore[attr-defined]
    split = main.grid_dim.get_values()[1]  # type: ignore[attr-defined]
    assert split > 1 and [kn.shape_of(r) for r in main.results] == [(8, 4, split), (8, 4, split), (8, 4, split * 128)]
    views = [o for o in ops if isinstance(o, ReshapeOp) and o.input in main.results]
    assert [kn.shape_of(v.output) for v in views] == [(32, split, 1), (32, split, 1), (32, split, 128)]
    combine = next(o for o in ops if isinstance(o, kn.CustomizedOp) and set(o.inputs) == {v.output for v in views})
    (gmax,) = _ops(combine, tb.ReduceMaxOp)
    assert gmax.dim.value.data == 1  # type: ignore[attr-defined]
    assert [kn.shape_of(r) for r in combine.results] == [(32, 1, 128)]
    (back,) = [o for o in ops if isinstance(o, ReshapeOp) and o.input == combine.results[0]]
    assert kn.shape_of(back.output) == (8, 4, 128)


def test_a_returned_grouped_attention_writes_into_the_output() -> None:
    """A folded combine whose result is a graph output writes straight into the output's buffer:
    the reshape back is a `kn.output_view` (no copy, no workspace), so the launch plan is two
    kernels and the combine's output argument is graph output 0, viewed with the combine's
    [32, 1, 128] shape."""
    from mirage_xdsl.codegen.launch_plan import KernelLaunch
    from mirage_xdsl.driver.compile import prepare

    module = graphs.decode_attention("float16", "dec", kv_heads=4, group=8, kv_len=1024, head_dim=128)
    prepared = prepare(module, None, "sm_90")
    steps = prepared.plan.steps
    assert len(steps) == 2 and all(isinstance(s, KernelLaunch) for s in steps)
    out = steps[1].args[0]  # type: ignore[union-attr]
    assert (out.kind, out.index, out.offset) == ("output", 0, 0) and out.spec is not None and out.spec.shape == (32, 1, 128)
    views = [o for o in prepared.module.walk() if isinstance(o, ReshapeOp) and "kn.output_view" in o.attributes]
    assert [kn.shape_of(v.output) for v in views] == [(4, 8, 128)]


@pytest.mark.parametrize("peak", [1.0, 50.0])
def test_the_folded_combine_computes_the_kernel_graphs_value(peak: float) -> None:
    """The fused graph (kernel 1, the views, the folded combine, the projection) evaluated in
    float64 equals the kernel graph, also at scores of +-50."""
    module = grouped_decode_then_projection("float16")
    fn = module.body.block.first_op  # type: ignore[attr-defined]
    rng = np.random.default_rng(7)
    xs = [rng.uniform(-1, 1, tuple(a.type.get_shape())) for a in fn.args]  # type: ignore[union-attr]
    scores = np.einsum("hgd,hdk->hgk", xs[0], xs[1]) / np.sqrt(128)
    xs[0] *= peak / float(np.abs(scores).max())
    (ref,) = run_reference(module, xs)
    fused = module.clone()
    _fused(fused)
    (got,) = run_reference(fused, xs)
    assert np.isfinite(got).all() and float(np.abs(got - ref).max()) <= 1e-12 * float(np.abs(ref).max())


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_folded_flash_decoding_in_the_emulator(dtype: str) -> None:
    out = check_emulated(FuzzCase("gdec", "kernel", dtype, grouped_decode_then_projection(dtype, kv_len=2048)), seed=5)
    assert out.status == "ok", f"{out.reason}: {out.message}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_folded_flash_decoding_on_the_gpu(dtype: str) -> None:
    out = check_gpu(FuzzCase("gdec", "kernel", dtype, grouped_decode_then_projection(dtype)), seed=6)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"
    returned = graphs.decode_attention(dtype, "dec", kv_heads=4, group=8, kv_len=8192, head_dim=128)
    out = check_gpu(FuzzCase("dec", "kernel", dtype, returned), seed=7)
    assert out.status == "ok", f"returned: {out.status}: {out.reason}: {out.message}"


def _scaled_decode(dtype: str, peak: float, seed: int) -> tuple[Operation, list[np.ndarray]]:
    """Decode attention with 8 KV heads of 4096 keys, one query each; Q scaled so that the
    scores Q K / sqrt(128) reach +-`peak`."""
    module = graphs.decode_attention(dtype, "dec", kv_heads=8, group=1, kv_len=4096, head_dim=128)
    rng = np.random.default_rng(seed)
    fn = module.body.block.first_op
    xs = [rng.uniform(-1, 1, tuple(a.type.get_shape())) for a in fn.args]  # type: ignore[union-attr]
    scores = xs[0] @ xs[1] / np.sqrt(128)
    xs[0] *= peak / float(np.abs(scores).max())
    return module, xs


@pytest.mark.parametrize("peak", [1.0, 50.0])
def test_the_rescaling_combine_computes_the_kernel_graphs_value(peak: float) -> None:
    """The fused block graphs (kernel 1 and the combine) evaluated in float64 by the reference
    executor equal the kernel graph: the rescaling is exact, also at scores of +-50."""
    module, xs = _scaled_decode("float16", peak, seed=3)
    (ref,) = run_reference(module, xs)
    fused = module.clone()
    kernels = _fused(fused)
    assert len(kernels) == 2 and kernels[0].attributes["kn.template"].data == "flash_decoding"  # type: ignore[attr-defined]
    (got,) = run_reference(fused, xs)
    assert np.isfinite(got).all() and float(np.abs(got - ref).max()) <= 1e-12 * float(np.abs(ref).max())


@needs_cxx
@pytest.mark.parametrize(("heads", "group", "kv_len"), [(8, 1, 4096), (4, 8, 1024)])  # one row per KV head, and 8 folded
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_flash_decoding_in_the_emulator(dtype: str, heads: int, group: int, kv_len: int) -> None:
    module = graphs.decode_attention(dtype, "dec", kv_heads=heads, group=group, kv_len=kv_len, head_dim=128)
    out = check_emulated(FuzzCase("dec", "kernel", dtype, module), seed=5)
    assert out.status == "ok", f"{out.reason}: {out.message}"


@pytest.mark.gpu
@pytest.mark.parametrize("kv_len", [1024, 32768])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_suite_flash_decoding_on_the_gpu(kv_len: int, dtype: str) -> None:
    module = graphs.decode_attention(dtype, "dec", kv_heads=32, group=1, kv_len=kv_len, head_dim=128)
    out = check_gpu(FuzzCase("dec", "kernel", dtype, module), seed=6)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


def test_a_split_online_softmax_without_matmuls_combines_by_rescaling() -> None:
    """A one-row log-sum-exp style graph under `online-softmax=true`: its split candidates
    combine the partial maxima and rescaled sums (never a grid sum, which would add maxima),
    and every candidate computes the kernel graph's value at scores of +-30."""
    from mirage_xdsl.frontends.builder import new_kernel_graph

    g = new_kernel_graph("lse")
    x = g.new_input((1, 32768), dtype="float16", name="X")
    m = g.reduction_max(x, 1)
    g.mark_output(g.div(g.reduction(g.exp(g.sub(x, m)), 1), m))
    xs = [np.random.default_rng(1).uniform(-30, 30, (1, 32768))]
    (ref,) = run_reference(g.module, xs)
    split = 0
    for candidate in range(6):
        fused = g.module.clone()
        KnFusePass(online_softmax=True, candidate=candidate).apply(make_context(), fused)
        kernels = [op for op in fused.walk() if isinstance(op, kn.CustomizedOp)]
        assert not any(_ops(k, tb.GridSumOp) for k in kernels)
        split += len(kernels) == 2 and bool(_ops(kernels[1], tb.ReduceMaxOp))
        (got,) = run_reference(fused, xs)
        assert float(np.abs(got - ref).max()) <= 1e-12 * float(np.abs(ref).max())
    assert split >= 1


def _softmax_row(cols: int, dtype: str) -> Operation:
    from mirage_xdsl.frontends.builder import new_kernel_graph

    g = new_kernel_graph("softmax_row")
    x = g.new_input((1, cols), dtype=dtype, name="X")
    e = g.exp(g.sub(x, g.reduction_max(x, 1)))
    g.mark_output(g.div(e, g.reduction(e, 1)))
    return g.module


def test_a_max_pass_over_one_long_row_is_split() -> None:
    """The max pass of a softmax over one 131072-wide row: 64 blocks store partial maxima
    side by side along the reduced dim and a combine takes their max (one block walked the
    row before: 220.7 µs on an H200 for fp32 where the split plan's whole softmax took 12.9)."""
    module = _softmax_row(131072, "float32")
    xs = [np.random.default_rng(2).uniform(-30, 30, (1, 131072))]
    (ref,) = run_reference(module, xs)
    fused = module.clone()
    first, combine = _fused(fused)[:2]
    assert first.grid_dim.get_values()[0] > 1 and kn.shape_of(first.results[0]) == (1, first.grid_dim.get_values()[0])  # type: ignore[attr-defined]
    assert [o.kind.data for o in _ops(first, tb.ForloopAccumOp)] == ["max"]  # type: ignore[attr-defined]
    assert _ops(combine, tb.ReduceMaxOp) and not _ops(combine, tb.ExpOp)
    (got,) = run_reference(fused, xs)
    assert float(np.abs(got - ref).max()) <= 1e-12 * float(np.abs(ref).max())


@needs_cxx
def test_a_split_max_pass_in_the_emulator() -> None:
    out = check_emulated(FuzzCase("softmax_row", "kernel", "float32", _softmax_row(131072, "float32")), seed=7)
    assert out.status == "ok", f"{out.reason}: {out.message}"
