"""The fuzzer's generator: one VALID random kernel or threadblock graph from a
`random.Random` (`random_graph`), and the hypothesis strategy over it (`graphs`).

Shapes are drawn so that every map divides; values are tracked (magnitude, sign) so that no
op leaves its numerically safe domain (`log`/`sqrt`/`pow`/`div` only see operands bounded
away from 0, `exp` only small ones), hence the float64 reference is finite and the generated
code is held to a tight relative error (`TOLERANCE`).  See `fuzz.py` for what the generator
avoids and why.

Why one module of ~680 lines: the kernel-graph and threadblock-graph generators share the
private value tracker (`_Val`), the op drawers and the seed gates (`Draws`), which decide
together what a recorded seed generates; they stay in one module so those rules read in one place.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

TOLERANCE = {"float16": 1e-2, "bfloat16": 5e-2, "float32": 1e-4}
"""max |out - ref| / max |ref| allowed per dtype (bf16 keeps 8 mantissa bits against fp16's 11)."""


DTYPE_WEIGHTS = (("float16", 6), ("float32", 3), ("bfloat16", 1))


INPUT_SCALE = 0.5
"""inputs are uniform in [-INPUT_SCALE, INPUT_SCALE) (`runtime.random_inputs.random_inputs`)."""


EXP_MAX_SCALE = 2.5
"""`exp` (and sigmoid's positivity) only on values of magnitude <= this: exp keeps fp16's
relative error near the operand's and never overflows."""


MUL_MAX_SCALE = 1000.0
"""`mul` and `square` only where the product's magnitude stays far inside fp16's range
(65504): the float64 reference does not overflow, the generated code would."""


class FuzzGenerationError(RuntimeError):
    """The generator could not build a valid graph from this random state (a generator bug)."""


@dataclass
class _Val:
    """A builder tensor and what the generator knows of its values: `scale` bounds the
    typical magnitude, `pos` means positive and bounded away from 0 (>= ~0.05)."""

    t: Any
    scale: float
    pos: bool = False
    parent: Any = None
    """the value a unary op was applied to (sub(a, silu(a)) cancels: not generated)"""
    operands: tuple[Any, ...] = ()
    """the values a binary op combined (a - (a + m) cancels: not generated from
    `OPERAND_GUARD_SEED` on)"""
    one_sign: bool = False
    """all values share one sign (relu, square, exp, ...): their sums grow with the count, not
    with its square root (`sum_scale`)"""

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's dims (elements)."""
        return tuple(self.t.dims)


def sum_scale(v: _Val, n: float) -> float:
    """The typical magnitude of a sum of `n` values like `v`: the count times `v.scale` when
    they share one sign (a sum of relu outputs grows linearly), else a random walk's
    sqrt(n), with margin."""
    return v.scale * (n if v.one_sign or v.pos else math.sqrt(n) * 1.5)


def _choice(rng: random.Random, weighted: Sequence[tuple[Any, int]]) -> Any:
    items = [w[0] for w in weighted]
    return rng.choices(items, weights=[w[1] for w in weighted])[0]


def _broadcastable(a: Sequence[int], b: Sequence[int]) -> bool:
    return len(a) == len(b) and all(x == y or x == 1 or y == 1 for x, y in zip(a, b))


def _unary(rng: random.Random, g: Any, v: _Val) -> _Val:
    """One random elementwise unary op of graph `g` (KNGraph or TBGraph) on `v`, within the
    op's safe domain."""
    out = _unary_op(rng, g, v)
    out.parent = v
    return out


def _unary_op(rng: random.Random, g: Any, v: _Val) -> _Val:
    ops = ["silu", "gelu", "relu", "clamp", "mul_scalar"]
    if v.scale <= MUL_MAX_SCALE**0.5:
        ops.append("square")
    if v.scale <= EXP_MAX_SCALE:
        ops += ["exp", "sigmoid"]
    if v.pos:
        ops += ["sqrt", "log"]
    op = rng.choice(ops)
    if op == "exp":
        return _Val(g.exp(v.t), math.exp(v.scale), True)
    if op == "sigmoid":
        return _Val(g.sigmoid(v.t), 1.0, True)
    if op == "square":
        return _Val(g.square(v.t), v.scale * v.scale, False, one_sign=True)
    if op == "sqrt":
        return _Val(g.sqrt(v.t), math.sqrt(v.scale), True)
    if op == "log":
        return _Val(g.log(v.t), max(3.0, math.log(max(v.scale, 1.0))), False)
    if op == "silu":
        return _Val(g.silu(v.t), v.scale, False)
    if op == "gelu":
        return _Val(g.gelu(v.t), v.scale, False)
    if op == "relu":
        return _Val(g.relu(v.t), v.scale, False, one_sign=True)
    if op == "clamp":
        # bounds relative to the operand's magnitude: clamping to far below it would leave
        # outputs whose max is smaller than the rounding error of what fed the clamp
        lo = rng.choice([-1.0, -0.5, -0.25, 0.0]) * max(v.scale, 1.0)
        hi = rng.choice([0.25, 0.5, 1.0]) * max(v.scale, 1.0)
        return _Val(g.clamp(v.t, lo, hi), min(v.scale, max(abs(lo), hi)), False)
    c = rng.choice([-2.0, -0.5, 0.125, 0.5, 2.0])
    return _Val(g.mul_scalar(v.t, c), v.scale * abs(c), v.pos and c > 0, one_sign=v.one_sign or v.pos)


def _binary(rng: random.Random, g: Any, a: _Val, b: _Val, operand_guard: bool = False) -> _Val:
    """One random elementwise binary op on broadcastable `a`, `b` within its safe domain
    (`operand_guard`: `Draws.operand_guard`)."""
    out = _binary_op(rng, g, a, b, operand_guard)
    if out.parent is None:  # not the unary fallback
        out.operands = (a, b)
    return out


def _binary_op(rng: random.Random, g: Any, a: _Val, b: _Val, operand_guard: bool) -> _Val:
    related = a is b or a.parent is b or b.parent is a or (a.parent is not None and a.parent is b.parent)
    if operand_guard:
        related = related or any(v is b for v in a.operands) or any(v is a for v in b.operands)
    # a +- f(a) can cancel to far below the operands' rounding error (a - silu(a) for large a)
    ops = [] if related else ["add", "sub"]
    if a.scale * b.scale <= MUL_MAX_SCALE:
        ops.append("mul")
    if b.pos:
        ops.append("div")
    if a.pos and b.scale <= 2.0 and not related:
        ops.append("pow")
    if not ops:
        return _unary(rng, g, a)
    op = rng.choice(ops)
    if op == "add":
        return _Val(g.add(a.t, b.t), a.scale + b.scale, a.pos and b.pos)
    if op == "sub":
        return _Val(g.sub(a.t, b.t), a.scale + b.scale, False)
    if op == "mul":
        return _Val(g.mul(a.t, b.t), a.scale * b.scale, a.pos and b.pos)
    if op == "div":
        return _Val(g.div(a.t, b.t), a.scale * 10.0, a.pos and b.pos)
    return _Val(g.pow(a.t, b.t), max(a.scale, 1.0) ** b.scale + 1.0, True)


def _matmul_scale(a: _Val, b: _Val, k: int) -> float:
    # sum of k products of magnitude a.scale * b.scale: random signs, or one sign when both are
    if (a.one_sign or a.pos) and (b.one_sign or b.pos):
        return a.scale * b.scale * k
    return a.scale * b.scale * math.sqrt(k) * 1.2


FORK_SEED = 1138
"""Fuzz runs from this seed on draw kernel graphs that may fork (`Draws.forks`);
earlier seeds draw the graphs they drew when their failures were recorded (the regression
tests regenerate those from their seed and index)."""


ROW_OPS_SEED = 1162
"""Fuzz runs from this seed on also draw the row ops of issue #30's programs in kernel graphs:
a numerically stable softmax (`kn.reduction_max`, optionally after a `kn.causal_mask`), a row
max, and a `kn.concat` with another input (`_row_op`); earlier seeds draw what they drew."""


VIEW_OPS_SEED = 1172
"""Fuzz runs from this seed on also draw view ops in kernel graphs (`_view_op`): `kn.chunk` (one
projection split into SwiGLU's gate and up halves; rotary embedding's rotate-half, `x * cos +
concat(-x2, x1) * sin`) and `kn.reshape` (two dims merged, or one split in two); earlier seeds
draw what they drew."""

PAIR_SCHEDULES_SEED = 4
"""GEMM-family runs from this seed on let einsum cases draw CTA pairs under ping-pong
(`pingpong=1, cluster=2`) and pairs sharing A (`share_a=1`); earlier seeds draw the option sets
they drew before the pass accepted those (`fuzz_gemms.random_einsum_case`)."""

OPERAND_GUARD_SEED = 1187
"""Mixed runs from this seed on add and subtract no two values of which one is an operand of
the other's binary op (`x - (x + m)` cancels to far below the operands' rounding error: seed
1184 graph 94, a mismatch of the judge's); earlier seeds draw what they drew."""

TC_CONSTANTS_SEED = 6
"""Tensor Comprehensions runs from this seed on also add constants to values (`x + c`, `c - x`,
`sqrt(x * x + c)`: `kn.add_scalar`; `fuzz_tc._unary`); earlier seeds draw what they drew."""

TC_ACCUMULATE_SEED = 10
"""Tensor Comprehensions runs from this seed on forget the bound of a value that `+=` then
grew (later expressions read the sum, whose bound is larger); earlier seeds draw what they drew."""


@dataclass(frozen=True)
class Draws:
    """What a fuzz run's random graphs may contain beyond the first seeds' draws.  Each feature
    starts at a seed (`of_seed`), so earlier seeds draw the graphs they drew when their failures
    were recorded (the regression tests regenerate those from their seed and index)."""

    forks: bool = False
    """kernel graphs may fork: two matmuls of one value (an RMSNorm's, at times) combined
    elementwise, the gate and up projections of a gated MLP (`FORK_SEED`)"""
    row_ops: bool = False
    """with `forks`: softmax, row max and concat steps (`ROW_OPS_SEED`)"""
    view_ops: bool = False
    """with `forks`: chunk and reshape steps (`VIEW_OPS_SEED`)"""
    pair_schedules: bool = False
    """GEMM family: einsum cases may draw the CTA-pair schedules (`PAIR_SCHEDULES_SEED`)"""
    tc_constants: bool = False
    """Tensor Comprehensions family: constants added to values (`TC_CONSTANTS_SEED`)"""
    tc_accumulate: bool = False
    """Tensor Comprehensions family: an accumulated value keeps only the sum's bound
    (`TC_ACCUMULATE_SEED`)"""
    operand_guard: bool = False
    """mixed family: no add / sub of a value and a binary op's result it is an operand of
    (`OPERAND_GUARD_SEED`)"""

    @classmethod
    def of_seed(cls, seed: int, family: str = "mixed") -> Draws:
        """The draws of run `seed` of `family` ('mixed', 'gemm', 'attention' or 'tc')."""
        if family == "gemm":
            return cls(pair_schedules=seed >= PAIR_SCHEDULES_SEED)
        if family == "tc":
            return cls(tc_constants=seed >= TC_CONSTANTS_SEED, tc_accumulate=seed >= TC_ACCUMULATE_SEED)
        if family == "mixed":
            return cls(
                forks=seed >= FORK_SEED,
                row_ops=seed >= ROW_OPS_SEED,
                view_ops=seed >= VIEW_OPS_SEED,
                operand_guard=seed >= OPERAND_GUARD_SEED,
            )
        return cls()


FIRST_DRAWS = Draws()
"""The draws of the first seeds of every family (nothing added)."""


def _view_op(rng: random.Random, g: Any, cur: _Val, dtype: str, operand_guard: bool = False) -> _Val:
    """One view op on `cur` (see `VIEW_OPS_SEED`), or a unary op where none applies."""
    shape = cur.shape
    last = len(shape) - 1
    op = rng.choice(["gate", "rotary", "reshape", "reshape"])
    if op in ("gate", "rotary") and shape[-1] % 2 == 0:
        x1, x2 = (_Val(t, cur.scale, cur.pos, one_sign=cur.one_sign) for t in g.chunk(cur.t, 2, last))
        if op == "gate":  # a fused gate-and-up projection's halves
            return _binary(rng, g, _unary(rng, g, x1), x2, operand_guard)
        # rotary embedding: cos and sin inputs broadcast over some leading dims
        angles = [tuple(1 if d < last and rng.random() < 0.35 else n for d, n in enumerate(shape)) for _ in range(2)]
        cos, sin = (g.new_input(dims=dims, dtype=dtype) for dims in angles)
        rotated = g.concat(g.mul_scalar(x2.t, -1.0), x1.t, last)
        return _Val(g.add(g.mul(cur.t, cos), g.mul(rotated, sin)), 2.0 * cur.scale * INPUT_SCALE)
    shapes = []
    if len(shape) >= 3:
        shapes.append((shape[0] * shape[1], *shape[2:]))  # merge the two leading dims
    if len(shape) <= 3 and shape[-1] % 2 == 0 and shape[-1] >= 32:
        shapes.append((*shape[:-1], 2, shape[-1] // 2))  # split the last dim (heads x head dim)
        shapes.append((*shape[:-2], shape[-2] * 2, shape[-1] // 2) if len(shape) >= 2 else (2, shape[-1] // 2))
    if not shapes:
        return _unary(rng, g, cur)
    return _Val(g.reshape(cur.t, rng.choice(shapes)), cur.scale, cur.pos, one_sign=cur.one_sign)


def _row_op(rng: random.Random, g: Any, cur: _Val, dtype: str) -> _Val:
    """One row op on `cur` (see `ROW_OPS_SEED`), or a unary op where none applies."""
    shape = cur.shape
    last = len(shape) - 1
    op = rng.choice(["softmax", "softmax", "row_max", "concat"])
    if op == "concat" and shape[-1] <= 256:
        dim = rng.randrange(len(shape))
        other = _Val(g.new_input(dims=shape, dtype=dtype), INPUT_SCALE)
        a, b = (cur, other) if rng.random() < 0.5 else (other, cur)
        return _Val(g.concat(a.t, b.t, dim), max(cur.scale, INPUT_SCALE), cur.pos and other.pos)
    if shape[-1] == 1:
        return _unary(rng, g, cur)
    if op == "row_max":
        return _Val(g.reduction_max(cur.t, last), cur.scale, cur.pos)
    from mirage_xdsl.bench.suite.graphs import stable_softmax_rows

    x = cur.t
    if len(shape) >= 2 and 1 < shape[-2] <= shape[-1] and rng.random() < 0.4:
        x = g.causal_mask(x)  # bottom-right aligned: every row keeps at least one element
    e, z = stable_softmax_rows(g, x, last)
    return _Val(g.div(e, z), 1.0, False, one_sign=True)


def _kernel_graph(rng: random.Random, name: str, dtype: str, draws: Draws) -> Any:
    from mirage_xdsl.frontends.builder import new_kernel_graph

    g = new_kernel_graph(name)
    batch = rng.choice([None, None, None, 2, 3])
    lead = () if batch is None else (batch,)
    m = rng.choice([1, 2, 4, 8, 16, 32])
    k = rng.choice([64, 128, 256])
    x = _Val(g.new_input(dims=(*lead, m, k), dtype=dtype, name="X"), INPUT_SCALE)
    pool = [x]
    cur = x
    forks = draws.forks
    later_steps = [("row_op", 3)] if draws.row_ops else []
    later_steps += [("view_op", 2)] if draws.view_ops else []
    for _ in range(rng.randint(1, 4)):
        steps = [("matmul", 4), ("rms_norm", 2), ("unary", 3), ("binary_input", 2), ("binary_pool", 1), ("reduction", 1)]
        step = _choice(rng, steps + [("fork", 1)] + later_steps if forks else steps)
        shape = cur.shape
        if forks and step == "rms_norm" and shape[-1] >= 8 and rng.random() < 0.3:
            step = "norm_fork"  # an RMSNorm read by two matmuls: the decoder layer's shape
        if step == "norm_fork":
            cur = _Val(g.rms_norm(cur.t, (shape[-1],)), 2.0)
            step = "fork"
        if step == "fork":
            # two matmuls of one value combined elementwise (a gated MLP's gate and up
            # projections; after an rms_norm, the shared statistic kn-simplify copies per matmul)
            n = rng.choice([16, 64, 128])
            w1, w2 = (
                _Val(g.new_input(dims=(*shape[:-2], shape[-1], n), dtype=dtype, weight=True), INPUT_SCALE) for _ in range(2)
            )
            a = _Val(g.matmul(cur.t, w1.t), _matmul_scale(cur, w1, shape[-1]))
            b = _Val(g.matmul(cur.t, w2.t), _matmul_scale(cur, w2, shape[-1]))
            cur = _binary(rng, g, _unary(rng, g, a) if rng.random() < 0.5 else a, b, draws.operand_guard)
        elif step == "matmul":
            n = rng.choice([16, 64, 128, 256])
            w = _Val(g.new_input(dims=(*shape[:-2], shape[-1], n), dtype=dtype, weight=rng.random() < 0.5), INPUT_SCALE)
            cur = _Val(g.matmul(cur.t, w.t), _matmul_scale(cur, w, shape[-1]))
        elif step == "rms_norm" and shape[-1] >= 8:
            # not over a few elements: x / sqrt(mean(x^2)) of one tiny value (gelu of a large
            # negative sum) underflows x^2 in fp32 to 0 / 0, where float64 does not
            cur = _Val(g.rms_norm(cur.t, (shape[-1],)), 2.0)
        elif step == "rms_norm":
            cur = _unary(rng, g, cur)
        elif step == "unary":
            cur = _unary(rng, g, cur)
        elif step == "row_op":
            cur = _row_op(rng, g, cur, dtype)
        elif step == "view_op":
            cur = _view_op(rng, g, cur, dtype, draws.operand_guard)
        elif step == "binary_input":
            bshape = list(shape)
            for d in range(len(bshape)):
                if rng.random() < 0.35:
                    bshape[d] = 1
            other = g.new_input(dims=tuple(bshape), dtype=dtype)
            b = _Val(other, INPUT_SCALE)
            if rng.random() < 0.3:
                b = _unary(rng, g, b)
            a, b = (cur, b) if rng.random() < 0.7 else (b, cur)
            cur = _binary(rng, g, a, b, draws.operand_guard)
        elif step == "binary_pool":
            others = [p for p in pool if p is not cur and _broadcastable(p.shape, shape)]
            if not others:
                cur = _unary(rng, g, cur)
            else:
                cur = _binary(rng, g, cur, rng.choice(others), draws.operand_guard)
        else:
            last = shape[-1]
            size = rng.choice([s for s in (1, 1, 16, 32) if last % s == 0 and s < last] or [1])
            cur = _Val(g.reduction(cur.t, len(shape) - 1, size), sum_scale(cur, last // size))
        pool.append(cur)
    g.mark_output(cur.t)
    if len(pool) > 2 and rng.random() < 0.2:
        extra = rng.choice(pool[1:-1])
        g.mark_output(extra.t)
    return g.module


@dataclass
class _Block:
    """A threadblock graph under construction with its tracked values."""

    g: Any
    tb: Any
    dtype: str
    inputs: list[Any] = field(default_factory=list)
    loop: list[_Val] = field(default_factory=list)
    after: list[_Val] = field(default_factory=list)
    operand_guard: bool = False
    """`Draws.operand_guard`"""

    def new_input(self, dims: tuple[int, ...], imap: tuple[int, int, int], fdim: int, name: str, weight: bool = False) -> _Val:
        """A graph input of `dims` (the block's dtype; `weight`: marked kn.weight) loaded by a
        `tb.input` with grid map `imap` (x, y, z; -1 = replicated) and for-loop dim `fdim` (-1 =
        loaded once); its tile (magnitude `INPUT_SCALE`), appended to the loop values.

        Raises:
            GraphBuildError: the maps or the for-loop do not divide `dims` (a builder rule)."""
        d = self.g.new_input(dims=dims, dtype=self.dtype, name=name, weight=weight)
        self.inputs.append(d)
        v = _Val(self.tb.new_input(d, input_map=imap, forloop_dim=fdim), INPUT_SCALE)
        self.loop.append(v)
        return v


def _accumulate(rng: random.Random, blk: _Block, v: _Val, rescale: _Val | None) -> _Val:
    """A forloop accumulator of a random kind valid for `v` (rescale kinds when `rescale`)."""
    tb = blk.tb
    iters = tb.forloop_range
    last = v.shape[-1]
    if rescale is not None and _broadcastable(rescale.shape, v.shape) and rng.random() < 0.7:
        kind = rng.choice([None, "sum"])
        acc = tb.forloop_accum_rescale(v.t, rescale.t, kind)
        return _Val(acc, v.scale * iters * (last if kind else 1), False)
    kinds = [None, None, "sum", "mean", "rms", "max"]
    if last % tb.reduction_dimx == 0:
        kinds.append("sum_todimx")
    kind = rng.choice(kinds)
    if kind is None:
        return _Val(tb.forloop_accum(v.t), sum_scale(v, iters), v.pos, one_sign=v.one_sign)
    if kind == "max":
        return _Val(tb.forloop_accum_max(v.t), v.scale, v.pos)
    acc = tb.forloop_accum(v.t, kind)
    if kind == "sum":
        return _Val(acc, sum_scale(v, iters * last), v.pos, one_sign=v.one_sign)
    if kind == "mean":
        return _Val(acc, v.scale, v.pos)
    if kind == "rms":
        # rms of a tile row of >= 8 elements drawn from a nonzero distribution: away from 0
        return _Val(acc, v.scale, True)
    return _Val(acc, sum_scale(v, iters * last / tb.reduction_dimx), v.pos, one_sign=v.one_sign)


def _loop_ops(rng: random.Random, blk: _Block, steps: int) -> None:
    """Random elementwise ops, reductions, rms_norm and concat inside the for-loop."""
    tb = blk.tb
    for _ in range(steps):
        op = _choice(rng, [("unary", 4), ("binary", 4), ("reduction", 1), ("rms_norm", 1), ("concat", 1)])
        a = rng.choice(blk.loop)
        if op == "unary":
            blk.loop.append(_unary(rng, tb, a))
        elif op == "binary":
            others = [b for b in blk.loop if _broadcastable(a.shape, b.shape)]
            blk.loop.append(_binary(rng, tb, a, rng.choice(others), blk.operand_guard))
        elif op == "reduction":
            dims = [d for d, n in enumerate(a.shape) if n > 1]
            if dims:
                d = rng.choice(dims)
                blk.loop.append(_Val(tb.reduction(a.t, d), sum_scale(a, a.shape[d]), a.pos, one_sign=a.one_sign))
        elif op == "rms_norm":
            if a.shape[-1] >= 8:
                blk.loop.append(_Val(tb.rms_norm(a.t), 2.0))
        else:
            dim = len(a.shape) - 1 if rng.random() < 0.7 else 0
            others = [
                b
                for b in blk.loop
                if len(b.shape) == len(a.shape) and all(x == y for i, (x, y) in enumerate(zip(a.shape, b.shape)) if i != dim)
            ]
            b = rng.choice(others)
            blk.loop.append(_Val(tb.concat(a.t, b.t, dim), max(a.scale, b.scale), a.pos and b.pos))


def _after_ops(rng: random.Random, blk: _Block, steps: int) -> None:
    """Random elementwise ops (and rms_norm) on accumulator results after the loop."""
    tb = blk.tb
    for _ in range(steps):
        a = rng.choice(blk.after)
        others = [b for b in blk.after if b is not a and _broadcastable(a.shape, b.shape)]
        r = rng.random()
        if others and r < 0.55:
            blk.after.append(_binary(rng, tb, a, rng.choice(others), blk.operand_guard))
        elif r < 0.9 or a.shape[-1] < 8:
            blk.after.append(_unary(rng, tb, a))
        else:
            blk.after.append(_Val(tb.rms_norm(a.t), 2.0))


def _outputs(rng: random.Random, blk: _Block, omap: tuple[int, int, int]) -> None:
    """Store the last after-loop value and maybe another one; `omap` maps the grid axes."""
    tb = blk.tb
    chosen = [blk.after[-1]]
    rest = [v for v in blk.after[:-1]]
    if rest and rng.random() < 0.3:
        chosen.append(rng.choice(rest))
    for v in chosen:
        rank = len(v.shape)
        tb.new_output(v.t, output_map=tuple(d if d < rank else -1 for d in omap))


def _block_stream(rng: random.Random, blk: _Block) -> tuple[int, int, int]:
    """Row-wise streams: X [gx*m, gy*R*l] tiled [m, l] per block and iteration, plus maybe a
    second such input, a broadcast row [1, gy*R*l] and a loop-invariant [gx*m, l] input;
    random loop ops, 1-3 accumulators (rescale kinds behind a reduction_max), after-loop ops."""
    tb = blk.tb
    gx, gy, _ = tb.grid_dim
    iters = tb.forloop_range
    m = rng.choice([1, 8, 16, 32, 64]) if gx == 1 else rng.choice([8, 16, 32])
    l = rng.choice([16, 32, 64, 128])
    ymap = 1 if gy > 1 else -1
    blk.new_input((gx * m, gy * iters * l), (0, ymap, -1), 1, "X")
    if rng.random() < 0.5:
        blk.new_input((gx * m, gy * iters * l), (0, ymap, -1), 1, "Y")
    if rng.random() < 0.3:
        blk.new_input((1, gy * iters * l), (-1, ymap, -1), 1, "R", weight=True)
    if rng.random() < 0.25:
        blk.new_input((gx * m, l), (0, -1, -1), -1, "C")
    _loop_ops(rng, blk, rng.randint(0, 4))
    rescale = None
    if rng.random() < 0.3:
        src = rng.choice([v for v in blk.loop if v.shape[-1] > 1] or blk.loop)
        mx, diff = tb.reduction_max(src.t, len(src.shape) - 1)
        rescale = _Val(tb.exp(diff), 1.0, False)
        if rng.random() < 0.5:
            # online softmax: the values shifted by the running max stay <= 0 before exp
            blk.loop.append(_Val(tb.exp(tb.sub(src.t, mx)), 1.0, False))
    for _ in range(rng.randint(1, 3)):
        v = blk.loop[-1] if not blk.after else rng.choice(blk.loop)
        blk.after.append(_accumulate(rng, blk, v, rescale))
    _after_ops(rng, blk, rng.randint(0, 3))
    return (0, 1, -1)


def _block_matmul(rng: random.Random, blk: _Block) -> tuple[int, int, int]:
    """X [gy*m, R*k] @ W [R*k, gx*n]: grid x over W's columns, y over X's rows, the loop over
    K; maybe an elementwise prologue on X (a broadcast scale row), an epilogue in the loop,
    an rms accumulator of X (rmsnorm-linear), other accumulator kinds, after-loop ops."""
    tb = blk.tb
    gx, gy, _ = tb.grid_dim
    iters = tb.forloop_range
    m = rng.choice([1, 2, 8, 16, 32, 64])
    k = rng.choice([16, 32, 64, 128])
    n = rng.choice([8, 16, 32, 64, 128])
    x = blk.new_input((gy * m, iters * k), (-1, 0 if gy > 1 else -1, -1), 1, "X")
    w = blk.new_input((iters * k, gx * n), (1, -1, -1), 0, "W", weight=rng.random() < 0.5)
    a = x
    if rng.random() < 0.3:
        s = blk.new_input((1, iters * k), (-1, -1, -1), 1, "S", weight=True)
        a = _binary(rng, tb, a, s, blk.operand_guard)
    if rng.random() < 0.3:
        a = _unary(rng, tb, a)
    p = _Val(tb.matmul(a.t, w.t), _matmul_scale(a, w, k))
    blk.loop.append(p)
    if rng.random() < 0.3:
        p = _unary(rng, tb, p)
        blk.loop.append(p)
    if rng.random() < 0.3:
        acc = _accumulate(rng, blk, p, None)
    else:
        acc = _Val(tb.forloop_accum(p.t), sum_scale(p, iters), p.pos, one_sign=p.one_sign)
    blk.after.append(acc)
    if rng.random() < 0.4:
        r = _Val(tb.forloop_accum(x.t, "rms"), INPUT_SCALE, True)
        blk.after.append(r)
        if acc.shape[-1] > 1 or rng.random() < 0.5:
            blk.after.append(_Val(tb.div(acc.t, r.t), acc.scale * 10.0))
    _after_ops(rng, blk, rng.randint(0, 2))
    return (1, 0, -1)


def _block_attention(rng: random.Random, blk: _Block) -> tuple[int, int, int]:
    """Flash-attention style: Q [B, gy*mq, d] (loaded once), K [B, d, R*lk], V [B, R*lk, dv];
    grid x over the batch, y over Q's rows, the loop over keys; S = Q @ K (maybe scaled),
    running max, exp(S - m), rescale accumulators of the row sums and of P @ V."""
    tb = blk.tb
    gx, gy, _ = tb.grid_dim
    iters = tb.forloop_range
    mq = rng.choice([8, 16, 32, 64])
    d = rng.choice([16, 32, 64])
    lk = rng.choice([16, 32, 64])
    dv = rng.choice([16, 32, 64])
    q = blk.new_input((gx, gy * mq, d), (0, 1 if gy > 1 else -1, -1), -1, "Q")
    k = blk.new_input((gx, d, iters * lk), (0, -1, -1), 2, "K")
    v = blk.new_input((gx, iters * lk, dv), (0, -1, -1), 1, "V")
    s = _Val(tb.matmul(q.t, k.t), _matmul_scale(q, k, d))
    if rng.random() < 0.5:
        s = _Val(tb.mul_scalar(s.t, 1.0 / math.sqrt(d)), s.scale / math.sqrt(d))
    mx, diff = tb.reduction_max(s.t, 2)
    e = _Val(tb.exp(tb.sub(s.t, mx)), 1.0, False)
    r = _Val(tb.exp(diff), 1.0, False)
    blk.loop += [s, e, r]
    form = rng.choice(["softmax_v", "softmax_v", "sum_only", "v_only", "max"])
    o = _Val(tb.forloop_accum_rescale(tb.matmul(e.t, v.t), r.t), lk * iters * INPUT_SCALE)
    if form == "softmax_v":
        total = _Val(tb.forloop_accum_rescale(e.t, r.t, "sum"), lk * iters, True)
        blk.after += [o, total, _Val(tb.div(o.t, total.t), INPUT_SCALE)]
    elif form == "sum_only":
        blk.after.append(_Val(tb.forloop_accum_rescale(e.t, r.t, "sum"), lk * iters, True))
    elif form == "v_only":
        blk.after.append(o)
    else:
        blk.after.append(_Val(tb.forloop_accum_max(s.t), s.scale))
    _after_ops(rng, blk, rng.randint(0, 1))
    return (0, 1, -1)


def _block_graph(rng: random.Random, name: str, dtype: str, draws: Draws = Draws()) -> Any:
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph(name)
    template = _choice(rng, [(_block_stream, 5), (_block_matmul, 3), (_block_attention, 2)])
    gx = rng.choice([1, 2, 4])
    gy = rng.choice([1, 1, 2])
    iters = rng.choice([1, 2, 3, 4, 8])
    rdx = rng.choice([16, 32, 64])
    tb = new_threadblock_graph(grid_dim=(gx, gy, 1), block_dim=(128, 1, 1), forloop_range=iters, reduction_dimx=rdx)
    blk = _Block(g, tb, dtype, operand_guard=draws.operand_guard)
    omap = template(rng, blk)
    _outputs(rng, blk, omap)
    for out in g.customized(blk.inputs, tb):
        g.mark_output(out)
    return g.module


@dataclass
class FuzzCase:
    """One generated graph: the module holds one function `name`."""

    name: str
    kind: str
    """'kernel' (plain kn ops, fused by kn-fuse), 'block' (a kn.customized threadblock graph),
    'gemm' (large matmuls with epilogues for the sm_90a GEMM), 'einsum' (a contraction for
    `mx.einsum`'s path with random schedule options; both `fuzz_gemms.py`) or 'attention'
    (for the sm_90a attention kernels, `fuzz_attention.py`)"""
    dtype: str
    module: Any
    options: dict[str, Any] = field(default_factory=dict)
    """'einsum' cases: the `compile_einsum` schedule options they are lowered with; 'attention'
    cases: the kernel they force (`fuzz_attention.lower_attention_case`)"""

    def __repr__(self) -> str:  # the module is printed where it matters (failure messages, .mlir files)
        return f"FuzzCase({self.name!r}, {self.kind!r}, {self.dtype!r})"


def random_graph(
    rng: random.Random,
    name: str = "fuzz",
    kind: str | None = None,
    dtype: str | None = None,
    draws: Draws = Draws(),
) -> FuzzCase:
    """A valid random kernel graph drawn from `rng` (the same draws give the same graph).

    `kind` 'kernel', 'block', 'gemm', 'einsum' or 'attention' and `dtype` fix those choices
    instead of drawing them (the last three are never drawn; their dtype is fp16 or bf16); `draws`
    adds what later seeds may contain (`Draws`).

    Raises:
        FuzzGenerationError: ten attempts in a row broke a builder rule (a generator bug).
    """
    from mirage_xdsl.frontends.builder_common import GraphBuildError

    kind = kind or ("block" if rng.random() < 0.6 else "kernel")
    dtype = dtype or (rng.choice(("float16", "bfloat16")) if kind in ("gemm", "einsum", "attention") else _choice(rng, DTYPE_WEIGHTS))
    last: Exception | None = None
    for _ in range(10):
        try:
            if kind == "einsum":
                from mirage_xdsl.bench.fuzz_gemms import random_einsum_case

                module, options = random_einsum_case(rng, name, dtype, draws.pair_schedules)
                return FuzzCase(name, kind, dtype, module, options)
            if kind == "attention":
                from mirage_xdsl.bench.fuzz_attention import random_attention_graph

                module, options = random_attention_graph(rng, name, dtype)
                return FuzzCase(name, kind, dtype, module, options)
            if kind == "gemm":
                from mirage_xdsl.bench.fuzz_gemms import random_gemm_graph

                module = random_gemm_graph(rng, name, dtype)
            else:
                module = _block_graph(rng, name, dtype, draws) if kind == "block" else _kernel_graph(rng, name, dtype, draws)
            return FuzzCase(name, kind, dtype, module)
        except GraphBuildError as err:  # a draw the templates do not exclude: draw again
            last = err
    raise FuzzGenerationError(f"{kind} graph: no valid graph in 10 attempts; last: {last}")


def graphs(name: str = "fuzz") -> Any:
    """A hypothesis strategy of `FuzzCase`s: `random_graph` on a hypothesis-controlled
    `random.Random` (draws are recorded and shrunk by hypothesis).  Needs hypothesis."""
    from hypothesis import strategies as st

    return st.randoms(use_true_random=False, note_method_calls=False).map(lambda r: random_graph(r, name))
