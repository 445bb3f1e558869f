"""`kn.chunk` / `kn.concat` as strided views (issue #30; dialects/views.py, passes/kn/fold_views.py):
a rotary embedding and other chunk/concat graphs compile into ONE fused kernel that reads each
input once and writes its output once; a chunk or concat that cannot be fused stays a library copy.

Numerics: the host emulator (`bench.fuzz_check.check_emulated`: seeded inputs, NaN-poisoned
outputs, float64 reference), the same graphs on the GPU with `@pytest.mark.gpu`.
"""

from __future__ import annotations

import numpy as np
import pytest

from mirage_xdsl.bench.fuzz_check import check_emulated
from mirage_xdsl.bench.fuzz_graphs import FuzzCase
from mirage_xdsl.frontends.builder import new_kernel_graph
from mirage_xdsl.runtime.host_emulator import find_cxx

needs_cxx = pytest.mark.skipif(find_cxx() is None, reason="the host emulator needs a C++ compiler")

DTYPES = ["float16", "bfloat16", "float32"]


def rotary(tokens: int, heads: int, head_dim: int, dtype: str) -> object:
    """Rotate-half rotary embedding (examples/suite/suite_rotary_*.mlir): X [t, h, d] split
    into halves x1, x2; `concat(x1 C - x2 S, x2 C + x1 S)` with C, S [t, 1, d/2]."""
    g = new_kernel_graph("rotary")
    X = g.new_input(dims=(tokens, heads, head_dim), dtype=dtype)
    C = g.new_input(dims=(tokens, 1, head_dim // 2), dtype=dtype)
    S = g.new_input(dims=(tokens, 1, head_dim // 2), dtype=dtype)
    x1, x2 = g.chunk(X, 2, 2)
    g.mark_output(g.concat(g.sub(g.mul(x1, C), g.mul(x2, S)), g.add(g.mul(x2, C), g.mul(x1, S)), 2))
    return g.module


def middle_swap(dtype: str) -> object:
    """Split the middle dim into two, swap the parts with an op on each, concat there again."""
    g = new_kernel_graph("middle_swap")
    X = g.new_input(dims=(16, 64, 128), dtype=dtype)
    a, b = g.chunk(X, 2, 1)
    g.mark_output(g.concat(g.relu(b), g.mul_scalar(a, 0.5), 1))
    return g.module


def two_inputs(dtype: str) -> object:
    """A concat along the last dim of elementwise results of different inputs, with a chunk of
    four parts of which two are read (the others are never loaded)."""
    g = new_kernel_graph("two_inputs")
    X = g.new_input(dims=(256, 256), dtype=dtype)
    Y = g.new_input(dims=(256, 512), dtype=dtype)
    parts = g.chunk(Y, 4, 1)
    g.mark_output(g.concat(g.exp(g.mul_scalar(X, 0.25)), g.add(parts[1], parts[3]), 1))
    return g.module


def _check(module: object, name: str, dtype: str) -> None:
    out = check_emulated(FuzzCase(name, "kernel", dtype, module), seed=3)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


def _fused(module: object) -> str:
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    MirageTranspilePass(to_cute=False).apply(make_context(), module)
    return str(module)


@pytest.mark.parametrize("build", [lambda: rotary(64, 8, 128, "float16"), lambda: middle_swap("float16"), lambda: two_inputs("float16")])
def test_one_kernel_without_library_copies(build: object) -> None:
    text = _fused(build())  # type: ignore[operator]
    assert text.count("kn.customized") == 1, text
    assert "kn.chunk" not in text and "kn.concat" not in text, text
    assert "view_offset" in text


def test_rotary_reads_x_through_two_views() -> None:
    text = _fused(rotary(64, 8, 128, "float16"))
    assert "view_offset = array<i64: 0, 0, 64>, view_shape = array<i64: 64, 8, 64>" in text
    assert text.count("result_index = 0 : i64") == 2


def test_unfusable_concat_stays_a_library_copy() -> None:
    """A concat of a function argument and a kernel result: a library copy, as before."""
    g = new_kernel_graph("kept")
    X = g.new_input(dims=(64, 64), dtype="float16")
    Y = g.new_input(dims=(64, 64), dtype="float16")
    g.mark_output(g.concat(g.exp(X), Y, 1))
    text = _fused(g.module)
    assert "kn.concat" in text and "view_offset" not in text


def test_reference_of_the_fused_graph_matches_the_program() -> None:
    import mirage_xdsl as mx

    rng = np.random.default_rng(0)
    x, c, s = rng.uniform(-1, 1, (64, 8, 128)), rng.uniform(-1, 1, (64, 1, 64)), rng.uniform(-1, 1, (64, 1, 64))
    (ref,) = mx.run_reference(rotary(64, 8, 128, "float32"), [x, c, s])
    module = rotary(64, 8, 128, "float32")
    _fused(module)
    (out,) = mx.run_reference(module, [x, c, s])
    x1, x2 = x[..., :64], x[..., 64:]
    np.testing.assert_allclose(ref, np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], 2), rtol=1e-12)
    np.testing.assert_allclose(out, ref, rtol=1e-12)


@needs_cxx
@pytest.mark.parametrize("dtype", DTYPES)
def test_rotary_emulated(dtype: str) -> None:
    _check(rotary(64, 8, 128, dtype), "rotary", dtype)


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_middle_swap_emulated(dtype: str) -> None:
    _check(middle_swap(dtype), "middle_swap", dtype)


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_two_inputs_emulated(dtype: str) -> None:
    _check(two_inputs(dtype), "two_inputs", dtype)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "build",
    [
        lambda: (rotary(4096, 32, 128, "float16"), "rotary", "float16"),
        lambda: (rotary(4096, 32, 128, "bfloat16"), "rotary", "bfloat16"),
        lambda: (rotary(4096, 32, 128, "float32"), "rotary", "float32"),
        lambda: (rotary(7, 4, 64, "float16"), "rotary", "float16"),
        lambda: (middle_swap("float16"), "middle_swap", "float16"),
        lambda: (middle_swap("bfloat16"), "middle_swap", "bfloat16"),
        lambda: (two_inputs("float16"), "two_inputs", "float16"),
        lambda: (two_inputs("float32"), "two_inputs", "float32"),
    ],
)
def test_gpu_views(build: object) -> None:
    from mirage_xdsl.bench.fuzz_check import check_gpu

    module, name, dtype = build()  # type: ignore[operator]
    out = check_gpu(FuzzCase(name, "kernel", dtype, module), seed=7)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"
