"""Matmuls with elementwise epilogues lowered to the sm_90 GEMM (passes/conversion/gemm_epilogue.py):
which ops form a chain, the contraction's activation in the reference executor, and (GPU) an
MLP and SwiGLU at 128 rows against the float64 reference of the kn graph on NaN-poisoned
outputs."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.contraction.ops import ContractOp
from mirage_xdsl.dialects.cute.hopper_gemm import HopperGemmOp
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.passes.contraction import to_hopper
from mirage_xdsl.passes.conversion.gemm_cost import compute_bound
from mirage_xdsl.passes.conversion.gemm_epilogue import split_into_chains
from mirage_xdsl.passes.conversion.kn_partition import KnPartitionPass
from mirage_xdsl.passes.pipeline import MirageTranspilePass
from mirage_xdsl.reference.executor import run_reference

T = {"float16": "f16", "bfloat16": "bf16"}


def mlp_text(act: str, dtype: str = "float16", m: int = 128, k: int = 1024, n: int = 4096, attrs: str = "") -> str:
    """`@mlp(X, W1, W2) = act(X @ W1) @ W2`; `act` a unary kn op, `attrs` its attribute dict."""
    t = T[dtype]
    return f"""func.func @mlp(%X: tensor<{m}x{k}x{t}>, %W1: tensor<{k}x{n}x{t}> {{kn.weight}}, %W2: tensor<{n}x{k}x{t}> {{kn.weight}}) -> tensor<{m}x{k}x{t}> {{
  %h = kn.matmul %X, %W1 : tensor<{m}x{k}x{t}>, tensor<{k}x{n}x{t}> -> tensor<{m}x{n}x{t}>
  %g = {act} %h {attrs} : tensor<{m}x{n}x{t}>
  %o = kn.matmul %g, %W2 : tensor<{m}x{n}x{t}>, tensor<{n}x{k}x{t}> -> tensor<{m}x{k}x{t}>
  func.return %o : tensor<{m}x{k}x{t}>
}}"""


def swiglu_text(dtype: str = "float16", m: int = 128, k: int = 1024, n: int = 4096) -> str:
    """`@swiglu(X, W1, W3) = silu(X @ W1) * (X @ W3)`."""
    t = T[dtype]
    a, b, o = f"tensor<{m}x{k}x{t}>", f"tensor<{k}x{n}x{t}>", f"tensor<{m}x{n}x{t}>"
    return f"""func.func @swiglu(%X: {a}, %W1: {b} {{kn.weight}}, %W3: {b} {{kn.weight}}) -> {o} {{
  %a = kn.matmul %X, %W1 : {a}, {b} -> {o}
  %s = kn.silu %a : {o}
  %b = kn.matmul %X, %W3 : {a}, {b} -> {o}
  %h = kn.mul %s, %b : {o}, {o} -> {o}
  func.return %h : {o}
}}"""


def _parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def _partitioned(text: str) -> ModuleOp:
    module = _parse(text)
    KnPartitionPass().apply(make_context(), module)
    module.verify()
    return module


def _contracts(module: ModuleOp) -> list[ContractOp]:
    return [o for o in module.walk() if isinstance(o, ContractOp)]


def test_gelu_chain_is_one_contraction_with_its_activation() -> None:
    contracts = _contracts(_partitioned(mlp_text("kn.gelu")))
    assert [[f.fn_name for f in c.activation_fns] for c in contracts] == [["gelu"], []]


def test_clamp_and_mul_scalar_keep_their_parameters() -> None:
    module = _partitioned(mlp_text("kn.clamp", attrs="{min_value = -0.5 : f64, max_value = 0.25 : f64}"))
    (first, _) = _contracts(module)
    assert [(f.fn_name, f.values) for f in first.activation_fns] == [("clamp", (-0.5, 0.25))]


def test_swiglu_takes_the_other_matmul_as_its_factor() -> None:
    module = _partitioned(swiglu_text())
    lone, chain = _contracts(module)
    assert lone.mul is None and not lone.activation_fns
    assert chain.mul is lone.result and [f.fn_name for f in chain.activation_fns] == ["silu"]
    assert chain.config().prim_last.name == "ELWISE_MUL"


@pytest.mark.parametrize("text", [mlp_text("kn.gelu"), swiglu_text("bfloat16")])
def test_partitioned_graph_computes_the_kn_graph(text: str) -> None:
    """The reference executor runs contractions with their activation and factor."""
    rng = np.random.default_rng(3)
    module = _parse(text)
    fn = next(o for o in module.walk() if o.name == "func.func")
    inputs = [rng.uniform(-0.5, 0.5, kn.shape_of(a)) for a in fn.body.block.args]  # type: ignore[attr-defined]
    (want,) = run_reference(module, inputs)
    (got,) = run_reference(_partitioned(text), inputs)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def _group(text: str) -> list:
    fn = next(o for o in _parse(text).walk() if o.name == "func.func")
    return [o for o in fn.body.block.ops if o.name.startswith("kn.")]  # type: ignore[attr-defined]


def test_a_value_read_twice_ends_the_chain() -> None:
    """`silu(h) * h`: h has two readers, so the silu and the mul belong to no chain."""
    text = swiglu_text().replace("%h = kn.mul %s, %b", "%h = kn.mul %s, %a")
    assert split_into_chains(_group(text), compute_bound) is None


def test_rows_below_the_gemm_tile_are_not_compute_bound() -> None:
    assert split_into_chains(_group(mlp_text("kn.gelu", m=16)), compute_bound) is None


def test_cuda_defines_the_activation() -> None:
    module = _parse(swiglu_text())
    MirageTranspilePass().apply(make_context(), module)
    gemms = [o for o in module.walk() if isinstance(o, HopperGemmOp)]
    assert [g.mul is not None for g in gemms] == [False, True]
    source = emit_cuda(module, "sm_90").source
    assert "static __device__ __forceinline__ float apply(float x) { return mx::f_silu(x); }" in source


def _run_gpu(name: str, text: str, dtype: str, launches: int = 1) -> None:
    """Compile `text` with the default pipeline, run it `launches` times on fresh NaN-poisoned
    outputs and compare each result with the float64 reference of the kn graph (a split GEMM's
    arrival counters must be re-armed by every launch)."""
    import cupy  # type: ignore[import-not-found]

    from mirage_xdsl.bench.check import to_device
    from mirage_xdsl.bench.fuzz_check import Outcome, judge, reference_of
    from mirage_xdsl.bench.fuzz_graphs import FuzzCase
    from mirage_xdsl.driver.nvcc import compile_cuda
    from mirage_xdsl.runtime.executable import CompiledGraph
    from mirage_xdsl.runtime.random_inputs import numpy_values

    lowered = _parse(text)
    MirageTranspilePass().apply(make_context(), lowered)
    assert any(isinstance(o, HopperGemmOp) and (o.activation is not None or o.splits > 1) for o in lowered.walk())
    program = emit_cuda(lowered, "sm_90")
    plan = program.plans[name]
    graph = CompiledGraph(plan, str(compile_cuda(program.source, program.arch)), source=program.source, poison_outputs=True).load()
    case = FuzzCase(name, "kernel", dtype, _parse(text))  # the reference runs the kn graph
    for launch in range(launches):
        inputs, refs = reference_of(case, plan, seed=11 + launch)
        outs = graph(*[to_device(cupy, x) for x in inputs])
        cupy.cuda.get_current_stream().synchronize()
        out = Outcome(name, "ok", dtype=dtype, kind="kernel")
        judge(out, [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, plan.outputs)], refs)
        assert out.status == "ok", f"launch {launch}: {out.status}: {out.reason}: {out.message}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(("act", "attrs"), [("kn.gelu", ""), ("kn.relu", ""), ("kn.mul_scalar", "{scalar = 3.0 : f64}")])
def test_mlp_with_activation_matches_reference(act: str, attrs: str, dtype: str) -> None:
    _run_gpu("mlp", mlp_text(act, dtype, attrs=attrs), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_swiglu_matches_reference(dtype: str) -> None:
    _run_gpu("swiglu", swiglu_text(dtype), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("forced", [None, (128, 64, 4)])
def test_split_k_swiglu_matches_reference(dtype: str, forced: tuple[int, int, int] | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """256 x 1024 x 4096: both GEMMs split K (the cost model's 64 x 64 tiles in two units, or
    forced: 128 x 64 tiles of two consumers in four), the second with silu and the factor;
    three launches of one compiled graph."""
    if forced is not None:
        monkeypatch.setattr(to_hopper, "skinny_tile", lambda view, *args, **kwargs: forced)
    _run_gpu("swiglu", swiglu_text(dtype, m=256, k=4096, n=1024), dtype, launches=3)


@pytest.mark.gpu
def test_split_k_with_row_and_column_tails_matches_reference() -> None:
    """136 x 1000 x 4096 (a ragged last row block and column block), K split in 2, gelu."""
    _run_gpu("mlp", mlp_text("kn.gelu", m=136, k=4096, n=1000), "float16", launches=2)


def test_split_k_claims_workspace_and_counters() -> None:
    module = _parse(swiglu_text(m=256, k=4096, n=1024))
    MirageTranspilePass().apply(make_context(), module)
    gemms = [o for o in module.walk() if isinstance(o, HopperGemmOp)]
    assert [g.splits for g in gemms] == [2, 2]
    assert gemms[1].scratch_offset.value.data >= gemms[0].scratch_offset.value.data + gemms[0].scratch_bytes()  # type: ignore[union-attr]
    plan = emit_cuda(module, "sm_90").plans["swiglu"]
    assert plan.counters == sum(g.counter_words() for g in gemms) == 2 * (4 * 16)  # two GEMMs of 4 x 16 tiles, one consumer each
    assert plan.workspace_bytes >= gemms[1].scratch_offset.value.data + gemms[1].scratch_bytes()  # type: ignore[union-attr]


def test_a_factor_in_another_layout_is_not_an_epilogue() -> None:
    """The GEMM reads the ELWISE_MUL factor with the output's strides: a factor stored
    column-major stays a separate kn.mul (in a generated kernel)."""
    text = swiglu_text().replace("%W3: tensor<1024x4096xf16> {kn.weight}", "%W3: tensor<1024x4096xf16> {kn.weight}, %G: tensor<128x4096xf16> {kn.strides = array<i64: 1, 128>}")
    text = text.replace("%h = kn.mul %s, %b", "%h = kn.mul %s, %G")
    text = "\n".join(line for line in text.splitlines() if "%b = kn.matmul" not in line)
    module = _partitioned(text)
    assert any(o.name == "kn.customized" for o in module.walk())  # the mul stays in a generated kernel
    assert all(c.mul is None for c in _contracts(module))
