"""The fuzzer's attention family: kn graphs of `softmax(scale Q K [causally masked]) V` that
the default pipeline gives the sm_90a flash-attention kernel (`cute.hopper_attention`, at least
64 query rows), the split-key decode kernel (`cute.decode_attention`, a few query rows per
head) or, outside their rules, the generated attention kernels.

`random_attention_graph` draws, in fp16 or bf16:

* heads 1 to 8 (or no head dim); query rows 1 to 16 (decode: one new token per head, or the
  query heads of a grouped KV head) or 64 to 1024 with tails (100, 320, 1000: a partial
  64-row tile); keys 64 to 8192, multiples of 64 mostly, with tails now and then (1000, 4000:
  the kernels' rules send those to the generated plans);
* head dims 64 and 128 (the kernels' `HEAD_DIMS`), and 32 or 96 now and then;
* K as a KV cache stores it ([heads, keys, head_dim] row-major, read as [heads, head_dim,
  keys] through its strides) or stored as read; a causal mask (bottom-right aligned, keys >=
  queries) on prefill shapes;
* the score scale 1 / sqrt(head_dim), or 8 to 100 times that, so that with inputs in
  +-`INPUT_SCALE` the scores reach +-30 (the running max and rescaled sums must keep fp16 and
  bf16 finite; a kernel without them gives inf / NaN).

At these sizes the cost model mostly keeps the generated attention kernels, so three
quarters of the graphs that fit a kernel's rules are lowered with it forced (`lower_attention_case`): the
flash kernel with 1 or 2 consumer warpgroups and 64- or 128-key tiles, the decode kernel with
a random (splits, warps, stages) it accepts -- the options the kernels' own tests force.

At most `MAX_FLOP` multiply-adds per matmul keep the float64 reference cheap.  GPU only, like
the GEMM family (`--family attention`).
"""

from __future__ import annotations

import math
import random
from typing import Any

DECODE_ROWS = (1, 2, 4, 8, 16)
PREFILL_ROWS = (64, 96, 100, 128, 192, 256, 320, 512, 1000, 1024)
KEYS = (64, 128, 192, 256, 512, 640, 1024, 2048, 4096, 8192)
ODD_KEYS = (100, 1000, 4000)
MAX_FLOP = 1 << 29
"""Multiply-adds of one of the two matmuls (heads x rows x keys x head dim)."""


def _sizes(rng: random.Random) -> tuple[int | None, int, int, int, bool]:
    """(heads or None, query rows, keys, head dim, causal) within `MAX_FLOP`."""
    while True:
        heads = rng.choice((None, 1, 2, 4, 8))
        decode = rng.random() < 0.4
        rows = rng.choice(DECODE_ROWS if decode else PREFILL_ROWS)
        keys = rng.choice(ODD_KEYS) if rng.random() < 0.15 else rng.choice(KEYS)
        head_dim = rng.choice((32, 96)) if rng.random() < 0.1 else rng.choice((64, 128))
        causal = not decode and keys >= rows and rng.random() < 0.5
        if (heads or 1) * rows * keys * head_dim <= MAX_FLOP:
            return heads, rows, keys, head_dim, causal


def random_attention_graph(rng: random.Random, name: str, dtype: str) -> tuple[Any, dict[str, Any]]:
    """(module, kernel options) of one attention-family graph (module docstring) drawn from
    `rng` in `dtype` ("float16" or "bfloat16"); the options for `lower_attention_case`.

    Raises:
        ValueError: another dtype.
        GraphBuildError: a builder rule broke (not expected for these shapes).
    """
    from mirage_xdsl.bench.suite.graphs import attention, key_strides
    from mirage_xdsl.frontends.builder import new_kernel_graph

    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"attention-family graphs are fp16 or bf16, not {dtype}")
    heads, rows, keys, head_dim, causal = _sizes(rng)
    lead = () if heads is None else (heads,)
    g = new_kernel_graph(name)
    Q = g.new_input((*lead, rows, head_dim), dtype=dtype, name="Q")
    cache = None
    if rng.random() < 0.7:  # the KV cache's layout, [.., keys, head_dim], read transposed
        cache = key_strides(head_dim, keys)[-len(lead) - 2 :]
    K = g.new_input((*lead, head_dim, keys), strides=cache, dtype=dtype, name="K", weight=rng.random() < 0.5)
    V = g.new_input((*lead, keys, head_dim), dtype=dtype, name="V", weight=rng.random() < 0.5)
    scale = rng.choice((1.0, 1.0, 8.0, 32.0, 100.0)) / math.sqrt(head_dim)
    g.mark_output(attention(g, Q, K, V, scale, causal=causal))
    return g.module, forced_options(rng, g.module)


def lower_attention_case(module: Any, options: dict[str, Any]) -> Any:
    """A clone of `module` lowered by mirage-transpile, its attention group first lowered to
    the kernel `options` force: {"kernel": "flash", "shape": (consumers, key_tile)} or
    {"kernel": "decode", "options": (splits, warps, stages)}; {} lowers by the default pipeline.

    Raises:
        PassFailedException, VerifyException: the forced kernel's options break its rules.
        ValueError: the group does not match or fit the forced kernel.
    """
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.conversion.decode_attention import fits_decode, lower_decode
    from mirage_xdsl.passes.conversion.flash_attention import fits_kernel, lower_attention, match_attention
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.target.cost_model import DeviceModel

    low = module.clone()
    kernel = options.get("kernel")
    if kernel is not None:
        fn = low.body.block.first_op
        group = match_attention([op for op in fn.body.block.ops if op.name != "func.return"])
        device = DeviceModel()
        if group is None or not (fits_kernel(group) if kernel == "flash" else fits_decode(group, device)):
            raise ValueError(f"the attention group does not fit the {kernel} kernel")
        if kernel == "flash":
            lower_attention(group, device, tuple(options["shape"]))
        else:
            lower_decode(group, device, tuple(options["options"]))
    MirageTranspilePass(fuse=kernel is None).apply(make_context(), low)
    low.verify()
    return low


def forced_options(rng: random.Random, module: Any) -> dict[str, Any]:
    """Kernel options for `module` (module docstring): a forced flash or decode kernel with
    random options it accepts, tried on the CPU; {} (the default pipeline) for a quarter of
    the graphs, and for those no kernel takes."""
    if rng.random() < 0.25:
        return {}
    for _ in range(8):
        if rng.random() < 0.5:
            options: dict[str, Any] = {"kernel": "flash", "shape": (rng.choice((1, 2)), rng.choice((64, 128)))}
        else:
            options = {"kernel": "decode", "options": (rng.choice((1, 2, 4, 8, 16)), rng.choice((4, 8)), rng.choice((2, 3, 4)))}
        try:
            lower_attention_case(module, options)
            return options
        except Exception:  # noqa: BLE001 - a kernel or option set the graph does not take: draw again
            continue
    return {}
