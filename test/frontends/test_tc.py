"""Tensor Comprehensions frontend: parse, check, interpret, lower (frontends/tc)."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirage_xdsl as mx
from mirage_xdsl.frontends.tc import TcError, check_source, interpret, lower, parse, parse_sizes
from mirage_xdsl.reference.executor import run_reference

# ---------------------------------------------------------------------------------------
# Programs

# The seed FAQ's two valid softmax programs (they need `max=!`, which kn cannot lower yet).
SOFTMAX_FAQ = """def softmax(float(N, D) I) -> (O, maxVal, expDistance, expSum) {
maxVal(n) max=! I(n, d)
expDistance(n, d) = exp(I(n, d) - maxVal(n))
expSum(n) +=! expDistance(n, d)
O(n, d) = expDistance(n, d) / expSum(n)
}"""

SOFTMAX_DAG = """def softmax(float(N, D) I) -> (O, expsum, maxVal) {
maxVal(n) max=! I(n, d)
expsum(n) +=! exp(I(n, d) - maxVal(n))
O(n, d) = exp(I(n, d) - maxVal(n)) / expsum(n)
}"""

# The seed FAQ's two invalid programs.
SOFTMAX_TEMPORARY = """def softmax(float(N, D) I) -> (O, maxVal, expDistance) {
maxVal(n) max=! I(n, d)
expDistance(n, d) = exp(I(n, d) - maxVal(n))
expSum(n) +=! expDistance(n, d)
O(n, d) = expDistance(n, d) / expSum(n)
}"""

SOFTMAX_CYCLE = """def softmax(float(N, D) I) -> (O, tmp) {
tmp(n) max=! I(n, d)
O(n, d) = exp(I(n, d) - tmp(n))
tmp(n) +=! O(n, d)
O(n, d) = O(n, d) / tmp(n)
}"""

# Softmax without the max shift: lowerable with kn's sum reduction.
SOFTMAX_UNSHIFTED = """def softmax(float(N, D) I) -> (O, expsum) {
expsum(n) +=! exp(I(n, d))
O(n, d) = exp(I(n, d)) / expsum(n)
}"""

MATMUL = """def matmul(float(M, K) A, float(K, N) B) -> (C) {
  C(i, j) +=! A(i, k) * B(k, j)
}"""

BATCHED_MATMUL = """def bmm(float(B, M, K) X, float(B, K, N) Y) -> (Z) {
  Z(b, i, j) +=! X(b, i, k) * Y(b, k, j)
}"""

MATMUL_ACCUMULATE = """def two_gemms(float(M, K) A, float(K, N) B, float(M, L) P, float(L, N) Q) -> (C) {
  C(i, j) +=! A(i, k) * B(k, j)
  C(i, j) += P(i, l) * Q(l, j)   # continues the sum of the first statement
}"""

LAYERNORM = """def layernorm(float(N, D) I) -> (mean, centered, var, O) {
  mean(n) +=! I(n, d)
  mean(n) = mean(n) / D
  centered(n, d) = I(n, d) - mean(n)
  var(n) +=! centered(n, d) * centered(n, d) / D
  O(n, d) = centered(n, d) / sqrt(var(n))
}"""

MLP_RELU = """def mlp(float(B, D) X, float(D, H) W1, float(H, E) W2) -> (hidden, Y) {
  hidden(b, h) +=! X(b, d) * W1(d, h)
  hidden(b, h) = fmax(hidden(b, h), 0)
  Y(b, e) +=! hidden(b, h) * W2(h, e)
}"""

MLP_TANH = """def mlp(bfloat16(B, D) X, bfloat16(D, H) W1, bfloat16(H, E) W2) -> (H1, Y) {
  H1(b, h) +=! X(b, d) * W1(d, h)
  Y(b, e) +=! tanh(H1(b, h)) * W2(h, e)
}"""

ELEMENTWISE = """def elementwise(half(N, D) A, half(N, D) B, half(N, 1) S) -> (O, P, Q) {
  O(n, d) = -A(n, d) * 2.5 + B(n, d) / 4 - (A(n, d) - 0)
  P(n, d) = fmax(A(n, d), B(n, d)) * fmin(A(n, d), 0.5) / S(n, 0) + max(A(n, d), -1) - min(B(n, d), A(n, d))
  Q(n, d) = log(exp(A(n, d)) * exp(S(n, 0)) * exp(2.0 * 3)) * (D / 2)
}"""

COLUMN_SUMS = """def colsum(float(N, D, K) X) -> (S, T) {
  S(d) +=! X(n, d, k)    # sums over the leading and the trailing dim
  T(n, d, k) = X(n, d, k) / S(d)
}"""

# A bias row broadcasts through a size-1 dim subscripted with 0; S() sums everything.
BIAS_AND_TOTAL = """def bias(float(N, D) A, float(1, D) b) -> (S, O) {
  S() +=! A(n, d)
  O(n, d) = A(n, d) * b(0, d) / S()
}"""

# A normalisation's epsilon and constants added to tensors: kn.add_scalar.
LAYERNORM_EPS = """def layernorm_eps(float(N, D) I) -> (mean, var, O, P) {
  mean(n) +=! I(n, d) / D
  var(n) +=! (I(n, d) - mean(n)) * (I(n, d) - mean(n)) / D
  O(n, d) = (I(n, d) - mean(n)) / sqrt(var(n) + 1e-5)
  P(n, d) = 1.5 - O(n, d) + 2 + (O(n, d) - 0.25) * 3
}"""

MIN_MAX = """def range_of(float(N, D) A) -> (hi, lo, span) {
  hi(n) max=! A(n, d)
  lo(n) min=! A(n, d)
  span(n) = hi(n) - lo(n)
}"""

LOWERED = {
    "bias_and_total": (BIAS_AND_TOTAL, [{"N": 3, "D": 4}, {"N": 1, "D": 9}]),
    "softmax_unshifted": (SOFTMAX_UNSHIFTED, [{"N": 4, "D": 8}, {"N": 3, "D": 17}]),
    "matmul": (MATMUL, [{"M": 4, "K": 8, "N": 6}, {"M": 1, "K": 5, "N": 9}]),
    "batched_matmul": (BATCHED_MATMUL, [{"B": 2, "M": 3, "K": 4, "N": 5}, {"B": 3, "M": 8, "K": 1, "N": 2}]),
    "matmul_accumulate": (MATMUL_ACCUMULATE, [{"M": 3, "K": 4, "N": 5, "L": 6}]),
    "layernorm": (LAYERNORM, [{"N": 4, "D": 16}, {"N": 2, "D": 7}]),
    "mlp_relu": (MLP_RELU, [{"B": 2, "D": 8, "H": 16, "E": 4}, {"B": 5, "D": 3, "H": 7, "E": 2}]),
    "mlp_tanh": (MLP_TANH, [{"B": 2, "D": 8, "H": 16, "E": 4}]),
    "elementwise": (ELEMENTWISE, [{"N": 3, "D": 5}]),
    "column_sums": (COLUMN_SUMS, [{"N": 3, "D": 4, "K": 5}]),
    "softmax_faq": (SOFTMAX_FAQ, [{"N": 4, "D": 8}, {"N": 3, "D": 17}]),
    "softmax_dag": (SOFTMAX_DAG, [{"N": 4, "D": 8}]),
    "min_max": (MIN_MAX, [{"N": 4, "D": 8}, {"N": 1, "D": 5}]),
    "layernorm_eps": (LAYERNORM_EPS, [{"N": 4, "D": 16}, {"N": 1, "D": 1}]),
}


def random_inputs(source: str, sizes: dict[str, int], seed: int) -> list[np.ndarray]:
    checked = check_source(source)
    rng = np.random.default_rng(seed)
    shapes = [tuple(s.evaluate(sizes) for s in info.shape) for info in checked.inputs.values()]
    # positive inputs keep log/sqrt/division well away from nan and inf
    return [rng.uniform(0.5, 1.5, shape) for shape in shapes]


def lowered_matches_interpreter(source: str, sizes: dict[str, int], seed: int) -> None:
    inputs = random_inputs(source, sizes, seed)
    expected = interpret(check_source(source), sizes, inputs)
    got = run_reference(mx.tc(source, sizes=sizes), inputs)
    assert len(got) == len(expected)
    for (name, want), have in zip(expected.items(), got):
        # reduced outputs keep size-1 dims in the kernel graph; the element order is TC's
        assert have.size == want.size, name
        np.testing.assert_allclose(have.reshape(want.shape), want, rtol=1e-12, atol=1e-12, err_msg=name)


# ---------------------------------------------------------------------------------------
# Valid programs: lowering agrees with the interpreter


@pytest.mark.parametrize("program", sorted(LOWERED))
def test_lowered_program_matches_interpreter(program: str) -> None:
    source, size_list = LOWERED[program]
    for seed, sizes in enumerate(size_list):
        lowered_matches_interpreter(source, sizes, seed)


def test_interpreter_agrees_with_numpy() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 9))
    for source in (SOFTMAX_FAQ, SOFTMAX_DAG, SOFTMAX_UNSHIFTED):
        out = interpret(check_source(source), {"N": 5, "D": 9}, [x])
        shifted = np.exp(x - x.max(axis=1, keepdims=True))
        reference = np.exp(x) if source is SOFTMAX_UNSHIFTED else shifted
        np.testing.assert_allclose(out["O"], reference / reference.sum(axis=1, keepdims=True), rtol=1e-12)
    out = interpret(check_source(SOFTMAX_FAQ), {"N": 5, "D": 9}, [x])
    np.testing.assert_allclose(out["maxVal"], x.max(axis=1))
    out = interpret(check_source(LAYERNORM), {"N": 5, "D": 9}, [x])
    np.testing.assert_allclose(out["O"], (x - x.mean(1, keepdims=True)) / x.std(1, keepdims=True), rtol=1e-10)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 6))
    out = interpret(check_source(BATCHED_MATMUL), {"B": 2, "M": 3, "K": 4, "N": 6}, [a, b])
    np.testing.assert_allclose(out["Z"], a @ b, rtol=1e-12)


def test_interpreter_affine_subscripts_and_reductions() -> None:
    source = """def f(float(N) I, float(K) W) -> (conv, biggest, prod) {
      conv(i) +=! I(i + k) * W(k) where i in 0:N - K + 1
      biggest(i) max=! I(i + k) where i in 0:N - K + 1, k in 0:K
      prod(i) *=! I(i + k) where i in 0:N - K + 1, k in 0:K
      biggest(i) max= conv(i)   # continues the max
    }"""
    x, w = np.arange(1.0, 8.0), np.array([1.0, -2.0, 0.5])
    out = interpret(check_source(source), {"N": 7, "K": 3}, [x, w])
    windows = np.lib.stride_tricks.sliding_window_view(x, 3)
    np.testing.assert_allclose(out["conv"], windows @ w)
    np.testing.assert_allclose(out["biggest"], np.maximum(windows.max(1), windows @ w))
    np.testing.assert_allclose(out["prod"], windows.prod(1))


def test_kernel_graph_shape_and_ops() -> None:
    text = str(mx.tc(LAYERNORM, sizes={"N": 4, "D": 8}))
    assert "func.func @layernorm(%I: tensor<4x8xf32>" in text
    assert text.count("kn.reduction") == 2 and "kn.sqrt" in text
    # the reduced outputs keep their summed dim as size 1 (kn has no reshape)
    assert "-> (tensor<4x1xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>)" in text
    text = str(mx.tc(BATCHED_MATMUL, sizes={"B": 2, "M": 3, "K": 4, "N": 5}))
    assert "kn.matmul %X, %Y : tensor<2x3x4xf32>, tensor<2x4x5xf32> -> tensor<2x3x5xf32>" in text
    text = str(mx.tc(MLP_TANH, sizes={"B": 2, "D": 8, "H": 16, "E": 4}))
    assert "bf16" in text and "kn.sigmoid" in text and text.count("kn.matmul") == 2
    assert "kn.relu" in str(mx.tc(MLP_RELU, sizes={"B": 2, "D": 8, "H": 16, "E": 4}))


def test_several_definitions_select_by_name() -> None:
    source = MATMUL + "\n" + SOFTMAX_UNSHIFTED
    assert "@matmul" in str(mx.tc(source, name="matmul", sizes={"M": 2, "K": 2, "N": 2}))
    with pytest.raises(TcError, match=r"^<tc>:4:5: error: the source defines matmul, softmax; choose one by name$"):
        mx.tc(source, sizes={"N": 2})
    with pytest.raises(TcError, match="no definition named 'conv'"):
        mx.tc(source, name="conv")


def test_parse_tree_has_locations() -> None:
    program = parse(SOFTMAX_FAQ, "softmax.tc")
    (definition,) = program.defs
    assert [p.name for p in definition.params] == ["I"] and definition.params[0].dims == ("N", "D")
    first = definition.statements[0]
    assert (first.tensor, first.op, first.loc.line, first.loc.col, first.op_loc.col) == ("maxVal", "max=!", 2, 1, 11)
    assert first.rhs.tensor == "I" and [ix.plain_name for ix in first.rhs.indices] == ["n", "d"]


# ---------------------------------------------------------------------------------------
# Softmax with max=!: the seed FAQ's program lowers to kn.reduction_max


@pytest.mark.parametrize("source", [SOFTMAX_FAQ, SOFTMAX_DAG])
def test_faq_softmax_lowers_with_a_max_reduction(source: str) -> None:
    checked = check_source(source, filename="softmax.tc")
    assert checked.statements[0].reductions == ("d",)
    module = lower(checked, {"N": 4, "D": 8})
    assert "kn.reduction_max" in str(module)


def test_min_reduction_is_a_negated_max() -> None:
    module = lower(check_source(MIN_MAX), {"N": 4, "D": 8})
    text = str(module)
    assert text.count("kn.reduction_max") == 2 and "scalar = -1.0" in text


# ---------------------------------------------------------------------------------------
# Invalid programs: exact one-line located errors

INVALID = {
    "faq_temporary": (
        SOFTMAX_TEMPORARY,
        "bad.tc:4:1: error: 'expSum' is neither an input nor an output; TC allocates no temporaries, "
        "so list 'expSum' among the outputs",
    ),
    "faq_cycle": (
        SOFTMAX_CYCLE,
        "bad.tc:4:12: error: cyclic dependency: 'tmp' depends on 'O', which depends on 'tmp' "
        "(tensor dependencies must form a DAG)",
    ),
    "undefined_tensor": ("def f(float(N) A) -> (O) {\n  O(i) = B(i)\n}", "bad.tc:2:10: error: undefined tensor 'B'"),
    "lhs_only_index": (
        "def f(float(N) A) -> (O) {\n  O(i, j) = A(i)\n}",
        "bad.tc:2:8: error: index 'j' of 'O' is not bound: it appears only on the left-hand side; "
        "add 'where j in lo:hi'",
    ),
    "inconsistent_ranges": (
        "def f(float(N) A, float(M) B) -> (O) {\n  O(i) = A(i) + B(i)\n}",
        "bad.tc:2:19: error: inconsistent ranges for index 'i': dim 0 of 'A' has size N but dim 0 of 'B' has size M",
    ),
    "ambiguous_range": (
        "def f(float(N) A) -> (O) {\n  O(i) +=! A(i + j)\n}",
        "bad.tc:2:5: error: ambiguous range for index 'i': it only appears in affine subscripts; "
        "add 'where i in lo:hi'",
    ),
    "access_arity": (
        "def f(float(N, D) A) -> (O) {\n  O(i) = A(i)\n}",
        "bad.tc:2:10: error: 'A' has 2 dimension(s) but is accessed with 1 subscript(s)",
    ),
    "input_as_output": (
        "def f(float(N) A) -> (A) {\n  A(i) = A(i)\n}",
        "bad.tc:1:23: error: output 'A' is also an input; inputs cannot be assigned",
    ),
    "assign_input": (
        "def f(float(N) A) -> (O) {\n  O(i) = A(i)\n  A(i) = O(i)\n}",
        "bad.tc:3:3: error: cannot assign to input 'A'; inputs are read-only",
    ),
    "reduction_mixing": (
        "def f(float(N, D) A) -> (O) {\n  O(i) +=! A(i, j)\n  O(i) max= A(i, j)\n}",
        "bad.tc:3:8: error: reduction operators mixed on 'O': 'max=' continues a '+=!' reduction",
    ),
    "reduction_index_with_plain_assign": (
        "def f(float(N, D) A) -> (O) {\n  O(i) = A(i, j)\n}",
        "bad.tc:2:8: error: index 'j' appears only on the right-hand side, so it is a reduction index, "
        "but '=' is not a reduction operator (use +=!, *=!, min=! or max=!)",
    ),
    "syntax_token": (
        "def f(float(N) A) -> (O) {\n  O(i) = A(i) +* 2\n}",
        "bad.tc:2:16: error: syntax error: unexpected '*'; expected '(', '-', a name, a number, an integer",
    ),
    "syntax_character": (
        "def f(float(N) A) -> (O) {\n  O(i) = A(i) @ 2\n}",
        "bad.tc:2:15: error: syntax error: unexpected character '@'",
    ),
    "syntax_end": (
        "def f(float(N) A) -> (O) {\n  O(i) = A(i)\n",
        "bad.tc:3:1: error: syntax error: unexpected end of input; "
        "expected ')', '*', '+', ',', '-', '/', ':', 'where', '}', a name",
    ),
    "unknown_function": (
        "def f(float(N) A) -> (O) {\n  O(i) = relu(A(i) * 2.0)\n}",
        "bad.tc:2:10: error: unknown function 'relu' (known: exp, log, sqrt, tanh, fmax, fmin, max, min)",
    ),
    "function_arity": (
        "def f(float(N) A) -> (O) {\n  O(i) = exp(A(i), A(i))\n}",
        "bad.tc:2:10: error: function 'exp' takes 1 argument(s), got 2",
    ),
    "duplicate_parameter": (
        "def f(float(N) A, float(N) A) -> (O) {\n  O(i) = A(i)\n}",
        "bad.tc:1:28: error: duplicate parameter name 'A'",
    ),
    "type_mismatch": (
        "def f(float(N) A, half(N) B) -> (O) {\n  O(i) = A(i) + B(i)\n}",
        "bad.tc:2:17: error: type mismatch: 'A' is float32 but 'B' is float16; kernel graphs have no casts",
    ),
    "unknown_type": (
        "def f(int(N) A) -> (O) {\n  O(i) = A(i)\n}",
        "bad.tc:1:14: error: unknown element type 'int' of input 'A' (expected one of float, half, bfloat16, double)",
    ),
    "read_before_assigned": (
        "def f(float(N) A) -> (O, P) {\n  O(i) = P(i)\n  P(i) = A(i)\n}",
        "bad.tc:2:10: error: 'P' is read before any statement assigns it",
    ),
    "accumulate_before_assigned": (
        "def f(float(N, D) A) -> (O) {\n  O(i) += A(i, j)\n}",
        "bad.tc:2:8: error: 'O' is accumulated with '+=' before any statement assigns it; "
        "use '+=!' to start from the reduction's identity",
    ),
    "output_never_assigned": (
        "def f(float(N) A) -> (O, P) {\n  O(i) = A(i)\n}",
        "bad.tc:1:26: error: output 'P' is never assigned",
    ),
    "index_as_value": (
        "def f(float(N) A) -> (O) {\n  O(i) = A(i) * i\n}",
        "bad.tc:2:17: error: index 'i' used as a value; indices may only subscript tensors",
    ),
    "undefined_name": (
        "def f(float(N) A) -> (O) {\n  O(i) = A(i) * x\n}",
        "bad.tc:2:17: error: undefined name 'x' (not a size symbol)",
    ),
    "unused_where_index": (
        "def f(float(N) A) -> (O) {\n  O(i) = A(i) where j in 0:N\n}",
        "bad.tc:2:21: error: where clause binds index 'j', which the statement does not use",
    ),
    "where_undefined_symbol": (
        "def f(float(N) A) -> (O) {\n  O(i) = A(i) where i in 0:M\n}",
        "bad.tc:2:28: error: undefined size symbol 'M' in where clause",
    ),
    "repeated_lhs_index": (
        "def f(float(N, N) A) -> (O) {\n  O(i, i) = A(i, i)\n}",
        "bad.tc:2:8: error: index 'i' repeated on the left-hand side of 'O'",
    ),
    "reassigned_shape": (
        "def f(float(N) A, float(M) B) -> (O) {\n  O(i) = A(i)\n  O(j) = B(j)\n}",
        "bad.tc:3:3: error: 'O' reassigned with shape (M) but it was assigned with shape (N)",
    ),
    "duplicate_output": (
        "def f(float(N) A) -> (O, O) {\n  O(i) = A(i)\n}",
        "bad.tc:1:26: error: output 'O' is listed twice",
    ),
    "tensor_shadows_function": (
        "def f(float(N) exp) -> (O) {\n  O(i) = exp(i)\n}",
        "bad.tc:1:16: error: tensor name 'exp' shadows the built-in function 'exp'",
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_program_gives_located_error(case: str) -> None:
    source, message = INVALID[case]
    with pytest.raises(TcError) as info:
        check_source(source, filename="bad.tc")
    assert str(info.value) == message
    assert "\n" not in str(info.value)
    line, col = map(int, message.split(":")[1:3])
    assert (info.value.line, info.value.col) == (line, col)


SIZE_AND_LOWERING_ERRORS = {
    "missing_size": (
        MATMUL,
        {"M": 2, "K": 3},
        "t.tc:1:36: error: missing size for 'N' (give it in sizes / --tc-sizes, e.g. N=64)",
    ),
    "unknown_size": (MATMUL, {"M": 2, "K": 3, "N": 4, "Q": 1}, "t.tc:1:5: error: unknown size symbol 'Q' (the program's sizes: M, K, N)"),
    "out_of_bounds": (
        "def f(float(N) A) -> (O) {\n  O(i) = A(i + 1) where i in 0:N\n}",
        {"N": 4},
        "t.tc:2:12: error: subscript 'i + 1' of 'A' spans 1..4 but dim 0 has size 4",
    ),
    "transpose": (
        "def f(float(N, D) A) -> (O) {\n  O(d, n) = A(n, d)\n}",
        {"N": 2, "D": 3},
        "t.tc:2:3: error: not supported yet: the result's dims come out indexed (n, d) but 'O' is indexed (d, n) "
        "(kn has no transpose)",
    ),
    "transposed_matmul_operand": (
        "def f(float(K, M) A, float(K, N) B) -> (C) {\n  C(i, j) +=! A(k, i) * B(k, j)\n}",
        {"M": 2, "K": 3, "N": 4},
        "t.tc:2:15: error: not supported yet: operands indexed (k, i) and (k, j) do not line up (kn has no transpose)",
    ),
    "rank_change": (
        "def f(float(N, D) A, float(D) b) -> (O) {\n  O(n, d) = A(n, d) + b(d)\n}",
        {"N": 2, "D": 3},
        "t.tc:2:13: error: not supported yet: combining a rank-2 operand with a rank-1 operand "
        "(kn broadcasts equal ranks only and has no reshape)",
    ),
    "affine_subscript": (
        "def f(float(N) A) -> (O) {\n  O(i) = A(i + 1) where i in 0:N - 1\n}",
        {"N": 4},
        "t.tc:2:12: error: not supported yet: affine subscript 'i + 1' of 'A' (kn has no slicing)",
    ),
    "reciprocal": (
        "def f(float(N) A) -> (O) {\n  O(i) = 1 / A(i)\n}",
        {"N": 4},
        "t.tc:2:10: error: not supported yet: dividing the constant 1 by a tensor (kn has no reciprocal)",
    ),
    "lhs_only_index": (
        "def f(float(N) A) -> (O) {\n  O(i) = 2 * 3 where i in 0:N\n}",
        {"N": 4},
        "t.tc:2:5: error: not supported yet: index 'i' of 'O' only on the left-hand side "
        "(kn cannot broadcast to a new dim)",
    ),
    "constant_rhs": (
        "def f(float(N) A) -> (O) {\n  O() = 2 * 3\n}",
        {"N": 4},
        "t.tc:2:9: error: not supported yet: the right-hand side of 'O' is the constant 6.0 (kn cannot create tensors)",
    ),
    "product_reduction": (
        "def f(float(N, D) A) -> (O) {\n  O(n) *=! A(n, d)\n}",
        {"N": 4, "D": 2},
        "t.tc:2:8: error: not supported yet: '*=!' reduction over 'd' (kn has sum, max and min reductions)",
    ),
}


@pytest.mark.parametrize("case", sorted(SIZE_AND_LOWERING_ERRORS))
def test_size_and_lowering_errors_are_located(case: str) -> None:
    source, sizes, message = SIZE_AND_LOWERING_ERRORS[case]
    checked = check_source(source, filename="t.tc")
    with pytest.raises(TcError) as info:
        lower(checked, sizes)
    assert str(info.value) == message


def test_deep_nesting_is_a_located_error() -> None:
    source = "def f(float(N) A) -> (O) {\n  O(i) = " + "-" * 1000 + "A(i)\n}"
    with pytest.raises(TcError, match=r"^<tc>:2:\d+: error: expression nested more than 200 levels deep$"):
        check_source(source)
    assert "kn.mul_scalar" in str(mx.tc(source.replace("-" * 1000, "-" * 50), sizes={"N": 2}))


def test_parse_sizes() -> None:
    assert parse_sizes("N=64, D=128") == {"N": 64, "D": 128}
    assert parse_sizes("") == {}
    for bad in ("N64", "N=x", "N=1,N=2", "1=2"):
        with pytest.raises(ValueError):
            parse_sizes(bad)


# ---------------------------------------------------------------------------------------
# Fuzzing: mutated programs only ever raise TcError

TOKEN = re.compile(r"\s+|#[^\n]*|[A-Za-z_]\w*|\d+\.\d*|\d+|\+=!|\*=!|\+=|\*=|->|.", re.S)
VOCABULARY = [
    "(", ")", ",", "{", "}", "+", "-", "*", "/", "=", "+=", "+=!", "max=!", "min=", "*=!", ":", "->", "where",
    "in", "def", "float", "half", "exp", "tanh", "fmax", "max", "i", "j", "k", "n", "d", "N", "D", "M", "A", "O",
    "I", "0", "1", "2.5", "1e309", "#", "!", "@", " ", "\n",
]  # fmt: skip
SEEDS = [src for src, _ in LOWERED.values()] + [SOFTMAX_FAQ, SOFTMAX_CYCLE, SOFTMAX_TEMPORARY]


@st.composite
def mutated_programs(draw: st.DrawFn) -> str:
    tokens = TOKEN.findall(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(tokens) - 1))
        kind = draw(st.sampled_from(["delete", "insert", "replace", "swap", "duplicate"]))
        if kind == "delete":
            del tokens[pos]
        elif kind == "insert":
            tokens.insert(pos, draw(st.sampled_from(VOCABULARY)))
        elif kind == "replace":
            tokens[pos] = draw(st.sampled_from(VOCABULARY))
        elif kind == "swap":
            other = draw(st.integers(0, len(tokens) - 1))
            tokens[pos], tokens[other] = tokens[other], tokens[pos]
        else:
            tokens.insert(pos, tokens[pos])
    return "".join(tokens)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_programs())
def test_fuzzed_programs_raise_only_tc_errors(source: str) -> None:
    try:
        program = parse(source)
        checked = check_source(source, name=program.defs[0].name)
        sizes = {sym: 3 for sym in checked.symbols}
        inputs = [np.full([s.evaluate(sizes) for s in info.shape], 0.5) for info in checked.inputs.values()]
        interpret(checked, sizes, inputs)
        module = lower(checked, sizes)
    except TcError as err:
        assert "\n" not in str(err) and re.match(r"^<tc>:\d+:\d+: error: ", str(err)), str(err)
        return
    run_reference(module, inputs)


# ---------------------------------------------------------------------------------------
# Entry points


def test_mx_tc_is_exported_lazily() -> None:
    assert mx.tc.__module__ == "mirage_xdsl.frontends.tc" and mx.TcError is TcError


def run_opt(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from mirage_xdsl.tools.mirage_opt import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


def test_mirage_opt_reads_tc_files(tmp_path) -> None:
    path = tmp_path / "mlp.tc"
    path.write_text(MLP_RELU)
    proc = run_opt(str(path), "--tc-sizes", "B=2,D=8,H=16,E=4")
    assert proc.returncode == 0, proc.stderr
    assert "func.func @mlp" in proc.stdout and proc.stdout.count("kn.matmul") == 2
    # the printed module parses back
    again = subprocess.run(
        [sys.executable, "-c", "from mirage_xdsl.tools.mirage_opt import main; main()"],
        input=proc.stdout, capture_output=True, text=True,
    )  # fmt: skip
    assert again.returncode == 0 and again.stdout == proc.stdout, again.stderr


def test_mirage_opt_prints_located_errors(tmp_path) -> None:
    path = tmp_path / "cycle.tc"
    path.write_text(SOFTMAX_CYCLE)
    proc = run_opt(str(path), "--tc-sizes", "N=4,D=8")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr == (
        f"mirage-opt: error: {path}:4:12: cyclic dependency: 'tmp' depends on 'O', which depends on 'tmp' "
        "(tensor dependencies must form a DAG)\n"
    )
    path.write_text(MATMUL)
    proc = run_opt(str(path), "--tc-sizes", "M=4,K=8")
    assert proc.returncode == 1
    assert proc.stderr == f"mirage-opt: error: {path}:1:36: missing size for 'N' (give it in a '# sizes: N=64' line or with --tc-sizes)\n"
    proc = run_opt(str(path), "--tc-sizes", "M=4,K8")
    assert proc.returncode == 1 and proc.stderr == "mirage-opt: error: bad size 'K8' (expected NAME=INT, e.g. N=64)\n"
