"""`kn.add_scalar` / `tb.add_scalar` (`x + c`: a normalisation's epsilon, Tensor Comprehensions'
constants added to tensors) through the default pipeline: fused into the generated kernels as
the `add_scalar` epilogue function, checked against the reference in the host emulator (and
on the GPU with `-m gpu`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_tool

from mirage_xdsl.bench import fuzz_check
from mirage_xdsl.bench.fuzz_graphs import FuzzCase
from mirage_xdsl.driver.compile import prepare
from mirage_xdsl.runtime.host_emulator import find_cxx

DATA = Path(__file__).parents[1] / "data" / "layernorm_eps.mlir"
needs_cxx = pytest.mark.skipif(find_cxx() is None, reason="no host C++ compiler")


def _layernorm_eps(dtype: str):  # type: ignore[no-untyped-def]
    from mirage_xdsl.frontends.builder import new_kernel_graph

    g = new_kernel_graph("ln_eps")
    X = g.new_input((16, 256), dtype=dtype, name="X")
    W = g.new_input((256, 64), dtype=dtype, name="W")
    mean = g.mul_scalar(g.reduction(X, 1, 1), 1 / 256)
    d = g.sub(X, mean)
    var = g.mul_scalar(g.reduction(g.square(d), 1, 1), 1 / 256)
    g.mark_output(g.matmul(g.div(d, g.sqrt(g.add_scalar(var, 1e-5))), W))
    g.mark_output(g.add_scalar(g.relu(g.matmul(X, W)), -0.25))
    return g.module


def test_add_scalar_is_an_epilogue_function() -> None:
    """The epsilon and the matmul's `+ (-0.25)` become `+ c` in the generated kernels."""
    source = prepare(_layernorm_eps("float16"), "ln_eps", "sm_90").program.source
    assert "+ 1e-05f" in source and "+ -0.25f" in source


@needs_cxx
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_layernorm_with_epsilon_matches_the_reference(dtype: str) -> None:
    out = fuzz_check.check_emulated(FuzzCase("ln_eps", "kernel", dtype, _layernorm_eps(dtype)), seed=5)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@needs_cxx
def test_tc_epsilon_and_constants_match_the_reference() -> None:
    """A TC LayerNorm with `sqrt(var(n) + 1e-5)` and `1.5 - O(n, d) + 2` compiled and emulated."""
    from mirage_xdsl.frontends.tc import tc

    source = """def ln(half(N, D) I) -> (mean, var, O, P) {
      mean(n) +=! I(n, d) / D
      var(n) +=! (I(n, d) - mean(n)) * (I(n, d) - mean(n)) / D
      O(n, d) = (I(n, d) - mean(n)) / sqrt(var(n) + 1e-5)
      P(n, d) = 1.5 - O(n, d) + 2
    }"""
    module = tc(source, sizes={"N": 32, "D": 128})
    assert "kn.add_scalar" in str(module)
    out = fuzz_check.check_emulated(FuzzCase("ln", "tc", "float16", module), seed=2)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


def _block_graph(dtype: str):  # type: ignore[no-untyped-def]
    """One customized op: rows of X [32, 256] in blocks of 16, the loop over 4 column tiles;
    out = sum over the row of (x * x + 0.5), plus 1e-3 after the loop, then its sqrt."""
    import mirage_xdsl as mx

    g = mx.new_kernel_graph("tb_eps")
    X = g.new_input((32, 256), dtype=dtype, name="X")
    t = mx.new_threadblock_graph((2, 1, 1), forloop_range=4, reduction_dimx=64)
    tx = t.new_input(X, (0, -1, -1), 1)
    acc = t.forloop_accum(t.reduction(t.add_scalar(t.square(tx), 0.5), 1))
    t.new_output(t.sqrt(t.add_scalar(acc, 1e-3)), (0, -1, -1))
    (out,) = g.customized([X], t)
    g.mark_output(out)
    return g.module


@needs_cxx
@pytest.mark.parametrize("lift", [True, False])
def test_block_graph_add_scalar_matches_the_reference(lift: bool) -> None:
    """`tb.add_scalar` before the loop's accumulator and after it: lifted to kn by default
    (kn-lift-customized), or kept as the threadblock graph (`lift=false`: the tb op becomes
    the `add_scalar` epilogue function of its chain)."""
    case = FuzzCase("tb_eps", "block", "float32", _block_graph("float32"))
    out = fuzz_check.check_emulated(case, seed=4, options={"lift": lift})
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"
    lowered = fuzz_check.lower_case(case, {"lift": lift})
    assert ("kn.add_scalar" in str(case.module)) is False and "add_scalar" in str(lowered)


@pytest.mark.gpu
def test_gpu_layernorm_with_epsilon() -> None:
    proc = run_tool("mirage_xdsl.tools.mirage_run", str(DATA), "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
