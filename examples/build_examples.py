"""The example kernel graphs of `examples/*.mlir`, built through the Python builder API.

Each function returns a fresh verified `builtin.module` holding the same program (same
function name, argument names, shapes, dtypes, strides and op sequence) as the `.mlir` file
of the same name; shapes are Mirage's benchmark shapes (batch 1) and can be overridden.

    python examples/build_examples.py gqa            # print one example as MLIR
    python examples/build_examples.py                # print all of them

`EXAMPLES` maps each example name to its builder function.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from xdsl.dialects.builtin import ModuleOp

import mirage_xdsl as mx


def rmsnorm_linear(
    m: int = 2, k: int = 4096, n: int = 6144, dtype: str = "float16", name: str = "rmsnorm_linear"
) -> ModuleOp:
    """`rms_norm(X) @ W` (benchmark/rmsnorm.py): X [m, k], W [k, n]."""
    g = mx.new_kernel_graph(name)
    X = g.new_input((m, k), dtype=dtype, name="X")
    W = g.new_input((k, n), dtype=dtype, name="W", weight=True)
    g.mark_output(g.matmul(g.rms_norm(X, (k,)), W))
    return g.module


def gated_mlp(m: int = 8, k: int = 4096, n: int = 4096, dtype: str = "float16") -> ModuleOp:
    """`silu(X @ W1) * (X @ W2)` (benchmark/gated_mlp.py)."""
    g = mx.new_kernel_graph("gated_mlp")
    X = g.new_input((m, k), dtype=dtype, name="X")
    W1 = g.new_input((k, n), dtype=dtype, name="W1", weight=True)
    W2 = g.new_input((k, n), dtype=dtype, name="W2", weight=True)
    s = g.silu(g.matmul(X, W1))
    b = g.matmul(X, W2)
    g.mark_output(g.mul(s, b))
    return g.module


def _attention(name: str, batch: int, q_len: int, kv_len: int, head_dim: int, dtype: str) -> ModuleOp:
    """`exp(Q @ K) / sum(exp(Q @ K), -1) @ V`, Mirage's softmax without max subtraction or
    scaling; K is stored transposed ([batch, head_dim, kv_len])."""
    g = mx.new_kernel_graph(name)
    Q = g.new_input((batch, q_len, head_dim), dtype=dtype, name="Q")
    K = g.new_input((batch, head_dim, kv_len), dtype=dtype, name="K")
    V = g.new_input((batch, kv_len, head_dim), dtype=dtype, name="V")
    e = g.exp(g.matmul(Q, K))
    z = g.reduction(e, 2)
    p = g.div(e, z)
    g.mark_output(g.matmul(p, V))
    return g.module


def _stable_attention(name: str, batch: int, q_len: int, kv_len: int, head_dim: int, dtype: str) -> ModuleOp:
    """softmax(Q @ K / sqrt(head_dim)) @ V with the row max subtracted before `exp` (what
    real attention computes: scores reach +-30, where `exp` alone overflows fp16); K is
    stored transposed ([batch, head_dim, kv_len])."""
    g = mx.new_kernel_graph(name)
    Q = g.new_input((batch, q_len, head_dim), dtype=dtype, name="Q")
    K = g.new_input((batch, head_dim, kv_len), dtype=dtype, name="K")
    V = g.new_input((batch, kv_len, head_dim), dtype=dtype, name="V")
    s = g.mul_scalar(g.matmul(Q, K), 1.0 / head_dim**0.5)
    e = g.exp(g.sub(s, g.reduction_max(s, 2)))
    g.mark_output(g.div(g.matmul(e, V), g.reduction(e, 2)))
    return g.module


def mha_stable(batch: int = 32, q_len: int = 16, kv_len: int = 4096, head_dim: int = 64, dtype: str = "float16") -> ModuleOp:
    """Multi-head decode attention at mha's shapes, numerically stable (`_stable_attention`)."""
    return _stable_attention("mha_stable", batch, q_len, kv_len, head_dim, dtype)


def attention_prefill(batch: int = 8, seq: int = 1024, head_dim: int = 64, dtype: str = "float16") -> ModuleOp:
    """Prefill attention (not causal) of `batch` heads over `seq` tokens, numerically stable
    (`_stable_attention` with as many queries as keys)."""
    return _stable_attention("attention_prefill", batch, seq, seq, head_dim, dtype)


def softmax(rows: int = 64, cols: int = 4096, dtype: str = "float16") -> ModuleOp:
    """softmax over the last dim of X [rows, cols]: `exp(X - max(X)) / sum(exp(X - max(X)))`."""
    g = mx.new_kernel_graph("softmax")
    X = g.new_input((rows, cols), dtype=dtype, name="X")
    e = g.exp(g.sub(X, g.reduction_max(X, 1)))
    g.mark_output(g.div(e, g.reduction(e, 1)))
    return g.module


def gqa(batch: int = 2, q_len: int = 256, kv_len: int = 4096, head_dim: int = 64, dtype: str = "float16") -> ModuleOp:
    """Group-query attention for decoding (benchmark/group_query_attention.py, batch 1)."""
    return _attention("gqa", batch, q_len, kv_len, head_dim, dtype)


def rmsnorm_linear_bs8() -> ModuleOp:
    """`rms_norm(X) @ W` at batch 8 (Mirage's rmsnorm_bs8.json): X [16, 4096], W [4096, 6144]."""
    return rmsnorm_linear(m=16, name="rmsnorm_linear_bs8")


def gqa_bs8() -> ModuleOp:
    """Group-query attention at batch 8 (Mirage's gqa_bs8.json): Q [16, 256, 64],
    K [16, 64, 4096], V [16, 4096, 64]."""
    return _attention("gqa_bs8", 16, 256, 4096, 64, "float16")


def mha(batch: int = 32, q_len: int = 16, kv_len: int = 4096, head_dim: int = 64, dtype: str = "float16") -> ModuleOp:
    """Multi-head attention for decoding (benchmark/multi_head_attention.py, batch 1)."""
    return _attention("mha", batch, q_len, kv_len, head_dim, dtype)


def mqa(batch: int = 1, q_len: int = 1024, kv_len: int = 4096, head_dim: int = 64, dtype: str = "float16") -> ModuleOp:
    """Multi-query attention for decoding (benchmark/multi_query_attention.py, batch 1)."""
    return _attention("mqa", batch, q_len, kv_len, head_dim, dtype)


def lora(m: int = 16, k: int = 256, n: int = 4096, rank: int = 16, dtype: str = "float16") -> ModuleOp:
    """`X @ W + (X @ A) @ B` (benchmark/lora.py)."""
    g = mx.new_kernel_graph("lora")
    X = g.new_input((m, k), dtype=dtype, name="X")
    W = g.new_input((k, n), dtype=dtype, name="W", weight=True)
    A = g.new_input((k, rank), dtype=dtype, name="A", weight=True)
    B = g.new_input((rank, n), dtype=dtype, name="B", weight=True)
    xw = g.matmul(X, W)
    xab = g.matmul(g.matmul(X, A), B)
    g.mark_output(g.add(xw, xab))
    return g.module


def ntrans(m: int = 8, n: int = 4096, dtype: str = "float16") -> ModuleOp:
    """nGPT-style update `rms(X + alpha * (rms(H) + X))` (benchmark/norm_transformer.py)."""
    g = mx.new_kernel_graph("ntrans")
    H = g.new_input((m, n), dtype=dtype, name="H")
    X = g.new_input((m, n), dtype=dtype, name="X")
    alpha = g.new_input((m, n), dtype=dtype, name="alpha")
    a = g.add(g.rms_norm(H, (n,)), X)
    b = g.mul(alpha, a)
    c = g.add(X, b)
    g.mark_output(g.rms_norm(c, (n,)))
    return g.module


EXAMPLES: dict[str, Callable[..., ModuleOp]] = {
    "attention_prefill": attention_prefill,
    "gated_mlp": gated_mlp,
    "gqa": gqa,
    "gqa_bs8": gqa_bs8,
    "lora": lora,
    "mha": mha,
    "mha_stable": mha_stable,
    "mqa": mqa,
    "ntrans": ntrans,
    "rmsnorm_linear": rmsnorm_linear,
    "rmsnorm_linear_bs8": rmsnorm_linear_bs8,
    "softmax": softmax,
}


def main(argv: list[str] | None = None) -> int:
    """Print the named examples (`argv`, default `sys.argv[1:]`; none: all of them) as MLIR.

    Returns 0, or 1 after one line on stderr for an unknown name (examples before it are printed).
    """
    names = (sys.argv[1:] if argv is None else argv) or list(EXAMPLES)
    for name in names:
        if name not in EXAMPLES:
            print(f"unknown example '{name}' (expected one of {', '.join(EXAMPLES)})", file=sys.stderr)
            return 1
        print(EXAMPLES[name]())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
