"""Differential fuzzing of random kernel and threadblock graphs (issue #29, item 2).

`random_graph(rng)` builds one VALID random graph through the Python builder
(`frontends/builder.py`) from a `random.Random`: either a plain kernel graph (kn ops that
the default pipeline fuses with kn-fuse) or a hand-written threadblock graph (one
`kn.customized` op with grid, for-loop, input/output maps, tb ops and every forloop
accumulator kind, the rescale ones driven by `exp(diff)` of a `tb.reduction_max`).  Shapes are
drawn so that every map divides; values are tracked (magnitude, sign) so that no op leaves
its numerically safe domain (`log`/`sqrt`/`pow`/`div` only see operands bounded away from 0,
`exp` only small ones), hence the float64 reference is finite and the generated code is held
to a tight relative error.

The same generator drives both users:

* the hypothesis strategy `graphs()` (`st.randoms` feeding `random_graph`, so hypothesis
  records and shrinks the draws): the CPU differential test `test/test_fuzz_differential.py`
  runs a fixed number of derandomized examples through the host emulator;
* the command `python -m mirage_xdsl.bench.fuzz --count N --seed S`: graph `i` of seed `S` is
  `random_graph(random.Random(f"{S}:{i}"))`, compiled in a process pool (pipeline,
  `emit_cuda`, nvcc; `--batch B` graphs per translation unit), run on the GPU through
  `CompiledGraph` with NaN-poisoned outputs (or on the CPU with `--emulate`), compared with
  `run_reference`; failing graphs are written as `.mlir` files (reproduce one with
  `mirage-run FILE --check`, or `--seed S --only I`).  Exit status 1 on any mismatch or crash.

Outcome of one graph (`Outcome.status`):

* `ok`: outputs within `TOLERANCE[dtype]` (max |out - ref| / max |ref|) of the reference,
  plus the rounding noise (`compare`);
* `rejected`: the compiler refused the graph with a user-facing error
  (`SharedMemoryExceeded`, or another located `DiagnosticException` of a pass or the
  printer, e.g. `PassFailedException`) -- counted by reason, not a failure;
* `mismatch`: wrong numbers, or NaN where the reference has none (unwritten output);
* `crash`: any other exception (a compiler bug), a host/nvcc build failure of generated
  code, or a batch that timed out / killed its worker.

hypothesis is a dev dependency: it is imported only by `graphs()` (the command line does not
need it).

On a GPU machine (`pip install -e '.[dev,cuda]'`):

    python -m mirage_xdsl.bench.fuzz --count 1000 --seed 1 --batch 8 --report fuzz.json

The workers (CPUs - 1) lower, print, nvcc and run the reference (about 0.5 s of CPU a graph
in batches of 8); the main process loads and runs each cubin.  Without a GPU add `--emulate`
(about 0.7 s a graph on 2 cores, the host C++ build dominating).

What the generator avoids because the comparison could not judge it (not compiler bugs):
cancellation (`a - f(a)` with f near the identity, e.g. `x - silu(x)` for large x, leaves
outputs far below the operands' rounding error), products beyond fp16's range (the float64
reference does not overflow), and clamps far inside the operand's range.  Cancellation
that slips through (sums of mixed-sign values, `m + s - s`) is allowed for: each output may
also be off by `NOISE_FACTOR` times its rounding noise, the distance between the float64
reference and the reference with every intermediate rounded to its storage type.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import re
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

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


# ---------------------------------------------------------------------------------------
# Values tracked by the generator


@dataclass
class _Val:
    """A builder tensor and what the generator knows of its values: `scale` bounds the
    typical magnitude, `pos` means positive and bounded away from 0 (>= ~0.05)."""

    t: Any
    scale: float
    pos: bool = False
    parent: Any = None
    """the value a unary op was applied to (sub(a, silu(a)) cancels: not generated)"""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.t.dims)


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
        return _Val(g.square(v.t), v.scale * v.scale, False)
    if op == "sqrt":
        return _Val(g.sqrt(v.t), math.sqrt(v.scale), True)
    if op == "log":
        return _Val(g.log(v.t), max(3.0, math.log(max(v.scale, 1.0))), False)
    if op == "silu":
        return _Val(g.silu(v.t), v.scale, False)
    if op == "gelu":
        return _Val(g.gelu(v.t), v.scale, False)
    if op == "relu":
        return _Val(g.relu(v.t), v.scale, False)
    if op == "clamp":
        # bounds relative to the operand's magnitude: clamping to far below it would leave
        # outputs whose max is smaller than the rounding error of what fed the clamp
        lo = rng.choice([-1.0, -0.5, -0.25, 0.0]) * max(v.scale, 1.0)
        hi = rng.choice([0.25, 0.5, 1.0]) * max(v.scale, 1.0)
        return _Val(g.clamp(v.t, lo, hi), min(v.scale, max(abs(lo), hi)), False)
    c = rng.choice([-2.0, -0.5, 0.125, 0.5, 2.0])
    return _Val(g.mul_scalar(v.t, c), v.scale * abs(c), v.pos and c > 0)


def _binary(rng: random.Random, g: Any, a: _Val, b: _Val) -> _Val:
    """One random elementwise binary op on broadcastable `a`, `b` within its safe domain."""
    related = a is b or a.parent is b or b.parent is a or (a.parent is not None and a.parent is b.parent)
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
    # sum of k products of magnitude a.scale * b.scale with random signs
    return a.scale * b.scale * math.sqrt(k) * 1.2


# ---------------------------------------------------------------------------------------
# Plain kernel graphs


def _kernel_graph(rng: random.Random, name: str, dtype: str) -> Any:
    from mirage_xdsl.frontends.builder import new_kernel_graph

    g = new_kernel_graph(name)
    batch = rng.choice([None, None, None, 2, 3])
    lead = () if batch is None else (batch,)
    m = rng.choice([1, 2, 4, 8, 16, 32])
    k = rng.choice([64, 128, 256])
    x = _Val(g.new_input(dims=(*lead, m, k), dtype=dtype, name="X"), INPUT_SCALE)
    pool = [x]
    cur = x
    for _ in range(rng.randint(1, 4)):
        step = _choice(
            rng,
            [("matmul", 4), ("rms_norm", 2), ("unary", 3), ("binary_input", 2), ("binary_pool", 1), ("reduction", 1)],
        )
        shape = cur.shape
        if step == "matmul":
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
            cur = _binary(rng, g, a, b)
        elif step == "binary_pool":
            others = [p for p in pool if p is not cur and _broadcastable(p.shape, shape)]
            if not others:
                cur = _unary(rng, g, cur)
            else:
                cur = _binary(rng, g, cur, rng.choice(others))
        else:
            last = shape[-1]
            size = rng.choice([s for s in (1, 1, 16, 32) if last % s == 0 and s < last] or [1])
            cur = _Val(g.reduction(cur.t, len(shape) - 1, size), cur.scale * math.sqrt(last // size) * 1.2)
        pool.append(cur)
    g.mark_output(cur.t)
    if len(pool) > 2 and rng.random() < 0.2:
        extra = rng.choice(pool[1:-1])
        g.mark_output(extra.t)
    return g.module


# ---------------------------------------------------------------------------------------
# Threadblock graphs


@dataclass
class _Block:
    """A threadblock graph under construction with its tracked values."""

    g: Any
    tb: Any
    dtype: str
    inputs: list[Any] = field(default_factory=list)
    loop: list[_Val] = field(default_factory=list)
    after: list[_Val] = field(default_factory=list)

    def new_input(self, dims: tuple[int, ...], imap: tuple[int, int, int], fdim: int, name: str, weight: bool = False) -> _Val:
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
        return _Val(tb.forloop_accum(v.t), v.scale * math.sqrt(iters) * 1.5, v.pos)
    if kind == "max":
        return _Val(tb.forloop_accum_max(v.t), v.scale, v.pos)
    acc = tb.forloop_accum(v.t, kind)
    if kind == "sum":
        return _Val(acc, v.scale * math.sqrt(iters * last) * 1.5, v.pos)
    if kind == "mean":
        return _Val(acc, v.scale, v.pos)
    if kind == "rms":
        # rms of a tile row of >= 8 elements drawn from a nonzero distribution: away from 0
        return _Val(acc, v.scale, True)
    return _Val(acc, v.scale * math.sqrt(iters * last / tb.reduction_dimx) * 1.5, v.pos)


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
            blk.loop.append(_binary(rng, tb, a, rng.choice(others)))
        elif op == "reduction":
            dims = [d for d, n in enumerate(a.shape) if n > 1]
            if dims:
                d = rng.choice(dims)
                blk.loop.append(_Val(tb.reduction(a.t, d), a.scale * math.sqrt(a.shape[d]) * 1.5, a.pos))
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
            blk.after.append(_binary(rng, tb, a, rng.choice(others)))
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
        a = _binary(rng, tb, a, s)
    if rng.random() < 0.3:
        a = _unary(rng, tb, a)
    p = _Val(tb.matmul(a.t, w.t), _matmul_scale(a, w, k))
    blk.loop.append(p)
    if rng.random() < 0.3:
        p = _unary(rng, tb, p)
        blk.loop.append(p)
    acc = _accumulate(rng, blk, p, None) if rng.random() < 0.3 else _Val(tb.forloop_accum(p.t), p.scale * math.sqrt(iters) * 1.5)
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


def _block_graph(rng: random.Random, name: str, dtype: str) -> Any:
    from mirage_xdsl.frontends.builder import new_kernel_graph, new_threadblock_graph

    g = new_kernel_graph(name)
    template = _choice(rng, [(_block_stream, 5), (_block_matmul, 3), (_block_attention, 2)])
    gx = rng.choice([1, 2, 4])
    gy = rng.choice([1, 1, 2])
    iters = rng.choice([1, 2, 3, 4, 8])
    rdx = rng.choice([16, 32, 64])
    tb = new_threadblock_graph(grid_dim=(gx, gy, 1), block_dim=(128, 1, 1), forloop_range=iters, reduction_dimx=rdx)
    blk = _Block(g, tb, dtype)
    omap = template(rng, blk)
    _outputs(rng, blk, omap)
    for out in g.customized(blk.inputs, tb):
        g.mark_output(out)
    return g.module


# ---------------------------------------------------------------------------------------
# Public generator


@dataclass
class FuzzCase:
    """One generated graph: the module holds one function `name`."""

    name: str
    kind: str
    """'kernel' (plain kn ops, fused by kn-fuse) or 'block' (a kn.customized threadblock graph)"""
    dtype: str
    module: Any

    def __repr__(self) -> str:  # the module is printed where it matters (failure messages, .mlir files)
        return f"FuzzCase({self.name!r}, {self.kind!r}, {self.dtype!r})"


def random_graph(rng: random.Random, name: str = "fuzz", kind: str | None = None, dtype: str | None = None) -> FuzzCase:
    """A valid random kernel graph drawn from `rng` (the same draws give the same graph).

    `kind` 'kernel' or 'block' and `dtype` fix those choices instead of drawing them.

    Raises:
        FuzzGenerationError: ten attempts in a row broke a builder rule (a generator bug).
    """
    from mirage_xdsl.frontends.builder import GraphBuildError

    kind = kind or ("block" if rng.random() < 0.6 else "kernel")
    dtype = dtype or _choice(rng, DTYPE_WEIGHTS)
    last: Exception | None = None
    for _ in range(10):
        try:
            module = (_block_graph if kind == "block" else _kernel_graph)(rng, name, dtype)
            return FuzzCase(name, kind, dtype, module)
        except GraphBuildError as err:  # a draw the templates do not exclude: draw again
            last = err
    raise FuzzGenerationError(f"{kind} graph: no valid graph in 10 attempts; last: {last}")


def graphs(name: str = "fuzz") -> Any:
    """A hypothesis strategy of `FuzzCase`s: `random_graph` on a hypothesis-controlled
    `random.Random` (draws are recorded and shrunk by hypothesis).  Needs hypothesis."""
    from hypothesis import strategies as st

    return st.randoms(use_true_random=False, note_method_calls=False).map(lambda r: random_graph(r, name))


# ---------------------------------------------------------------------------------------
# Checking one graph


@dataclass
class Outcome:
    """The result of compiling and running one graph against the reference."""

    name: str
    status: str
    """'ok', 'rejected', 'mismatch' or 'crash'"""
    reason: str = ""
    """short class of a rejection / failure (exception type and normalized message)"""
    error: float = 0.0
    message: str = ""
    dtype: str = ""
    kind: str = ""
    mlir: str = ""
    compiled: bool = False
    """the graph went through the pipeline and the printer (and nvcc / the host build)"""
    unjudged: int = 0
    """output entries with a finite reference left out as ill-conditioned (`ILL_CONDITIONED`)"""


def reason_of(err: BaseException) -> str:
    """A short failure class of an exception: its type and the first line of its message
    with numbers, SSA names and quoted text blanked, so equal causes count together."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    text = re.sub(r"%[\w.#]+", "%_", text)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'_'", text)
    text = re.sub(r"\d+", "N", text)
    return f"{type(err).__name__}: {text[:100]}"


def is_rejection(err: BaseException) -> bool:
    """Whether `err` is the compiler refusing a graph with a user-facing error (shared memory
    exceeded, or a located diagnostic of a pass or the printer) rather than a crash.  A
    `VerifyException` is not one: the passes produced IR that does not verify."""
    from xdsl.utils.exceptions import DiagnosticException, VerifyException

    from mirage_xdsl.target.errors import SharedMemoryExceeded

    if isinstance(err, SharedMemoryExceeded):
        return True
    return isinstance(err, DiagnosticException) and not isinstance(err, VerifyException)


NOISE_FACTOR = 4.0
"""How many times the rounding noise (max |float64 reference - storage-rounded reference|,
`run_reference(storage_rounding=True)`) a mismatch may exceed the dtype tolerance by: the
generated code keeps some intermediates in fp32 registers and rounds others, so its own
rounding lands within a few times that of the per-op rounded reference."""


@dataclass
class Reference:
    """The float64 reference outputs and, per output, their rounding noise: max |float64
    reference - the reference with every intermediate rounded to its storage type|.  Large
    noise means cancellation (e.g. `m + s - s` with `s` far above `m` in fp16), which no
    kernel storing fp16 tiles can avoid."""

    values: list[np.ndarray]
    noise: list[float]
    rounded: list[np.ndarray] | None = None
    """the storage-rounded reference outputs: where they are NaN or inf, rounding alone
    breaks the graph (an rms_norm of a difference that rounds to exactly 0), so a
    non-finite output is no compiler bug there"""


ILL_CONDITIONED = 0.25
"""A row (the last dim) whose storage-rounded reference is off by this fraction of the
row's magnitude is not judged: rounding alone decides its values (e.g. an rms_norm of the
difference of two nearly equal tiles), so no kernel can be held to them."""


def _well_conditioned_rows(ref: np.ndarray, rounded: np.ndarray) -> np.ndarray:
    """Mask of the entries whose rounded reference is finite and whose row is not
    ill-conditioned (`ILL_CONDITIONED`)."""
    ok = np.isfinite(ref) & np.isfinite(rounded)
    if ref.ndim == 0:
        return ok
    with np.errstate(invalid="ignore"):
        moved = np.where(ok, np.abs(ref - rounded), 0.0).max(axis=-1, keepdims=True)
        size = np.where(ok, np.abs(ref), 0.0).max(axis=-1, keepdims=True)
    return ok & ~(moved > ILL_CONDITIONED * size)


def compare(
    outs: Sequence[np.ndarray],
    refs: Sequence[np.ndarray],
    dtype: str,
    noise: Sequence[float] | None = None,
    rounded: Sequence[np.ndarray] | None = None,
) -> tuple[bool, float, str]:
    """(ok, max relative error, message): every output finite where its reference is (and,
    given the storage-`rounded` reference, where that is finite too and the row is not
    ill-conditioned: `_well_conditioned_rows`), and max |out - ref|
    over those entries within `TOLERANCE[dtype] * max |ref|` plus `NOISE_FACTOR` times that
    output's rounding `noise` (absolute; none: 0).

    Raises:
        KeyError: `dtype` has no entry in `TOLERANCE`.
    """
    if len(outs) != len(refs):
        return False, math.inf, f"{len(outs)} outputs, the reference has {len(refs)}"
    tol = TOLERANCE[dtype]
    worst = 0.0
    failed = ""
    for i, (out, ref) in enumerate(zip(outs, refs)):
        out = np.asarray(out, dtype=np.float64)
        ref = np.asarray(ref, dtype=np.float64)
        if out.shape != ref.shape:
            return False, math.inf, f"output {i}: shape {out.shape}, the reference's {ref.shape}"
        finite = np.isfinite(ref)
        if rounded is not None:
            finite &= _well_conditioned_rows(ref, np.asarray(rounded[i], dtype=np.float64))
        bad = finite & ~np.isfinite(out)
        if bad.any():
            where = tuple(int(c[0]) for c in np.nonzero(bad))
            return False, math.inf, f"output {i}: {int(bad.sum())} of {out.size} non-finite (first at {where}), reference finite"
        if not finite.any():
            continue
        denom = float(np.abs(ref[finite]).max())
        diff = float(np.abs(out[finite] - ref[finite]).max())
        scale = denom if denom > 0 else 1.0  # an all-zero reference: absolute error
        err = diff / scale
        allowed_noise = NOISE_FACTOR * (noise[i] if noise is not None else 0.0)
        if diff > tol * scale + allowed_noise and not failed:
            failed = f"output {i}: max relative error {err:.3g} > {tol:g}"
            if allowed_noise:
                failed += f" + rounding noise {allowed_noise / scale:.3g}"
        worst = max(worst, err)
    if failed:
        return False, worst, failed
    return True, worst, ""


def _lower(case: FuzzCase, options: dict[str, Any] | None = None) -> Any:
    """The case's module through `mirage-transpile` with `options` (its pass options; a
    clone: the case keeps its kn IR)."""
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    lowered = case.module.clone()
    MirageTranspilePass(**(options or {})).apply(make_context(), lowered)
    return lowered


def _reference(case: FuzzCase, plan: Any, seed: int) -> tuple[list[np.ndarray], Reference]:
    """Seeded inputs of `plan` (bf16 as bit patterns), the float64 reference outputs and
    their rounding noise."""
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    inputs = random_inputs(plan.inputs, seed, scale=INPUT_SCALE)
    values = [numpy_values(x, s.dtype) for x, s in zip(inputs, plan.inputs)]
    refs = run_reference(case.module, values, func_name=case.name)
    rounded = run_reference(case.module, values, func_name=case.name, storage_rounding=True)
    noise = []
    for r, q in zip(refs, rounded):
        both = np.isfinite(r) & np.isfinite(q)
        noise.append(float(np.abs(r[both] - q[both]).max()) if both.any() else 0.0)
    return inputs, Reference(refs, noise, rounded)


def _emulate(program: Any, case: FuzzCase, inputs: Sequence[np.ndarray], cache_dir: str | os.PathLike[str] | None) -> list[np.ndarray]:
    from mirage_xdsl.runtime.host_emulator import HostEmulator
    from mirage_xdsl.runtime.random_inputs import numpy_values

    plan = program.plans[case.name]
    values = [numpy_values(x, s.dtype) if s.dtype == "bfloat16" else x for x, s in zip(inputs, plan.inputs)]
    return HostEmulator(program, cache_dir=cache_dir).run(case.name, values)


def check_emulated(
    case: FuzzCase, seed: int = 0, cache_dir: str | os.PathLike[str] | None = None, options: dict[str, Any] | None = None
) -> Outcome:
    """Compile `case` (pipeline with `options` + emit_cuda), run it in the host emulator on
    seeded random inputs and compare with the float64 reference.  Never raises for a graph's
    failure: the outcome says what happened."""
    from mirage_xdsl.codegen.cuda_target import emit_cuda

    out = Outcome(case.name, "ok", dtype=case.dtype, kind=case.kind)
    try:
        program = emit_cuda(_lower(case, options))
    except Exception as err:  # noqa: BLE001 - classified: rejection or crash
        return _failed(out, err, rejected=is_rejection(err))
    return _run_emulated(out, case, program, seed, cache_dir)


def check_gpu(
    case: FuzzCase, seed: int = 0, cache_dir: str | os.PathLike[str] | None = None, options: dict[str, Any] | None = None
) -> Outcome:
    """`check_emulated` on the GPU of this machine (nvcc for its architecture, CuPy): the
    same seeded inputs, NaN-poisoned outputs and comparison.  Never raises for a graph's
    failure."""
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.nvcc import compile_cuda
    from mirage_xdsl.runtime.interop import detect_arch

    out = Outcome(case.name, "ok", dtype=case.dtype, kind=case.kind)
    arch = detect_arch()
    try:
        program = emit_cuda(_lower(case, options), arch)
        cubin = str(compile_cuda(program.source, arch, cache_dir=cache_dir))
        plan = program.plans[case.name]
        inputs, refs = _reference(case, plan, seed)
    except Exception as err:  # noqa: BLE001 - classified: rejection or crash
        return _failed(out, err, rejected=is_rejection(err))
    out.compiled = True
    _run_gpu(_Ready(0, plan, cubin, program.source, inputs, refs), out)
    return out


def _run_emulated(out: Outcome, case: FuzzCase, program: Any, seed: int, cache_dir: str | os.PathLike[str] | None) -> Outcome:
    try:
        inputs, refs = _reference(case, program.plans[case.name], seed)
        outs = _emulate(program, case, inputs, cache_dir)
    except Exception as err:  # noqa: BLE001 - a host build failure of generated code is a crash
        return _failed(out, err, rejected=False)
    from mirage_xdsl.runtime.random_inputs import numpy_values

    out.compiled = True
    plan = program.plans[case.name]
    outs = [numpy_values(o, s.dtype) if s.dtype != "bfloat16" else o for o, s in zip(outs, plan.outputs)]
    return _judge(out, outs, refs)


def _judge(out: Outcome, outs: Sequence[np.ndarray], refs: Reference) -> Outcome:
    ok, err, msg = compare(outs, refs.values, out.dtype, refs.noise, refs.rounded)
    if refs.rounded is not None:
        out.unjudged = sum(
            int((np.isfinite(r) & ~_well_conditioned_rows(np.asarray(r, np.float64), np.asarray(q, np.float64))).sum())
            for r, q in zip(refs.values, refs.rounded)
        )
    out.error = err
    if not ok:
        out.status, out.message = "mismatch", msg
        out.reason = "NaN or inf output" if math.isinf(err) else "wrong numbers"
    return out


def _failed(out: Outcome, err: BaseException, rejected: bool) -> Outcome:
    out.status = "rejected" if rejected else "crash"
    out.reason = reason_of(err)
    if rejected:
        out.message = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
    else:
        out.message = "".join(traceback.format_exception(type(err), err, err.__traceback__))[-4000:]
    return out


# ---------------------------------------------------------------------------------------
# The command line: many graphs, batched and in a process pool


def case_of(seed: int, index: int) -> FuzzCase:
    """Graph `index` of run `seed` (the command's numbering).

    Raises:
        FuzzGenerationError: the generator found no valid graph for this draw (`random_graph`).
    """
    return random_graph(random.Random(f"{seed}:{index}"), name=f"fuzz_{seed}_{index}")


def _input_seed(seed: int, index: int) -> int:
    return (seed * 1_000_003 + index) % 2**32


@dataclass
class _Ready:
    """A graph compiled in a worker, to run on the GPU in the main process."""

    index: int
    plan: Any
    cubin: str | None
    source: str
    inputs: list[np.ndarray]
    refs: Reference


def _work_batch(args: tuple[int, list[int], bool, str, str | None]) -> tuple[list[Outcome], list[_Ready]]:
    """Worker: build, lower and print the batch's graphs as ONE translation unit (host C++
    or nvcc), then emulate them here (`emulate`) or return them ready for the GPU."""
    seed, indices, emulate, arch, cache_dir = args
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.codegen.cuda_target import emit_cuda

    outcomes: list[Outcome] = []
    lowered: list[tuple[FuzzCase, Any, Outcome]] = []
    for i in indices:
        try:
            case = case_of(seed, i)
        except Exception as err:  # noqa: BLE001 - a generator bug is reported like a crash
            outcomes.append(_failed(Outcome(f"fuzz_{seed}_{i}", "crash"), err, rejected=False))
            continue
        out = Outcome(case.name, "ok", dtype=case.dtype, kind=case.kind, mlir=str(case.module))
        try:
            mod = _lower(case)
            lowered.append((case, mod, out))
        except Exception as err:  # noqa: BLE001 - classified
            outcomes.append(_failed(out, err, rejected=is_rejection(err)))
    groups: list[tuple[list[tuple[FuzzCase, Any, Outcome]], Any]] = []
    try:
        funcs = [op.clone() for _, mod, _ in lowered for op in mod.body.block.ops]
        groups.append((lowered, emit_cuda(ModuleOp(funcs), arch)))
    except Exception:  # noqa: BLE001 - print one graph at a time to find the one at fault
        for item in lowered:
            try:
                groups.append(([item], emit_cuda(item[1], arch)))
            except Exception as err:  # noqa: BLE001 - classified
                outcomes.append(_failed(item[2], err, rejected=is_rejection(err)))
    ready: list[_Ready] = []
    for items, program in groups:
        if emulate:
            for case, _, out in items:
                outcomes.append(_run_emulated(out, case, program, _input_seed(seed, int(case.name.rsplit("_", 1)[1])), cache_dir))
            continue
        from mirage_xdsl.driver.nvcc import compile_cuda

        try:
            cubin = str(compile_cuda(program.source, arch, cache_dir=cache_dir))
        except Exception as err:  # noqa: BLE001 - generated CUDA nvcc rejects: a crash of every graph in it
            if len(items) > 1:
                for item in items:  # which one: compile them alone
                    sub_out, sub_ready = _compile_one(seed, item, arch, cache_dir)
                    outcomes += sub_out
                    ready += sub_ready
            else:
                outcomes.append(_failed(items[0][2], err, rejected=False))
            continue
        for case, _, out in items:
            index = int(case.name.rsplit("_", 1)[1])
            try:
                inputs, refs = _reference(case, program.plans[case.name], _input_seed(seed, index))
            except Exception as err:  # noqa: BLE001 - the reference refused the generated graph
                outcomes.append(_failed(out, err, rejected=False))
                continue
            out.compiled = True
            outcomes.append(out)  # status 'ok' until the GPU run says otherwise
            ready.append(_Ready(index, program.plans[case.name], cubin, program.source, inputs, refs))
    return outcomes, ready


def _compile_one(seed: int, item: tuple[FuzzCase, Any, Outcome], arch: str, cache_dir: str | None) -> tuple[list[Outcome], list[_Ready]]:
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.nvcc import compile_cuda

    case, mod, out = item
    index = int(case.name.rsplit("_", 1)[1])
    try:
        program = emit_cuda(mod, arch)
        cubin = str(compile_cuda(program.source, arch, cache_dir=cache_dir))
        inputs, refs = _reference(case, program.plans[case.name], _input_seed(seed, index))
    except Exception as err:  # noqa: BLE001 - classified
        return [_failed(out, err, rejected=is_rejection(err))], []
    out.compiled = True
    return [out], [_Ready(index, program.plans[case.name], cubin, program.source, inputs, refs)]


def _run_gpu(ready: _Ready, out: Outcome) -> None:
    """Run one compiled graph on the GPU with NaN-poisoned outputs; update `out`."""
    try:
        import cupy  # type: ignore[import-not-found]

        from mirage_xdsl.bench.check import to_device
        from mirage_xdsl.runtime.executable import CompiledGraph
        from mirage_xdsl.runtime.random_inputs import numpy_values

        graph = CompiledGraph(ready.plan, ready.cubin, source=ready.source, poison_outputs=True).load()
        outs = graph(*[to_device(cupy, x) for x in ready.inputs])
        cupy.cuda.get_current_stream().synchronize()
        host = [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, ready.plan.outputs)]
    except Exception as err:  # noqa: BLE001 - a launch failure of a compiled graph is a crash
        _failed(out, err, rejected=False)
        return
    _judge(out, host, ready.refs)


def _run_gpu_isolated(ready: _Ready, out: Outcome) -> Outcome:
    _run_gpu(ready, out)
    return out


GPU_RUN_TIMEOUT_S = 120.0
"""Seconds one graph may run on the GPU (load, launch, copy back) before it counts as hung."""


class _GpuRunner:
    """Runs each compiled graph in a separate GPU process (driver/isolated.py), so a kernel
    that faults, hangs or kills its process is one crash, not the end of the run: after a
    crash the process is replaced.  It only starts once a graph needs it (`--emulate` never)."""

    def __init__(self, ctx: Any):
        from mirage_xdsl.driver.isolated import IsolatedWorker

        self.worker = IsolatedWorker(ctx)

    def run(self, ready: _Ready, out: Outcome) -> Outcome:
        from mirage_xdsl.driver.isolated import WorkerLost

        try:
            result: Outcome = self.worker.call(_run_gpu_isolated, ready, out, timeout=GPU_RUN_TIMEOUT_S)
        except WorkerLost as err:
            out.status, out.reason = "crash", "GPU process lost"
            out.message = f"the GPU run did not come back within {GPU_RUN_TIMEOUT_S:.0f} s or its process died ({err})"
            return out
        if result.status == "crash":
            self.worker.close()  # the context may be poisoned (sticky CUDA error)
        return result

    def close(self) -> None:
        self.worker.close()


def _summary(outcomes: Sequence[Outcome], count: int, elapsed: float) -> str:
    rejected = [o for o in outcomes if o.status == "rejected"]
    bad = [o for o in outcomes if o.status in ("mismatch", "crash")]
    compiled = sum(1 for o in outcomes if o.compiled)
    reasons = Counter(o.reason.split(":")[0] for o in rejected)
    why = ", ".join(f"{k} {v}" for k, v in reasons.most_common()) or "none"
    crashes = sum(1 for o in bad if o.status == "crash")
    partial = sum(1 for o in outcomes if o.unjudged)
    return (
        f"fuzz: {count} graphs, {compiled} compiled, {len(rejected)} rejected ({why}), "
        f"{sum(1 for o in bad if o.status == 'mismatch')} mismatches, {crashes} crashes in {elapsed:.0f} s"
        f" ({partial} graphs with ill-conditioned rows left unjudged)"
    )


def _write_failure(directory: Path, seed: int, out: Outcome) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{out.name}.mlir"
    index = out.name.rsplit("_", 1)[1]
    header = [
        f"// {out.status}: {out.reason}",
        f"// reproduce: python -m mirage_xdsl.bench.fuzz --seed {seed} --only {index} [--emulate]",
        f"// dtype {out.dtype}, {out.kind} graph, relative error {out.error:.3g}",
    ]
    header += [f"// {line}" for line in (out.message or "").splitlines()[-25:]]
    path.write_text("\n".join(header) + "\n" + (out.mlir or str(case_of(seed, int(index)).module)) + "\n")
    return path


def run_fuzz(
    count: int,
    seed: int,
    *,
    batch: int = 8,
    jobs: int | None = None,
    emulate: bool = False,
    arch: str | None = None,
    failures_dir: str | os.PathLike[str] = "fuzz-failures",
    only: Sequence[int] | None = None,
    timeout_s: float = 600.0,
    log: Callable[[str], None] = print,
) -> list[Outcome]:
    """Generate, compile, run and check graphs `0..count-1` of run `seed` (or `only` those);
    return one Outcome per graph and write the failing ones to `failures_dir`.

    A graph's failure is its `Outcome` (a hung or killed worker: a crash of every graph of
    its batch), never raised.

    Args:
        count: graphs to generate (ignored when `only` is given).
        seed: the run seed (graph i is `case_of(seed, i)`).
        batch: graphs per translation unit (one nvcc or host C++ build).
        jobs: worker processes (None: the CPUs, minus one with a GPU).
        emulate: run on the CPU through the host emulator instead of the GPU.
        arch: the nvcc architecture (None: sm_90 with `emulate`, else the GPU's).
        failures_dir: the folder for the failing graphs (`.mlir` files).
        only: run only these graph indices.
        timeout_s: seconds a batch may take, plus 60 s times `batch`.
        log: progress and failure lines.

    Raises:
        KeyboardInterrupt: Ctrl-C (or SIGTERM, with `main`'s handler), passed on after the
            workers and the GPU process were ended.
        OSError: a failing graph cannot be written to `failures_dir`.
    """
    start = time.monotonic()
    indices = list(only) if only else list(range(count))
    if arch is None:
        from mirage_xdsl.runtime.interop import detect_arch

        arch = "sm_90" if emulate else detect_arch()
    jobs = jobs or max(1, (os.cpu_count() or 2) - (0 if emulate else 1))
    batches = [indices[i : i + batch] for i in range(0, len(indices), batch)]
    outcomes: dict[int, Outcome] = {}
    with tempfile.TemporaryDirectory(prefix="mx-fuzz-") as tmp:
        cache_dir = os.environ.get("MIRAGE_XDSL_FUZZ_CACHE") or tmp
        ctx = multiprocessing.get_context("spawn")
        pool = ctx.Pool(jobs, maxtasksperchild=4)
        gpu = _GpuRunner(ctx)
        try:
            pending = [(b, pool.apply_async(_work_batch, ((seed, b, emulate, arch, cache_dir),))) for b in batches]
            deadline_per = timeout_s + 60.0 * batch
            for b, res in pending:
                try:
                    outs, ready = res.get(timeout=deadline_per)
                except Exception as err:  # noqa: BLE001 - a hung or killed worker: every graph of its batch
                    for i in b:
                        o = Outcome(f"fuzz_{seed}_{i}", "crash", reason=f"worker: {type(err).__name__}", message=repr(err))
                        outcomes[i] = o
                    continue
                by_index = {int(o.name.rsplit("_", 1)[1]): o for o in outs}
                for r in ready:
                    by_index[r.index] = gpu.run(r, by_index[r.index])
                for i, o in by_index.items():
                    outcomes[i] = o
                    if o.status in ("mismatch", "crash"):
                        path = _write_failure(Path(failures_dir), seed, o)
                        log(f"fuzz: {o.name}: {o.status}: {o.reason} ({o.message.splitlines()[0] if o.message else ''}) -> {path}")
                done = len(outcomes)
                if done % max(batch * 8, 1) < len(b):
                    log(f"fuzz: {done}/{len(indices)} graphs ({time.monotonic() - start:.0f} s)")
        finally:
            gpu.close()
            pool.terminate()
            pool.join()
    result = [outcomes[i] for i in indices if i in outcomes]
    log(_summary(result, len(indices), time.monotonic() - start))
    return result


def _report(path: str, seed: int, outcomes: Sequence[Outcome]) -> None:
    rows = [
        {k: v for k, v in o.__dict__.items() if k != "mlir"} | {"error": o.error if math.isfinite(o.error) else None}
        for o in outcomes
    ]
    classes = Counter(f"{o.status}: {o.reason}" for o in outcomes if o.status != "ok")
    Path(path).write_text(json.dumps({"seed": seed, "classes": dict(classes.most_common()), "graphs": rows}, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m mirage_xdsl.bench.fuzz`: exit 0 when every graph matched or was rejected,
    1 on any mismatch or crash (or no GPU without `--emulate`), 2 on bad arguments, 130 when
    interrupted (Ctrl-C or SIGTERM; the workers are ended).

    Raises:
        SystemExit: bad arguments or `--help` (argparse; status 2 or 0).
    """
    p = argparse.ArgumentParser(prog="mirage_xdsl.bench.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=100, help="graphs to generate (0..count-1)")
    p.add_argument("--seed", type=int, default=0, help="run seed: graph i is random_graph(Random(f'{seed}:{i}'))")
    p.add_argument("--batch", type=int, default=8, help="graphs per translation unit (one nvcc / host C++ build)")
    p.add_argument("--jobs", type=int, default=0, help="worker processes (default: CPUs, minus one with a GPU)")
    p.add_argument("--emulate", action="store_true", help="run on the CPU through the host emulator (no GPU needed)")
    p.add_argument("--arch", default=None, help="nvcc architecture (default: the GPU's, sm_90 without one)")
    p.add_argument("--failures", default="fuzz-failures", help="folder for the failing graphs (.mlir)")
    p.add_argument("--report", default=None, help="write every outcome and the failure classes as JSON")
    p.add_argument("--only", type=int, nargs="*", default=None, help="run only these graph indices")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds a batch may take (plus 60 per graph)")
    args = p.parse_args(argv)
    if args.count < 0 or args.batch < 1:
        p.error("--count must be >= 0 and --batch >= 1")
    if not args.emulate:
        from mirage_xdsl.runtime.interop import gpu_available

        if not gpu_available():
            print("mirage_xdsl.bench.fuzz: error: no CUDA GPU found (use --emulate to run on the CPU)", file=sys.stderr)
            return 1

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM like Ctrl-C: run_fuzz's `finally` ends the workers

    signal.signal(signal.SIGTERM, stop)
    try:
        outcomes = run_fuzz(
            args.count,
            args.seed,
            batch=args.batch,
            jobs=args.jobs or None,
            emulate=args.emulate,
            arch=args.arch,
            failures_dir=args.failures,
            only=args.only,
            timeout_s=args.timeout,
        )
    except KeyboardInterrupt:
        print("mirage_xdsl.bench.fuzz: interrupted", file=sys.stderr)
        return 130
    if args.report:
        _report(args.report, args.seed, outcomes)
    return 1 if any(o.status in ("mismatch", "crash") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
