"""The fuzzer's Tensor Comprehensions family (seed 002's language): random TC definitions
within what `frontends/tc/lower.py` lowers, compiled like any kernel graph.

`random_tc_program(rng)` writes one definition over an `M x N` iteration space:

* inputs `X(M, N)` (always), a row `g(1, N)` read as `g(0, n)`, a column `c(M, 1)` read as
  `c(m, 0)`, and `A(M, K)`, `W(K, N)` for a contraction;
* statements, each defining a new output (TC allocates no temporaries): the contraction
  `T(m, n) +=! A(m, k) * W(k, n)`, at times after an activation of A or RMSNorm's statistic
  and scaling (`S(m) +=! A(m, k) * A(m, k) / K`, `A(m, k) / sqrt(S(m))`); elementwise expressions of earlier `(m, n)` values, rows,
  columns and row / column statistics (`+ - * /`, a scalar factor, `-x`, `exp`, `tanh`,
  `fmax(x, 0)`, `fmin(x, c)`, `fmax(x, y)`, `sqrt` / `log` / division of values known to be
  positive); reductions over n (`+=!`, optionally divided by `N`; `max=!`, `min=!`) or over m
  (`+=!`); at times `+=` adding a value to an earlier output; and last, at times, a second
  contraction `Y(m, e) +=! act(T(m, n)) * V(n, e)` (an MLP's down projection).

Values are tracked as in `fuzz_graphs.py` (a magnitude bound and whether they are positive,
bounded away from 0) so that every op stays in its safe domain for the harness's inputs
(uniform in +-`fuzz_graphs.INPUT_SCALE`).  Two checks use a program: the TC interpreter
(`frontends/tc/interpret.py`, float64 over the TC source) against the reference executor of
the lowered kernel graph (the lowering; `test/frontends/test_tc_differential.py`), and, in
`python -m mirage_xdsl.bench.fuzz --family tc [--emulate]`, the compiled graph against that
reference (the compiler), judged like every fuzzed graph.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from mirage_xdsl.bench.fuzz_graphs import FIRST_DRAWS, INPUT_SCALE, Draws, FuzzCase

SIZES = (1, 2, 3, 8, 16, 33, 64, 64, 128, 200)
"""Sizes drawn for M, N and K (tails and size-1 dims included)."""
TYPES = {"float32": "float", "float16": "half", "bfloat16": "bfloat16"}
"""TC element type of each dtype the family draws."""
EXP_MAX_SCALE = 4.0
"""exp is applied only to values of at most this magnitude (fp16's range)."""


@dataclass
class _Term:
    """A TC expression and what the generator knows of its values: `scale` bounds the
    magnitude, `pos` means positive and bounded away from 0, `axes` the indices it uses."""

    text: str
    scale: float
    pos: bool = False
    axes: str = "mn"


def _unary(rng: random.Random, t: _Term, constants: bool = False) -> _Term:
    ops = ["neg", "scale", "relu", "fmin", "tanh"] + (["add_const", "const_sub", "sqrt_sq"] if constants else [])
    if t.scale <= EXP_MAX_SCALE:
        ops.append("exp")
    if t.pos:
        ops += ["sqrt", "log"]
    op = rng.choice(ops)
    if op == "neg":
        return _Term(f"-{t.text}", t.scale, False, t.axes)
    if op == "add_const":
        c = rng.choice((0.5, 1.0, 2.0))
        return _Term(f"({t.text} + {c})", t.scale + c, t.pos, t.axes)
    if op == "const_sub":
        c = rng.choice((1.0, 3.0))
        return _Term(f"({c} - {t.text})", t.scale + c, False, t.axes)
    if op == "sqrt_sq":  # a norm's sqrt(x^2 + eps): positive, bounded away from 0
        return _Term(f"sqrt({t.text} * {t.text} + 0.01)", t.scale + 0.1, True, t.axes)
    if op == "scale":
        c = rng.choice((0.5, 2.0, 1.5))
        return _Term(f"{t.text} * {c}", t.scale * c, t.pos, t.axes)
    if op == "relu":
        return _Term(f"fmax({t.text}, 0)", t.scale, False, t.axes)
    if op == "fmin":
        return _Term(f"fmin({t.text}, {t.scale / 2:.3g})", t.scale, False, t.axes)
    if op == "tanh":
        return _Term(f"tanh({t.text})", 1.0, False, t.axes)
    if op == "exp":
        return _Term(f"exp({t.text})", math.exp(t.scale), True, t.axes)
    if op == "sqrt":
        return _Term(f"sqrt({t.text})", math.sqrt(t.scale), True, t.axes)
    return _Term(f"log({t.text})", max(1.0, abs(math.log(t.scale))), False, t.axes)


def _binary(rng: random.Random, a: _Term, b: _Term) -> _Term:
    axes = "mn" if "m" in a.axes + b.axes and "n" in a.axes + b.axes else a.axes
    ops = ["add", "sub", "mul", "max"] + (["div"] if b.pos else [])
    op = rng.choice(ops)
    if op == "add":
        return _Term(f"({a.text} + {b.text})", a.scale + b.scale, a.pos and b.pos, axes)
    if op == "sub":
        return _Term(f"({a.text} - {b.text})", a.scale + b.scale, False, axes)
    if op == "mul":
        return _Term(f"{a.text} * {b.text}", a.scale * b.scale, a.pos and b.pos, axes)
    if op == "max":
        return _Term(f"fmax({a.text}, {b.text})", max(a.scale, b.scale), a.pos or b.pos, axes)
    return _Term(f"{a.text} / {b.text}", a.scale / 0.05, a.pos, axes)  # b >= ~0.05


def random_tc_program(rng: random.Random, name: str = "fuzz_tc", draws: Draws = FIRST_DRAWS) -> tuple[str, dict[str, int], str]:
    """(TC source of one definition named `name`, its sizes, the dtype) drawn from `rng`, with
    what `draws` adds (constants, `fuzz_graphs.TC_CONSTANTS_SEED`; an accumulated value's
    bound, `fuzz_graphs.TC_ACCUMULATE_SEED`).

    Raises:
        Nothing (every draw is a definition the lowering accepts; a generator bug would show
        as a `TcError` in the caller).
    """
    constants = draws.tc_constants
    dtype = rng.choice(("float32", "float32", "float16", "bfloat16"))
    ty = TYPES[dtype]
    sizes = {"M": rng.choice(SIZES), "N": rng.choice(SIZES), "K": rng.choice(SIZES)}
    scale = INPUT_SCALE
    full: list[_Term] = [_Term("X(m, n)", scale)]
    rows: list[_Term] = []  # depend on n only
    cols: list[_Term] = []  # depend on m only
    params = [f"{ty}(M, N) X"]
    if rng.random() < 0.5:
        params.append(f"{ty}(1, N) g")
        rows.append(_Term("g(0, n)", scale, axes="n"))
    if rng.random() < 0.4:
        params.append(f"{ty}(M, 1) c")
        cols.append(_Term("c(m, 0)", scale, axes="m"))
    statements: list[str] = []
    outputs: list[str] = []

    def define(text: str, target: str) -> str:
        name_ = f"T{len(outputs)}"
        outputs.append(name_)
        statements.append(f"  {name_}{target} {text}")
        return name_

    k = sizes.pop("K")
    if rng.random() < 0.5:
        sizes["K"] = k
        params += [f"{ty}(M, K) A", f"{ty}(K, N) W"]
        lhs = _Term("A(m, k)", scale, axes="mk")
        prologue = rng.choice(["none", "none", "unary", "rms"] if k >= 8 else ["none", "unary"])
        if prologue == "unary":  # an activation before the contraction
            u = _unary(rng, lhs, constants)
            lhs = _Term(f"{define(f'= {u.text}', '(m, k)')}(m, k)", u.scale, u.pos, "mk")
        elif prologue == "rms":  # RMSNorm's statistic and scaling, then the contraction
            ss = define("+=! A(m, k) * A(m, k) / K", "(m)")
            lhs = _Term(f"{define(f'= A(m, k) / sqrt({ss}(m))', '(m, k)')}(m, k)", 4.0, False, "mk")
        t = define(f"+=! {lhs.text} * W(k, n)", "(m, n)")
        full.append(_Term(f"{t}(m, n)", lhs.scale * scale * math.sqrt(k) * 1.2))
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["ewise", "ewise", "ewise", "row_stat", "row_stat", "col_sum", "accumulate"])
        src = rng.choice(full)
        if kind == "row_stat":  # a statistic over n, broadcast back as a column
            how = rng.choice(["sum", "mean", "max", "min"])
            text = {"sum": "+=!", "mean": "+=!", "max": "max=!", "min": "min=!"}[how] + f" {src.text}"
            text += " / N" if how == "mean" else ""
            t = define(text, "(m)")
            stat = src.scale * (sizes["N"] if how == "sum" else 1)
            cols.append(_Term(f"{t}(m)", stat, src.pos, axes="m"))
        elif kind == "col_sum":
            t = define(f"+=! {src.text}", "(n)")
            rows.append(_Term(f"{t}(n)", src.scale * sizes["M"], src.pos, axes="n"))
        elif kind == "accumulate" and len(outputs) > 0 and statements[-1].split("(")[1].startswith("m, n)"):
            last = outputs[-1]
            statements.append(f"  {last}(m, n) += {rng.choice(full).text}")
            accumulated = _Term(f"{last}(m, n)", sum(t.scale for t in full))
            if draws.tc_accumulate:  # the value before `+=` is gone: only the sum's bound applies
                full = [t for t in full if t.text != accumulated.text]
            full.append(accumulated)
        else:
            a = _unary(rng, src, constants) if rng.random() < 0.5 else src
            if rng.random() < 0.7:
                other = rng.choice(full + rows + cols)
                b = _unary(rng, other, constants) if rng.random() < 0.3 else other
                a = _binary(rng, a, b) if rng.random() < 0.5 or not b.pos else _binary(rng, b, a)
            if a.axes != "mn":  # keep the statement over (m, n)
                a = _binary(rng, a, _Term("X(m, n)", scale))
            if a.scale > 1e3:  # keep fp16 far from overflow: bound by tanh
                a = _Term(f"tanh({a.text})", 1.0)
            t = define(f"= {a.text}", "(m, n)")
            full.append(_Term(f"{t}(m, n)", a.scale, a.pos))
    if rng.random() < 0.3:  # a second contraction over n of the last (m, n) value (an MLP's down projection)
        sizes["E"] = rng.choice(SIZES)
        params.append(f"{ty}(N, E) V")
        hidden = full[-1]
        act = _unary(rng, hidden, constants) if rng.random() < 0.6 else hidden
        if act.scale > 1e2:
            act = _Term(f"tanh({act.text})", 1.0)
        define(f"+=! {act.text} * V(n, e)", "(m, e)")
    source = f"def {name}({', '.join(params)}) -> ({', '.join(outputs)}) {{\n" + "\n".join(statements) + "\n}\n"
    return source, sizes, dtype


def tc_case(rng: random.Random, name: str, draws: Draws = FIRST_DRAWS) -> FuzzCase:
    """The `FuzzCase` of a random TC definition named `name` (kind 'tc'): its lowered kernel
    graph, the source in `options["tc"]` and the sizes in `options["sizes"]` (printed into a
    failure file's header).

    Raises:
        TcError: the lowering refused the drawn definition (a generator bug).
    """
    from mirage_xdsl.frontends.tc import tc

    source, sizes, dtype = random_tc_program(rng, name, draws)
    return FuzzCase(name, "tc", dtype, tc(source, sizes=sizes), {"tc": source, "sizes": sizes})
