"""Kernel graphs of the persistent megakernel's workloads (issue #32), built through the Python
builder API; `examples/megakernel/<name>.mlir` holds each one as printed here.

    python examples/megakernel/build_megakernel_examples.py chain40 > examples/megakernel/chain40.mlir

* `chain3`: `relu(silu(X @ W) @ W)`, a short chain of dependent kernels (per-op: 4 kernels);
* `chain40`: seed 003's microbenchmark, 40 small dependent tasks: 20 x (`h = relu(h @ W_i)`),
  [8, 32] activations and 20 [32, 32] weights (fp16); per op that is 40 kernels (with default
  fusion kn-fuse would merge each relu into its matmul).  The widths keep the values in fp16
  range: with U(-0.5, 0.5) inputs one layer scales the RMS by about sqrt(32 / 12 / 12 / 2)
  ~ 1.15, i.e. ~16x over 20 layers;
* `decoder_mlp`: the MLP half of the issue's Qwen3-8B-shaped decoder layer at batch 1
  (RMSNorm -> gated MLP -> down projection + residual; hidden 4096, FFN 12288);
* `decoder_layer` (issue workload (a)), `decoder_layer_bs8` ((b), batch 8) and
  `decoder_4layers` ((c), four layers chained): the whole layer, GQA decode attention over
  a 4096-token KV cache included (`kn.reshape` views the Q projection as heads).

They live apart from `examples/*.mlir`, whose tests expect kn-fuse to make one or two
kernels of each example.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import ModuleOp

import mirage_xdsl as mx


def chain3(m: int = 8, k: int = 256, dtype: str = "float16") -> ModuleOp:
    """`relu(silu(X @ W) @ W)`: X [m, k], W [k, k]."""
    g = mx.new_kernel_graph("chain3")
    X = g.new_input((m, k), dtype=dtype, name="X")
    W = g.new_input((k, k), dtype=dtype, name="W", weight=True)
    h = g.silu(g.matmul(X, W))
    g.mark_output(g.relu(g.matmul(h, W)))
    return g.module


def chain40(layers: int = 20, m: int = 8, d: int = 32, dtype: str = "float16") -> ModuleOp:
    """`layers` x `h = relu(h @ W_i)` from h = X [m, d]; W_i [d, d] (2 x layers ops)."""
    g = mx.new_kernel_graph("chain40")
    h = g.new_input((m, d), dtype=dtype, name="X")
    weights = [g.new_input((d, d), dtype=dtype, name=f"W{i}", weight=True) for i in range(layers)]
    for w in weights:
        h = g.relu(g.matmul(h, w))
    g.mark_output(h)
    return g.module


def decoder_mlp(m: int = 1, hidden: int = 4096, ffn: int = 12288, dtype: str = "float16") -> ModuleOp:
    """The MLP half of a Qwen3-8B-shaped decoder layer at batch `m` (issue #32 workload (a)
    without its attention): `x + (silu(rms_norm(x) @ W1) * (rms_norm(x) @ W3)) @ W2`;
    x [m, hidden], W1/W3 [hidden, ffn], W2 [ffn, hidden] (302 MB of fp16 weights by default).
    The RMSNorm has no gain (fold it into W1/W3).  `decoder_layer` is the whole layer."""
    g = mx.new_kernel_graph("decoder_mlp")
    x = g.new_input((m, hidden), dtype=dtype, name="x")
    w1 = g.new_input((hidden, ffn), dtype=dtype, name="W1", weight=True)
    w3 = g.new_input((hidden, ffn), dtype=dtype, name="W3", weight=True)
    w2 = g.new_input((ffn, hidden), dtype=dtype, name="W2", weight=True)
    n = g.rms_norm(x, (hidden,))
    h = g.mul(g.silu(g.matmul(n, w1)), g.matmul(n, w3))
    g.mark_output(g.add(x, g.matmul(h, w2)))
    return g.module


def _decoder_block(
    g: Any, x: Any, suffix: str, batch: int, hidden: int, kv_heads: int, group: int, head_dim: int, kv_len: int, ffn: int, dtype: str
) -> tuple[Any, Any, Any]:
    """One decoder layer on x [batch, hidden]: (layer output, k_new, v_new); its inputs are
    created in the order Wq, Wk, Wv, K, V, Wo, W1, W3, W2 (names suffixed `suffix`)."""
    rows = batch * kv_heads  # one cache per sequence: rows b * kv_heads + h of K and V
    wq = g.new_input((hidden, kv_heads * group * head_dim), dtype=dtype, name=f"Wq{suffix}", weight=True)
    wk = g.new_input((hidden, kv_heads * head_dim), dtype=dtype, name=f"Wk{suffix}", weight=True)
    wv = g.new_input((hidden, kv_heads * head_dim), dtype=dtype, name=f"Wv{suffix}", weight=True)
    # the key cache as the [rows, head_dim, kv_len] operand of q @ K, stored [rows, kv_len, head_dim]
    K = g.new_input((rows, head_dim, kv_len), strides=(kv_len * head_dim, 1, head_dim), dtype=dtype, name=f"K{suffix}")
    V = g.new_input((rows, kv_len, head_dim), dtype=dtype, name=f"V{suffix}")
    wo = g.new_input((kv_heads * group * head_dim, hidden), dtype=dtype, name=f"Wo{suffix}", weight=True)
    w1 = g.new_input((hidden, ffn), dtype=dtype, name=f"W1{suffix}", weight=True)
    w3 = g.new_input((hidden, ffn), dtype=dtype, name=f"W3{suffix}", weight=True)
    w2 = g.new_input((ffn, hidden), dtype=dtype, name=f"W2{suffix}", weight=True)
    n = g.rms_norm(x, (hidden,))
    q = g.reshape(g.matmul(n, wq), (rows, group, head_dim))  # [batch, q heads * d] -> [b * kv heads, group, d]
    k_new, v_new = g.matmul(n, wk), g.matmul(n, wv)
    s = g.mul_scalar(g.matmul(q, K), 1.0 / math.sqrt(head_dim))
    e = g.exp(g.sub(s, g.reduction_max(s, 2)))
    o = g.div(g.matmul(e, V), g.reduction(e, 2))  # [rows, group, d], divided after the second matmul
    h = g.add(x, g.matmul(g.reshape(o, (batch, kv_heads * group * head_dim)), wo))
    n2 = g.rms_norm(h, (hidden,))
    mlp = g.mul(g.silu(g.matmul(n2, w1)), g.matmul(n2, w3))
    return g.add(h, g.matmul(mlp, w2)), k_new, v_new


def decoder_layer(
    batch: int = 1,
    layers: int = 1,
    hidden: int = 4096,
    kv_heads: int = 8,
    group: int = 4,
    head_dim: int = 128,
    kv_len: int = 4096,
    ffn: int = 12288,
    dtype: str = "float16",
    name: str = "decoder_layer",
) -> ModuleOp:
    """`layers` Qwen3-8B-shaped decoder layers (issue #32 workloads (a)-(c)) on x [batch, hidden]:
    RMSNorm -> Q/K/V projections -> GQA decode attention over the KV cache (stable softmax)
    -> O projection + residual -> RMSNorm -> gated MLP -> down projection + residual.

    Inputs: x, then per layer Wq [hidden, 32*128], Wk and Wv [hidden, 8*128], the caches K and
    V, Wo, W1, W3 [hidden, ffn], W2 [ffn, hidden].  Outputs: per layer k_new and v_new
    [batch, 1024] (the new token's key and value: the cache append and RoPE come later), then
    the last layer's output [batch, hidden].  Q is reshaped [batch, 4096] -> [batch * 8, 4, 128]
    (row b * 8 + h: sequence b's KV head h and its 4 query heads), so each sequence has its own
    cache: K [batch * 8, 128, kv_len] (stored [batch * 8, kv_len, 128], kn.strides) and V
    [batch * 8, kv_len, 128]; the output [batch * 8, 4, 128] is reshaped back to [batch, 4096].
    RMSNorms have no gain (fold it into the next weights).  kn.chunk splits into equal parts
    only (Mirage's semantics), so the fused [hidden, 6144] QKV projection is three matmuls of
    the same normalised x (the same bytes and flops).  At batch 1, 402.7 MB of fp16 weights
    and cache per layer."""
    g = mx.new_kernel_graph(name)
    x = g.new_input((batch, hidden), dtype=dtype, name="x")
    kv = []
    for layer in range(layers):
        suffix = str(layer) if layers > 1 else ""
        x, k_new, v_new = _decoder_block(g, x, suffix, batch, hidden, kv_heads, group, head_dim, kv_len, ffn, dtype)
        kv += [k_new, v_new]
    for t in kv:
        g.mark_output(t)
    g.mark_output(x)
    return g.module


def decoder_layer_bs8() -> ModuleOp:
    """Workload (b): `decoder_layer` at batch 8 (8 sequences, each with its own 4096-token cache)."""
    return decoder_layer(batch=8, name="decoder_layer_bs8")


def decoder_4layers() -> ModuleOp:
    """Workload (c): four `decoder_layer`s chained, each with its own weights and cache."""
    return decoder_layer(layers=4, name="decoder_4layers")


EXAMPLES: dict[str, Callable[..., ModuleOp]] = {
    "chain3": chain3,
    "chain40": chain40,
    "decoder_mlp": decoder_mlp,
    "decoder_layer": decoder_layer,
    "decoder_layer_bs8": decoder_layer_bs8,
    "decoder_4layers": decoder_4layers,
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
