"""The kernel graphs of the program suite (issue #30 item 2), built through the Python builder.

Each builder takes the dtype name (`"float16"`, `"bfloat16"`, `"float32"`), the function
name and the sizes as keywords, and returns a fresh verified `builtin.module` holding one
`func.func`: plain kernel-level ops only (no `kn.customized`), written as a user who never saw
the planner would write them.  `bench/suite/torch_programs.py` holds the same programs in
torch (the peers of `mirage-bench`), in the same argument order.

Conventions shared with Mirage's kernel graphs (mirage-notes 2.4): normalisations have no
epsilon (`kn.rms_norm` has none; torch is called with `eps=0`), per-channel gains and biases
are inputs of shape [1, hidden] (kn broadcasts equal ranks only).  kn.matmul has no
transpose flag: a transposed operand is an input whose strides say so -- attention's keys
are the [heads, head_dim, keys] operand of `Q @ K` stored as a KV cache stores them,
[heads, keys, head_dim], and `bmm_nt`'s B likewise.  Attention and softmax subtract the row max before `exp`
(`kn.reduction_max`), so scores of +-50 stay finite in fp16.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.frontends.builder import DTensor, KNGraph, new_kernel_graph


def stable_softmax_rows(g: KNGraph, x: DTensor, dim: int) -> tuple[DTensor, DTensor]:
    """(`exp(x - max(x, dim))`, its sum over `dim`): a softmax's numerator and denominator."""
    e = g.exp(g.sub(x, g.reduction_max(x, dim)))
    return e, g.reduction(e, dim)


def softmax(dtype: str, name: str, rows: int, cols: int) -> ModuleOp:
    """softmax over the last dim of X [rows, cols] (max subtracted)."""
    g = new_kernel_graph(name)
    X = g.new_input((rows, cols), dtype=dtype, name="X")
    e, z = stable_softmax_rows(g, X, 1)
    g.mark_output(g.div(e, z))
    return g.module


def layernorm(dtype: str, name: str, rows: int, cols: int) -> ModuleOp:
    """LayerNorm over the last dim of X [rows, cols], mean and variance written out:
    `(X - mean) / sqrt(mean((X - mean)^2)) * G + B` (G, B: [1, cols]; no epsilon)."""
    g = new_kernel_graph(name)
    X = g.new_input((rows, cols), dtype=dtype, name="X")
    G = g.new_input((1, cols), dtype=dtype, name="G", weight=True)
    B = g.new_input((1, cols), dtype=dtype, name="B", weight=True)
    mean = g.mul_scalar(g.reduction(X, 1), 1.0 / cols)
    xc = g.sub(X, mean)
    var = g.mul_scalar(g.reduction(g.square(xc), 1), 1.0 / cols)
    y = g.div(xc, g.sqrt(var))
    g.mark_output(g.add(g.mul(y, G), B))
    return g.module


def rmsnorm(dtype: str, name: str, rows: int, cols: int) -> ModuleOp:
    """RMSNorm over the last dim of X [rows, cols] with a gain G [1, cols]: `rms_norm(X) * G`."""
    g = new_kernel_graph(name)
    X = g.new_input((rows, cols), dtype=dtype, name="X")
    G = g.new_input((1, cols), dtype=dtype, name="G", weight=True)
    g.mark_output(g.mul(g.rms_norm(X, (cols,)), G))
    return g.module


def add_rmsnorm(dtype: str, name: str, rows: int, cols: int) -> ModuleOp:
    """Residual add + RMSNorm (a transformer block's pre-norm): `H = X + R`, outputs
    `(rms_norm(H) * G, H)` -- the normalised input of the next layer and the new residual."""
    g = new_kernel_graph(name)
    X = g.new_input((rows, cols), dtype=dtype, name="X")
    R = g.new_input((rows, cols), dtype=dtype, name="R")
    G = g.new_input((1, cols), dtype=dtype, name="G", weight=True)
    h = g.add(X, R)
    g.mark_output(g.mul(g.rms_norm(h, (cols,)), G))
    g.mark_output(h)
    return g.module


def gelu_mlp(dtype: str, name: str, batch: int, hidden: int, ffn: int) -> ModuleOp:
    """GELU MLP (GPT-style feed-forward): `gelu(X @ W1) @ W2`, X [batch, hidden],
    W1 [hidden, ffn], W2 [ffn, hidden]."""
    g = new_kernel_graph(name)
    X = g.new_input((batch, hidden), dtype=dtype, name="X")
    W1 = g.new_input((hidden, ffn), dtype=dtype, name="W1", weight=True)
    W2 = g.new_input((ffn, hidden), dtype=dtype, name="W2", weight=True)
    g.mark_output(g.matmul(g.gelu(g.matmul(X, W1)), W2))
    return g.module


def swiglu_mlp(dtype: str, name: str, batch: int, hidden: int, ffn: int) -> ModuleOp:
    """SwiGLU MLP (Llama's feed-forward): `(silu(X @ W1) * (X @ W3)) @ W2`, X [batch, hidden],
    W1, W3 [hidden, ffn], W2 [ffn, hidden]."""
    g = new_kernel_graph(name)
    X = g.new_input((batch, hidden), dtype=dtype, name="X")
    W1 = g.new_input((hidden, ffn), dtype=dtype, name="W1", weight=True)
    W3 = g.new_input((hidden, ffn), dtype=dtype, name="W3", weight=True)
    W2 = g.new_input((ffn, hidden), dtype=dtype, name="W2", weight=True)
    gated = g.mul(g.silu(g.matmul(X, W1)), g.matmul(X, W3))
    g.mark_output(g.matmul(gated, W2))
    return g.module


def attention(g: KNGraph, Q: DTensor, K: DTensor, V: DTensor, scale: float, causal: bool = False) -> DTensor:
    """`softmax(scale Q @ K) @ V` over the last dim (`scale` = 1 / sqrt(head_dim) in a
    transformer), max subtracted, the division by the row sum after the second matmul (one
    [rows, head_dim] division, not [rows, keys]); with `causal`, the scaled scores go through
    `kn.causal_mask` (bottom-right aligned)."""
    s = g.mul_scalar(g.matmul(Q, K), scale)
    if causal:
        s = g.causal_mask(s)
    e, z = stable_softmax_rows(g, s, s.num_dims - 1)
    return g.div(g.matmul(e, V), z)


def key_strides(head_dim: int, keys: int) -> tuple[int, int, int]:
    """Element strides of the key operand [heads, head_dim, keys] when the keys are stored as
    a KV cache stores them, [heads, keys, head_dim] row-major (`K^T` as a layout)."""
    return (keys * head_dim, 1, head_dim)


def decode_attention(dtype: str, name: str, kv_heads: int, group: int, kv_len: int, head_dim: int) -> ModuleOp:
    """Decode attention (one new token, grouped-query): the `group` query heads of each of
    `kv_heads` KV heads are the rows of Q [kv_heads, group, head_dim]; the KV cache is K
    [kv_heads, head_dim, kv_len] (stored [kv_heads, kv_len, head_dim]: `key_strides`) and
    V [kv_heads, kv_len, head_dim]."""
    g = new_kernel_graph(name)
    Q = g.new_input((kv_heads, group, head_dim), dtype=dtype, name="Q")
    K = g.new_input((kv_heads, head_dim, kv_len), strides=key_strides(head_dim, kv_len), dtype=dtype, name="K")
    V = g.new_input((kv_heads, kv_len, head_dim), dtype=dtype, name="V")
    g.mark_output(attention(g, Q, K, V, 1.0 / math.sqrt(head_dim)))
    return g.module


def prefill_attention(dtype: str, name: str, heads: int, seq: int, head_dim: int) -> ModuleOp:
    """Prefill attention, not causal: Q [heads, seq, head_dim], K [heads, head_dim, seq]
    (stored [heads, seq, head_dim]: `key_strides`), V [heads, seq, head_dim]."""
    g = new_kernel_graph(name)
    Q = g.new_input((heads, seq, head_dim), dtype=dtype, name="Q")
    K = g.new_input((heads, head_dim, seq), strides=key_strides(head_dim, seq), dtype=dtype, name="K")
    V = g.new_input((heads, seq, head_dim), dtype=dtype, name="V")
    g.mark_output(attention(g, Q, K, V, 1.0 / math.sqrt(head_dim)))
    return g.module


def prefill_attention_causal(dtype: str, name: str, heads: int, seq: int, head_dim: int) -> ModuleOp:
    """Prefill attention, causal: as `prefill_attention`, the scaled scores masked by
    `kn.causal_mask` (query i sees keys 0..i)."""
    g = new_kernel_graph(name)
    Q = g.new_input((heads, seq, head_dim), dtype=dtype, name="Q")
    K = g.new_input((heads, head_dim, seq), strides=key_strides(head_dim, seq), dtype=dtype, name="K")
    V = g.new_input((heads, seq, head_dim), dtype=dtype, name="V")
    g.mark_output(attention(g, Q, K, V, 1.0 / math.sqrt(head_dim), causal=True))
    return g.module


def rotary(dtype: str, name: str, tokens: int, heads: int, head_dim: int) -> ModuleOp:
    """Rotary position embedding (RoFormer, rotate-half form, as in Llama):
    with X [tokens, heads, head_dim] split into halves x1, x2 and C, S [tokens, 1, head_dim/2]
    the cosines and sines of each token's angles, `concat(x1 C - x2 S, x2 C + x1 S)`."""
    g = new_kernel_graph(name)
    half = head_dim // 2
    X = g.new_input((tokens, heads, head_dim), dtype=dtype, name="X")
    C = g.new_input((tokens, 1, half), dtype=dtype, name="C", weight=True)
    S = g.new_input((tokens, 1, half), dtype=dtype, name="S", weight=True)
    x1, x2 = g.chunk(X, 2, 2)
    lo = g.sub(g.mul(x1, C), g.mul(x2, S))
    hi = g.add(g.mul(x2, C), g.mul(x1, S))
    g.mark_output(g.concat(lo, hi, 2))
    return g.module


def bmm_nt(dtype: str, name: str, batch: int, m: int, n: int, k: int) -> ModuleOp:
    """Batched matmul with a transposed operand, `A @ B^T`: A [batch, m, k] row-major, B
    stored as [batch, n, k] (row-major), read as the [batch, k, n] operand through its
    strides (n*k, 1, k) -- kn.matmul has no transpose flag, a transposed operand is a layout."""
    g = new_kernel_graph(name)
    A = g.new_input((batch, m, k), dtype=dtype, name="A")
    B = g.new_input((batch, k, n), strides=(n * k, 1, k), dtype=dtype, name="B", weight=True)
    g.mark_output(g.matmul(A, B))
    return g.module


def reduce_sum(dtype: str, name: str, dim: int, d0: int, d1: int, d2: int) -> ModuleOp:
    """Sum of X [d0, d1, d2] over `dim` (kept as a dim of size 1)."""
    g = new_kernel_graph(name)
    X = g.new_input((d0, d1, d2), dtype=dtype, name="X")
    g.mark_output(g.reduction(X, dim))
    return g.module


def lora(dtype: str, name: str, batch: int, hidden: int, rank: int) -> ModuleOp:
    """A linear layer with a LoRA adapter: `X @ W + (X @ A) @ B`, X [batch, hidden],
    W [hidden, hidden], A [hidden, rank], B [rank, hidden]."""
    g = new_kernel_graph(name)
    X = g.new_input((batch, hidden), dtype=dtype, name="X")
    W = g.new_input((hidden, hidden), dtype=dtype, name="W", weight=True)
    A = g.new_input((hidden, rank), dtype=dtype, name="A", weight=True)
    B = g.new_input((rank, hidden), dtype=dtype, name="B", weight=True)
    g.mark_output(g.add(g.matmul(X, W), g.matmul(g.matmul(X, A), B)))
    return g.module


def cross_entropy(dtype: str, name: str, rows: int, vocab: int) -> ModuleOp:
    """Cross-entropy forward per row with target probabilities P (torch's
    `cross_entropy(X, P, reduction="none")`): `-sum(P * log_softmax(X))
    = logsumexp(X) * sum(P) - sum(P * X)`, logsumexp stable (`max + log(sum(exp(X - max)))`);
    X, P [rows, vocab] -> [rows, 1]."""
    g = new_kernel_graph(name)
    X = g.new_input((rows, vocab), dtype=dtype, name="X")
    P = g.new_input((rows, vocab), dtype=dtype, name="P")
    m = g.reduction_max(X, 1)
    lse = g.add(m, g.log(g.reduction(g.exp(g.sub(X, m)), 1)))
    loss = g.sub(g.mul(lse, g.reduction(P, 1)), g.reduction(g.mul(P, X), 1))
    g.mark_output(loss)
    return g.module
