"""`kn.reduction_max` (a kernel-level max over one dim) through the whole stack: builder,
reference executor, kn-fuse (`tb.reduce_max`, a `max` for-loop accumulator when the loop walks
the reduced dim, no split-K of that dim), tb-to-cute (`cute.reduce "max"` with one result),
the printer (`mx::reduce_max`) and the library fallback.

Numerics: the host emulator in CI (`bench.fuzz_check.check_emulated`: seeded inputs, NaN-poisoned
outputs, float64 reference), the same graphs on the GPU with `@pytest.mark.gpu`.  Scores are
scaled to +-30 (real attention logits), where `exp` without the max subtraction overflows
fp16 -- the stable programs must stay finite and exact.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from mirage_xdsl.bench.fuzz_check import check_emulated
from mirage_xdsl.bench.fuzz_graphs import FuzzCase
from mirage_xdsl.frontends.builder import new_kernel_graph
from mirage_xdsl.runtime.host_emulator import find_cxx

needs_cxx = pytest.mark.skipif(find_cxx() is None, reason="the host emulator needs a C++ compiler")

DTYPES = ["float16", "bfloat16", "float32"]


def stable_softmax(rows: int, cols: int, dtype: str, scale: float = 60.0) -> object:
    """softmax over the last dim, `exp(x - max(x)) / sum(...)`, of `scale * X` (|X| <= 0.5)."""
    g = new_kernel_graph("softmax")
    X = g.new_input(dims=(rows, cols), dtype=dtype)
    x = g.mul_scalar(X, scale)
    e = g.exp(g.sub(x, g.reduction_max(x, 1)))
    g.mark_output(g.div(e, g.reduction(e, 1)))
    return g.module


def plain_softmax(rows: int, cols: int, dtype: str) -> object:
    """softmax of the input itself: the row max is the first op (a reduction of the loaded
    tile, not of a computed value)."""
    g = new_kernel_graph("softmax")
    X = g.new_input(dims=(rows, cols), dtype=dtype)
    e = g.exp(g.sub(X, g.reduction_max(X, 1)))
    g.mark_output(g.div(e, g.reduction(e, 1)))
    return g.module


def column_max(rows: int, cols: int, dtype: str) -> object:
    """max over dim 0 (the rows: a dim kn-fuse may walk with the for-loop), then a use of it."""
    g = new_kernel_graph("colmax")
    X = g.new_input(dims=(rows, cols), dtype=dtype)
    m = g.reduction_max(X, 0)
    g.mark_output(g.relu(m))
    return g.module


def row_max(rows: int, cols: int, dtype: str) -> object:
    """relu(max over a row too long for one tile): kn-fuse walks the row with the for-loop,
    `tb.reduce_max` of each tile into a `max` accumulator."""
    g = new_kernel_graph("rowmax")
    X = g.new_input(dims=(rows, cols), dtype=dtype)
    g.mark_output(g.relu(g.reduction_max(X, 1)))
    return g.module


def stable_attention(q_rows: int, keys: int, head: int, dtype: str) -> object:
    """One head of attention with the max subtracted: softmax(Q K^T * 16) V (scores +-30)."""
    g = new_kernel_graph("attention")
    Q = g.new_input(dims=(q_rows, head), dtype=dtype)
    K = g.new_input(dims=(head, keys), dtype=dtype)
    V = g.new_input(dims=(keys, head), dtype=dtype)
    s = g.mul_scalar(g.matmul(Q, K), 16.0)
    p = g.exp(g.sub(s, g.reduction_max(s, 1)))
    g.mark_output(g.div(g.matmul(p, V), g.reduction(p, 1)))
    return g.module


def logsumexp(rows: int, cols: int, dtype: str) -> object:
    """`max(x) + log(sum(exp(x - max(x))))` over rows too long for one tile: the max is read
    inside the loop (online softmax) and after it (its final value)."""
    g = new_kernel_graph("logsumexp")
    X = g.new_input(dims=(rows, cols), dtype=dtype)
    x = g.mul_scalar(X, 60.0)
    m = g.reduction_max(x, 1)
    z = g.reduction(g.exp(g.sub(x, m)), 1)
    g.mark_output(g.add(m, g.log(z)))
    return g.module


def _check(module: object, name: str, dtype: str, online: bool = False) -> None:
    out = check_emulated(FuzzCase(name, "kernel", dtype, module), seed=3, options={"online_softmax": online})
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


def test_reference_and_builder() -> None:
    import mirage_xdsl as mx

    x = np.random.default_rng(0).uniform(-0.5, 0.5, (8, 256))
    (out,) = mx.run_reference(stable_softmax(8, 256, "float32"), [x])
    z = 60.0 * x
    ref = np.exp(z - z.max(1, keepdims=True))
    np.testing.assert_allclose(out, ref / ref.sum(1, keepdims=True), rtol=1e-12)
    (m,) = mx.run_reference(column_max(64, 32, "float32"), [x[:, :32].repeat(8, 0)[:64]])
    np.testing.assert_array_equal(m, np.maximum(x[:, :32].repeat(8, 0)[:64].max(0, keepdims=True), 0))


def test_kn_fuse_places_the_max_in_the_block_graph() -> None:
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = stable_softmax(64, 1024, "float16")
    MirageTranspilePass().apply(make_context(), module)
    text = str(module)
    assert "kn.reduction_max" not in text  # fused, not a library call
    assert 'cute.reduce "max"' in text


def test_split_k_never_splits_a_max_reduced_dim() -> None:
    """Split-K combines partials by summing: a max over the split dim would be summed."""
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = column_max(8192, 64, "float16")
    MirageTranspilePass().apply(make_context(), module)
    assert "grid_sum" not in str(module)
    assert "partial" not in str(module)


@needs_cxx
@pytest.mark.parametrize("dtype", DTYPES)
def test_stable_softmax_emulated(dtype: str) -> None:
    _check(stable_softmax(8, 256, dtype), "softmax", dtype)


@needs_cxx
@pytest.mark.parametrize("shape", [(16, 2048), (1, 4096), (64, 64)])
def test_stable_softmax_shapes_emulated(shape: tuple[int, int]) -> None:
    _check(stable_softmax(*shape, "float16"), "softmax", "float16")


def test_softmax_rows_run_in_registers() -> None:
    """The whole softmax of a row is one register row chain (passes/cute/row_chains.py): the
    input row loaded once from global memory, `mx::block_max`, exp, `mx::block_sum`, div."""
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = plain_softmax(16, 2048, "float16")
    MirageTranspilePass().apply(make_context(), module)
    source = emit_cuda(module).source
    assert "mx::block_max<" in source and "mx::block_sum<" in source and "from global memory" in source
    assert "mx::reduce_max<" not in source


@needs_cxx
@pytest.mark.parametrize("dtype", DTYPES)
def test_plain_softmax_in_registers_emulated(dtype: str) -> None:
    _check(plain_softmax(16, 2048, dtype), "softmax", dtype)


@needs_cxx
@pytest.mark.parametrize("dtype", DTYPES)
def test_column_max_over_the_loop_dim_emulated(dtype: str) -> None:
    _check(column_max(1024, 64, dtype), "colmax", dtype)


def test_a_long_row_max_loops_into_a_max_accumulator() -> None:
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = row_max(2, 65536, "float16")
    MirageTranspilePass(to_cute=False).apply(make_context(), module)
    text = str(module)
    assert "tb.reduce_max" in text and "tb.forloop_accum max" in text, text


@needs_cxx
@pytest.mark.parametrize("dtype", DTYPES)
def test_long_row_max_emulated(dtype: str) -> None:
    _check(row_max(2, 65536, dtype), "rowmax", dtype)


def _kn_fused(module: object, online: bool = True) -> str:
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    MirageTranspilePass(to_cute=False, tuning=f"online_softmax={online}").apply(make_context(), module)
    return str(module)


def test_stable_attention_is_one_online_softmax_kernel() -> None:
    """The max is read inside the loop over the keys (`exp(s - max)`): with `online-softmax`
    kn-fuse keeps it running there (`tb.reduction_max`) and rescales the accumulators of the
    row sums and of `exp(...) @ V` (FlashAttention's online softmax) -- one kernel; by
    default its 16 query rows are too few to fill the GPU, so the keys are split: flash
    decoding, kernel 1 with the running max and the folded combine (split_combine.py)."""
    default = _kn_fused(stable_attention(16, 32768, 64, "float16"), online=False)
    assert re.findall(r'kn.template = "(\w+)"', default) == ["flash_decoding", "split_reduce"], default
    assert default.count("tb.reduction_max") == 1
    # 128 query rows (more than a folded split takes, split_combine.MAX_FOLDED_ROWS): the keys
    # need a loop, and the one online kernel is the plan
    text = _kn_fused(stable_attention(128, 32768, 64, "float16"))
    assert text.count("kn.customized") == 1, text
    # the row sums' red_ld_sum_rescale is decomposed into nored_rescale + tb.reduction
    assert "tb.reduction_max" in text and text.count("tb.forloop_accum nored_rescale") == 2, text


def test_logsumexp_reads_the_running_max_after_the_loop() -> None:
    text = _kn_fused(logsumexp(128, 65536, "float16"))  # two rows would fold (split the row)
    assert text.count("kn.customized") == 1, text
    assert "tb.reduction_max" in text and "tb.forloop_accum max" in text


def test_logsumexp_sums_exp_in_registers() -> None:
    """The online logsumexp's `exp(x - max)` is fused into its rescaled sum (tb-fusion-chains:
    a `nored_rescale` accumulator ends the elementwise chain `[sub, exp]`), so the exponentials
    are never stored; the sum is a register accumulator (cute-register-accumulators: mode
    `rescale`), and tb-schedule runs the chain only after its scale `exp(old max - new max)`."""
    from conftest import transpiled

    text = str(transpiled(logsumexp(128, 65536, "float16"), online_softmax=True))
    fused = re.findall(r'cute.elementwise "sub"\((%\w+), (%\w+), (%\w+)\) \[#cute.fn<exp>\] "rescale" (%\w+)', text)
    assert len(fused) == 1, text
    scale, acc = fused[0][2], fused[0][3]
    assert re.search(rf"cute.fill {acc}, 0.0 {{cute.accum_in_reg, cute.reg_accum = \d+ : i64}}", text), text
    # the scale is made before the chain that reads it, with a barrier between them
    loop = text[text.index("cute.for"):]
    made = loop.index(f'"store" {scale} ')
    used = loop.index('"rescale"')
    assert made < used and "cute.barrier" in loop[made:used], loop


def test_attention_keeps_its_lone_rescaled_accumulators() -> None:
    """`exp(s - max)` of attention feeds both its row sum and `P @ V` (two uses): nothing is
    fused onto it, so the flash register chain (register_chain.py) still finds its parts."""
    from mirage_xdsl.dialects import tb
    from mirage_xdsl.dialects.kn import CustomizedOp
    from mirage_xdsl.passes.tb.fusion_chains import compute_chains

    module = stable_attention(128, 32768, 64, "float16")
    _kn_fused(module)
    graphs = [op for op in module.walk() if isinstance(op, CustomizedOp)]
    rescaled = [
        (op, chains)
        for g in graphs
        for chains in [compute_chains(g.body.block)]
        for op in g.body.block.ops
        if isinstance(op, tb.ForloopAccumOp) and op.accum_kind == "nored_rescale"
    ]
    assert len(rescaled) == 2
    assert all(chains[op][1] == 0 for op, chains in rescaled)


@needs_cxx
@pytest.mark.parametrize("dtype", DTYPES)
def test_logsumexp_emulated(dtype: str) -> None:
    _check(logsumexp(2, 65536, dtype), "logsumexp", dtype, online=True)
    _check(logsumexp(2, 65536, dtype), "logsumexp", dtype)  # the default: partitioned


@needs_cxx
@pytest.mark.parametrize("shape", [(16, 32768, 64), (1, 65536, 128), (64, 8192, 64)])
def test_online_softmax_attention_emulated(shape: tuple[int, int, int]) -> None:
    _check(stable_attention(*shape, "float16"), "attention", "float16", online=True)


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_stable_attention_emulated(dtype: str) -> None:
    _check(stable_attention(16, 512, 64, dtype), "attention", dtype)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "build",
    [
        lambda: (stable_softmax(16, 2048, "float16"), "softmax", "float16"),
        lambda: (stable_softmax(8, 256, "bfloat16"), "softmax", "bfloat16"),
        lambda: (plain_softmax(16, 2048, "float16"), "softmax", "float16"),
        lambda: (column_max(4096, 64, "float32"), "colmax", "float32"),
        lambda: (row_max(4, 262144, "float16"), "rowmax", "float16"),
        lambda: (stable_attention(16, 1024, 128, "float16"), "attention", "float16"),
        lambda: (stable_attention(16, 4096, 64, "float16"), "attention", "float16"),
        lambda: (logsumexp(4, 262144, "float16"), "logsumexp", "float16"),
    ],
)
@pytest.mark.parametrize("online", [False, True])
def test_gpu_reduction_max_programs(build: object, online: bool) -> None:
    from mirage_xdsl.bench.fuzz_check import check_gpu

    module, name, dtype = build()  # type: ignore[operator]
    out = check_gpu(FuzzCase(name, "kernel", dtype, module), seed=5, options={"online_softmax": online})
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"
