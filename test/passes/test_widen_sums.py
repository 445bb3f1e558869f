"""Row sums of fp16 / bf16 graphs kept in fp32 (passes/kn/widen_sums.py) and the mixed-precision
rule of the dialects (dialects/common/precision.py).

Before kn-widen-sums a softmax over 131072 fp16 columns whose `exp(x - max)` are near 1 stored
a row sum above 65504 (fp16's largest value) as inf and returned zeros; torch keeps the sum in
fp32.  Numerics run in the host emulator (CI) and on the GPU (NaN-poisoned outputs)."""

from __future__ import annotations

import numpy as np
import pytest
from test_reduction_max import stable_softmax
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import kn, tb
from mirage_xdsl.passes.kn.widen_sums import KnWidenSumsPass
from mirage_xdsl.runtime.host_emulator import find_cxx

needs_cxx = pytest.mark.skipif(find_cxx() is None, reason="the host emulator needs a C++ compiler")


def _parse(text: str) -> ModuleOp:
    ctx = Context()
    for dialect in (Builtin, Func, kn.Kernel, tb.Threadblock):
        ctx.load_dialect(dialect)
    return Parser(ctx, text).parse_module()


def _graph(body: str, args: str, result: str) -> str:
    return f"func.func @g({args}) -> {result} {{\n{body}\n}}"


@pytest.mark.parametrize(
    "line",
    [
        "%o = kn.div %x, %s : tensor<4x64xf16>, tensor<4x1xf32> -> tensor<4x64xf16>",
        "%o = kn.mul %s, %x : tensor<4x1xf32>, tensor<4x64xf16> -> tensor<4x64xf32>",
    ],
)
def test_elementwise_ops_may_mix_a_half_type_with_f32(line: str) -> None:
    text = _graph(f"  {line}\n  func.return %o : {line.split('-> ')[1]}",
                  "%x: tensor<4x64xf16>, %s: tensor<4x1xf32>", line.split("-> ")[1])
    _parse(text).verify()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ("%x: tensor<4x64xf16>, %w: tensor<64x8xf32>", "%o = kn.matmul %x, %w : tensor<4x64xf16>, tensor<64x8xf32> -> tensor<4x8xf16>"),
        ("%x: tensor<4x64xf16>, %w: tensor<4x64xbf16>", "%o = kn.add %x, %w : tensor<4x64xf16>, tensor<4x64xbf16> -> tensor<4x64xf32>"),
        ("%x: tensor<4x64xf16>, %w: tensor<4x64xf16>", "%o = kn.reduction_max %x {dim = 1 : i64} : tensor<4x64xf16> -> tensor<4x1xf32>"),
    ],
)
def test_matmuls_maxima_and_two_half_types_keep_one_type(args: str, line: str) -> None:
    result = line.split("-> ")[1]
    with pytest.raises(VerifyException, match="one element type"):
        _parse(_graph(f"  {line}\n  func.return %o : {result}", args, result)).verify()


def test_a_matmul_of_half_operands_may_have_an_f32_result() -> None:
    line = "%o = kn.matmul %x, %w : tensor<4x64xbf16>, tensor<64x8xbf16> -> tensor<4x8xf32>"
    _parse(_graph(f"  {line}\n  func.return %o : tensor<4x8xf32>", "%x: tensor<4x64xbf16>, %w: tensor<64x8xbf16>", "tensor<4x8xf32>")).verify()
    narrowing = "%o = kn.matmul %x, %w : tensor<4x64xf32>, tensor<64x8xf32> -> tensor<4x8xf16>"
    with pytest.raises(VerifyException, match="one element type"):
        _parse(_graph(f"  {narrowing}\n  func.return %o : tensor<4x8xf16>", "%x: tensor<4x64xf32>, %w: tensor<64x8xf32>", "tensor<4x8xf16>")).verify()


RMS_LINEAR = """
func.func @rms_linear(%X: tensor<2x512xf16> {kn.strides = array<i64: 512, 1>},
                      %W: tensor<512x256xf16> {kn.strides = array<i64: 256, 1>, kn.weight}) -> tensor<2x256xf16> {
  %n = kn.rms_norm %X {normalized_shape = array<i64: 512>} : tensor<2x512xf16>
  %o = kn.matmul %n, %W : tensor<2x512xf16>, tensor<512x256xf16> -> tensor<2x256xf16>
  func.return %o : tensor<2x256xf16>
}
"""


@needs_cxx
def test_rms_norm_linear_of_large_rows_stays_finite() -> None:
    """Rows of magnitude ~5.5e3 (fp16 holds them; their rms norm is O(1)): kn-simplify moves the
    division past the matmul, and X @ W (~1e5) would overflow fp16 before the division; kept in
    f32 (kn-widen-sums) it does not."""
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    module = Parser(make_context(), RMS_LINEAR).parse_module()
    reference = module.clone()
    MirageTranspilePass(arch="sm_90").apply(make_context(), module)
    program = emit_cuda(module, "sm_90")
    plan = program.plans["rms_linear"]
    x, w = random_inputs(plan.inputs, 3)
    x = (x.astype(np.float32) * 11000.0).astype(np.float16)  # |x| up to 5.5e3
    values = [numpy_values(v, s.dtype) for v, s in zip((x, w), plan.inputs)]
    (ref,) = run_reference(reference, values, func_name="rms_linear")
    (out,) = HostEmulator(program).run("rms_linear", [x, w])
    assert np.abs(values[0] @ values[1]).max() > 65504  # the un-normalized product leaves fp16 range
    assert np.isfinite(out).all()
    assert _rel_error(np.asarray(out, dtype=np.float64), ref) < 1e-2


@needs_cxx
def test_bf16_attention_scores_of_50_stay_fp32_up_to_exp() -> None:
    """bf16 decode attention with scores of about +-50 (Q, K uniform in +-6, head dim 128): the
    scores kept in f32 up to `exp` give an error of 0.2-0.4 % of max |out| (one bf16 rounding of
    the output); rounded to bf16 between the product and `exp` they gave 2.8 % here and 5.7-8.6 %
    at the suite's sizes on the H200 (2026-11-28)."""
    from mirage_xdsl.bench.fuzz_check import lower_case
    from mirage_xdsl.bench.fuzz_graphs import FuzzCase
    from mirage_xdsl.bench.suite import graphs
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    module = graphs.decode_attention("bfloat16", "decode", kv_heads=2, group=8, kv_len=1024, head_dim=128)
    lowered = lower_case(FuzzCase("decode", "kernel", "bfloat16", module))
    program = emit_cuda(lowered)
    plan = program.plans["decode"]
    inputs = [random_inputs([spec], 11 + i, scale=scale)[0] for i, (spec, scale) in enumerate(zip(plan.inputs, (6.0, 6.0, 0.5)))]
    values = [numpy_values(v, s.dtype) for v, s in zip(inputs, plan.inputs)]
    assert 40.0 <= float(np.abs(values[0] @ values[1]).max()) / np.sqrt(128) <= 80.0
    (ref,) = run_reference(module, values, func_name="decode")
    (out,) = HostEmulator(program).run("decode", values)
    assert np.isfinite(np.asarray(out, dtype=np.float64)).all()
    assert _rel_error(np.asarray(out, dtype=np.float64), ref) < 1e-2


@needs_cxx
def test_decode_attention_over_large_values_stays_finite() -> None:
    """Positive values of up to 50 over 4096 keys: the flash-decoding partial numerators
    exp(s - m) @ V (up to ~1e5) leave fp16 range; kept in f32 (kn-widen-sums) the attention
    output (a weighted mean of V, at most 50) is finite and correct (before: all 64 inf)."""
    from mirage_xdsl.bench.suite import graphs
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    module = graphs.decode_attention("float16", "decode", kv_heads=1, group=1, kv_len=4096, head_dim=64)
    reference = module.clone()
    MirageTranspilePass(arch="sm_80").apply(make_context(), module)  # the generated kernels (the emulator runs them)
    program = emit_cuda(module, "sm_80")
    plan = program.plans["decode"]
    inputs = random_inputs(plan.inputs, 5)
    inputs[2] = np.abs(inputs[2].astype(np.float32) * 100.0).astype(np.float16)  # V in [0, 50]
    values = [numpy_values(v, s.dtype) for v, s in zip(inputs, plan.inputs)]
    (ref,) = run_reference(reference, values, func_name="decode")
    (out,) = HostEmulator(program).run("decode", inputs)
    assert np.isfinite(out).all()
    assert _rel_error(np.asarray(out, dtype=np.float64), ref) < 1e-2


def test_sum_of_a_half_tensor_may_be_f32() -> None:
    line = "%o = kn.reduction %x {dim = 1 : i64, size = 1 : i64} : tensor<4x64xbf16> -> tensor<4x1xf32>"
    _parse(_graph(f"  {line}\n  func.return %o : tensor<4x1xf32>", "%x: tensor<4x64xbf16>", "tensor<4x1xf32>")).verify()


def wide_softmax(rows: int, cols: int, dtype: str) -> object:
    """softmax over `cols` columns of 0.1 x X (|X| <= 0.5): every `exp(x - max)` is near 1, so the
    row sum is near `cols` (131072 > 65504)."""
    return stable_softmax(rows, cols, dtype, scale=0.1)


def test_the_wide_softmax_sum_is_widened() -> None:
    module = wide_softmax(4, 131072, "float16")
    KnWidenSumsPass().apply(Context(), module)  # type: ignore[arg-type]
    sums = [op for op in module.walk() if isinstance(op, kn.ReductionOp)]  # type: ignore[attr-defined]
    assert [str(kn.element_type_of(op.result)) for op in sums] == ["f32"]


def _inputs_and_reference(rows: int, cols: int, dtype: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs uniform in (-0.5, 0.5) as the device holds them (fp16, or bf16 bit patterns), their
    float64 values and the float64 softmax of 0.1 x them."""
    from mirage_xdsl.runtime.random_inputs import numpy_values

    x = np.random.default_rng(seed).uniform(-0.5, 0.5, size=(rows, cols)).astype(np.float32)
    device = x.astype(np.float16) if dtype == "float16" else to_bf16_bits(x)
    values = numpy_values(device, dtype)
    e = np.exp(0.1 * values - (0.1 * values).max(1, keepdims=True))
    return device, values, e / e.sum(1, keepdims=True)


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values -> bfloat16 bit patterns (round to nearest even), as uint16."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    out = np.asarray(out, np.float64)
    return float(np.abs(out - ref).max() / np.abs(ref).max()) if np.isfinite(out).all() else float("inf")


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_wide_softmax_emulated(dtype: str) -> None:
    """Row sums near 131072: with the sum stored in fp16 the emulated kernels returned zeros
    (error 1.0); kept in fp32 the softmax matches float64 to the output's rounding."""
    from mirage_xdsl.driver.compile import prepare
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    prepared = prepare(wide_softmax(4, 131072, dtype), None, "sm_80")
    device, values, ref = _inputs_and_reference(4, 131072, dtype, seed=5)
    (out,) = HostEmulator(prepared.program).run(prepared.func_name, [device if dtype == "float16" else values])
    assert _rel_error(out, ref) < 2e-2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_wide_softmax_on_the_gpu(dtype: str) -> None:
    """The same on the GPU, 64 rows, NaN-poisoned outputs."""
    import cupy

    from mirage_xdsl.driver.compile import compile as mx_compile

    graph = mx_compile(wide_softmax(64, 131072, dtype), poison_outputs=True)
    device, _, ref = _inputs_and_reference(64, 131072, dtype, seed=6)
    (out,) = graph(cupy.asarray(device))
    host = cupy.asnumpy(out)
    values = host if dtype == "float16" else (host.astype(np.uint32) << 16).view(np.float32)
    assert _rel_error(values, ref) < 2e-2


@needs_cxx
@pytest.mark.parametrize("stem", ["rounding_exp_chain", "rounding_silu_rows"])
def test_rounding_unary_ops_of_hand_written_graphs(stem: str) -> None:
    """tb unary ops that round an f32 tile to f16 where a user writes them (not only the sqrt
    tb-decompose-accumulators ends a 16-bit rms statistic with): inside an elementwise chain
    after an f32 `nored` sum, and feeding a row sum and a division; the generated kernels match
    the reference in the host emulator."""
    from pathlib import Path

    from mirage_xdsl.bench.fuzz_check import check_emulated
    from mirage_xdsl.bench.fuzz_graphs import FuzzCase

    module = _parse((Path(__file__).parents[1] / "data" / f"{stem}.mlir").read_text())
    assert any(isinstance(op, tb.TbUnaryOp) and op.is_rounding() for op in module.walk())
    out = check_emulated(FuzzCase(stem, "block", "float16", module), seed=5)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"
