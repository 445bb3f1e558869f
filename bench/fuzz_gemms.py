"""The fuzzer's GEMM family: random kernel graphs that the default pipeline gives the sm_90a
TMA + wgmma GEMM (`cute.hopper_gemm`, via kn-partition's lone-matmul and epilogue-chain rules).

The mixed family of `fuzz_graphs.py` keeps its matmuls small (m <= 32, k <= 256), where the
generated sm_80-style kernels win, so the GEMM kernel's schedules -- skinny split-K rings,
ping-pong and cooperative tiles of 64 to 256 columns, 256-row tiles, CTA pairs, the 16-byte,
4-byte and TMA-store epilogues, the ELWISE_MUL factor by L2 prefetch or by TMA -- are reached
only by shapes of hundreds to thousands of rows.  `random_gemm_graph` draws such a graph:

* `X [*batch, m, k] @ W [*batch, k, n]`, fp16 or bf16, at most two batch dims; W row-major
  or stored transposed (`[*batch, n, k]` read through its strides, the `bmm_nt` form);
* m, n and k from lists with tails (m = 65, n = 72, k = 200: partial tiles in every dim and
  k-tiles that end inside a 64-wide box) and sizes past one wave of 132 SMs;
* then nothing, an activation (relu, gelu, silu, sigmoid, mul_scalar), the activation times
  a second GEMM of X (SwiGLU's `silu(X @ W1) * (X @ W3)`), or times an input tensor of the
  result's shape -- the epilogue chains `conversion/gemm_epilogue.py` folds into the GEMM.

`random_einsum_case` draws the other half of the family through the `mx.einsum` path
(`driver/einsum.py`): a contraction (plain, batched, B transposed, attention-score and
split-head forms, operands that need a permute, the ELWISE_MUL factor) with `compile_einsum`'s
schedule options drawn at random -- tile sizes, stages, group height, epilogue, CTA pairs
(sharing B or A), ping-pong, split-K, stream-K -- among the sets `convert-contraction-to-hopper` accepts for
the shape (tried on the CPU while drawing), so each schedule of the kernel meets shapes with
tails.

Sizes keep the float64 reference cheap (at most `MAX_FLOP` multiply-adds, about a second of
numpy a graph) and values moderate (inputs in +-`INPUT_SCALE`, sums of k products stay far
inside fp16's range), so outputs are held to `TOLERANCE` like every fuzzed graph.  GPU only:
the host emulator does not model sm_90a kernels.
"""

from __future__ import annotations

import math
import random
from typing import Any

from mirage_xdsl.dialects.tiling import row_major_strides

M_SIZES = (65, 96, 128, 192, 256, 320, 384, 512, 640, 1000, 1024, 2048)
"""Rows of X: from skinny (64 < m <= 256, `to_hopper.skinny_tile`) to several 128-row tiles, with tails."""
N_SIZES = (64, 72, 128, 136, 192, 256, 264, 384, 520, 1000, 1024, 2048, 4096)
"""Columns of W: 64 to 256-wide tiles with tails; 72, 136, 264 and 520 are multiples of 8 but
not of 64 (the 16-byte epilogues' partial tile)."""
K_SIZES = (64, 128, 192, 200, 256, 512, 1000, 1024, 2048, 4096)
"""The contracted dim: one k-tile up to 64; 200 and 1000 end inside a 64-wide box (TMA fills zeros)."""
MAX_FLOP = 1 << 30
"""Multiply-adds per graph (batch x m x n x k, each GEMM): the float64 reference's cost."""
EPILOGUES = (("none", 4), ("unary", 3), ("gated", 2), ("factor", 2))


def _dims(rng: random.Random, large: bool = False) -> tuple[tuple[int, ...], int, int, int]:
    """(batch dims, m, n, k) within `MAX_FLOP`; `large`: m, n and k of at least 256 (shapes
    the default pipeline's cost model gives the sm_90a GEMM rather than a generated kernel)."""
    while True:
        lead = rng.choice([(), (), (), (2,), (3,), (4,), (2, 3)])
        sizes = [[s for s in sizes if s >= 256] if large else sizes for sizes in (M_SIZES, N_SIZES, K_SIZES)]
        m, n, k = (rng.choice(s) for s in sizes)
        if math.prod(lead) * m * n * k <= MAX_FLOP:
            return lead, m, n, k


def _weight(rng: random.Random, g: Any, lead: tuple[int, ...], k: int, n: int, dtype: str, name: str) -> Any:
    """W [*lead, k, n]: row-major, or stored [*lead, n, k] and read through its strides."""
    strides = None
    if rng.random() < 0.4:  # element (.., kk, nn) at nn * k + kk: the [*lead, n, k] layout, last two swapped
        *outer, s_n, s_k = row_major_strides((*lead, n, k))
        strides = (*outer, s_k, s_n)
    return g.new_input(dims=(*lead, k, n), strides=strides, dtype=dtype, name=name, weight=rng.random() < 0.7)


def _activation(rng: random.Random, g: Any, t: Any) -> Any:
    """One epilogue activation on the GEMM's result `t` (values of magnitude ~sqrt(k) / 12)."""
    op = rng.choice(["relu", "gelu", "silu", "sigmoid", "mul_scalar"])
    if op == "mul_scalar":
        return g.mul_scalar(t, rng.choice([-0.5, 0.25, 2.0]))
    return getattr(g, op)(t)


def random_gemm_graph(rng: random.Random, name: str, dtype: str) -> Any:
    """The module of one GEMM-family graph (module docstring) drawn from `rng`, in `dtype`
    ("float16" or "bfloat16": the sm_90a GEMM takes 16-bit operands).

    Raises:
        ValueError: another dtype.
        GraphBuildError: a builder rule broke (not expected for these shapes).
    """
    from mirage_xdsl.frontends.builder import new_kernel_graph

    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"GEMM-family graphs are fp16 or bf16, not {dtype}")
    g = new_kernel_graph(name)
    lead, m, n, k = _dims(rng, large=rng.random() < 0.7)
    epilogue = rng.choices([e for e, _ in EPILOGUES], weights=[w for _, w in EPILOGUES])[0]
    if epilogue == "gated" and 2 * math.prod(lead) * m * n * k > MAX_FLOP:
        epilogue = "unary"
    x = g.new_input(dims=(*lead, m, k), dtype=dtype, name="X")
    out = g.matmul(x, _weight(rng, g, lead, k, n, dtype, "W"))
    if epilogue == "unary":
        out = _activation(rng, g, out)
    elif epilogue == "gated":
        up = g.matmul(x, _weight(rng, g, lead, k, n, dtype, "W3"))
        out = g.mul(g.silu(out), up)
    elif epilogue == "factor":
        if rng.random() < 0.5:
            out = _activation(rng, g, out)
        out = g.mul(out, g.new_input(dims=(*lead, m, n), dtype=dtype, name="D"))
    g.mark_output(out)
    return g.module


EINSUM_FORMS = (
    ("mk,kn->mn", "m k", "k n"),
    ("mk,nk->mn", "m k", "n k"),
    ("cmk,ckn->cmn", "c m k", "c k n"),
    ("cmk,cnk->cmn", "c m k", "c n k"),
    ("bhqd,bkhd->bhqk", "b h m k", "b n h k"),
    ("abcd,cde->abe", "a b c d", "c d e"),
    ("cmk,ckn,cmn->cmn", "c m k", "c k n"),
    ("aebf,dfce->abcd", "a e b f", "d f c e"),
)
"""(equation, the role of each dim of A, of B): m / n / k take the GEMM sizes; c, b, h, a the
batch; the last two forms need the ELWISE_MUL factor and an operand permute."""
SCHEDULE_OPTIONS = {
    "group_m": (-1, -1, 1, 2, 8),
    "stages": (0, 0, 0, 2, 3, 4),
    "tile_n": (0, 0, 64, 128, 192, 256),
    "tile_m": (0, 0, 0, 64, 128, 256),
    "epilogue": ("", "", "store16", "store4", "tma_store"),
    "cluster": (1, 1, 2),
    "pingpong": (-1, -1, 0, 1),
    "split_k": (0, 0, 0, 1, 2, 3),
    "stream_k": (-1, -1, -1, 0, 1),
}
"""`compile_einsum`'s schedule options and the values drawn (repeats weight "decide")."""


def _einsum_shapes(rng: random.Random, equation: str, roles: tuple[str, str]) -> list[tuple[int, ...]]:
    """Shapes of the einsum's operands (and factor): `_dims`'s sizes given to the dims by role,
    at most `MAX_FLOP` multiply-adds (the product of every role's size)."""
    while True:
        lead, m, n, k = _dims(rng)
        size = {c: rng.choice((1, 2, 3, 4)) for c in "cbha"}
        if lead:
            size["c"] = lead[0]
        size |= {"m": m, "n": n, "k": k}
        if equation.startswith("abcd"):  # rows a*b, contracted c*d (64 wide), columns e
            size |= {"a": 2, "b": max(1, m // 2), "c": max(1, k // 64), "d": min(k, 64), "e": n}
        if equation.startswith("aebf"):  # rows a*b, columns c*d, contracted e*f
            size |= {"a": 2, "b": 64, "c": 2, "d": max(8, n // 2), "e": 2, "f": max(8, k // 2)}
        used = set(roles[0].split()) | set(roles[1].split())
        if math.prod(size[r] for r in used) <= MAX_FLOP:
            shapes = [tuple(size[r] for r in role.split()) for role in roles]
            if equation.count(",") == 2:  # the factor, shaped like the output
                shapes.append(tuple(size[c] for c in roles[0].split()[:-1]) + (size["n"],))
            return shapes


def random_einsum_case(rng: random.Random, name: str, dtype: str, pair_schedules: bool = False) -> tuple[Any, dict[str, Any]]:
    """(einsum module named `name`, schedule options) of one `mx.einsum`-path case (module
    docstring): options the pass accepts for the shape, tried on the CPU (after eight refused
    draws, the pass's own choices); `pair_schedules` (`fuzz_graphs.PAIR_SCHEDULES_SEED`): CTA
    pairs may run under ping-pong and share A, else a drawn ping-pong pair counts as refused
    (the option sets of earlier seeds).

    Raises:
        ValueError: a dtype other than float16 / bfloat16.
    """
    from mirage_xdsl.driver.einsum import lower_einsum
    from mirage_xdsl.frontends.einsum import einsum_module

    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"GEMM-family graphs are fp16 or bf16, not {dtype}")
    equation, role_a, role_b = rng.choice(EINSUM_FORMS)
    module = einsum_module(equation, _einsum_shapes(rng, equation, (role_a, role_b)), dtype, name=name)
    for _ in range(8):
        options = {key: rng.choice(values) for key, values in SCHEDULE_OPTIONS.items()}
        if options["cluster"] == 2 and pair_schedules:
            options["share_a"] = rng.choice((0, 1))
        elif options["cluster"] == 2 and options["pingpong"] == 1:
            continue
        try:
            lower_einsum(module.clone(), **options)
            return module, options
        except Exception:  # noqa: BLE001 - a refused option set: draw another
            continue
    return module, {}
