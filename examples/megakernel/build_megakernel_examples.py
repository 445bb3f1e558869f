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
  (RMSNorm -> gated MLP -> down projection + residual; hidden 4096, FFN 12288).

They live apart from `examples/*.mlir`, whose tests expect kn-fuse to make one or two
kernels of each example.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

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
    The RMSNorm has no gain (fold it into W1/W3).  The attention half needs a reshape of the
    QKV projection into heads, which the kernel graph has no op for yet."""
    g = mx.new_kernel_graph("decoder_mlp")
    x = g.new_input((m, hidden), dtype=dtype, name="x")
    w1 = g.new_input((hidden, ffn), dtype=dtype, name="W1", weight=True)
    w3 = g.new_input((hidden, ffn), dtype=dtype, name="W3", weight=True)
    w2 = g.new_input((ffn, hidden), dtype=dtype, name="W2", weight=True)
    n = g.rms_norm(x, (hidden,))
    h = g.mul(g.silu(g.matmul(n, w1)), g.matmul(n, w3))
    g.mark_output(g.add(x, g.matmul(h, w2)))
    return g.module


EXAMPLES: dict[str, Callable[..., ModuleOp]] = {"chain3": chain3, "chain40": chain40, "decoder_mlp": decoder_mlp}


def main(argv: list[str] | None = None) -> int:
    names = (sys.argv[1:] if argv is None else argv) or list(EXAMPLES)
    for name in names:
        if name not in EXAMPLES:
            print(f"unknown example '{name}' (expected one of {', '.join(EXAMPLES)})", file=sys.stderr)
            return 1
        print(EXAMPLES[name]())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
