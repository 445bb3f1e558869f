"""Does a kernel graph compute its program? Random testing in float64.

A graph saved by a superoptimizer (or written by hand) can be internally consistent, so
that its kernels match its own reference, and still compute something other than the program
it stands for: Mirage checks candidates by one random test over finite fields, and some of
its saved graphs are wrong all the same. `compare` runs two implementations of the same
signature on fresh random inputs over several seeds and input scales and reports the largest
relative difference of every output.

    report = compare(graph_runner(module, "graph_0"), program, specs)
    report.equivalent        # every output within `rtol` on every trial

An implementation is any callable from a list of float64 arrays (one per input, in order) to
a list of arrays (one per output): `graph_runner` wraps a kernel graph run by the reference
executor; a numpy or torch program can be passed directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mirage_xdsl.reference.executor import run_reference

Program = Callable[[list[np.ndarray]], Sequence[Any]]
"""One float64 array per input in, one array-like per output out."""

DEFAULT_SEEDS = (0, 1, 2)
DEFAULT_SCALES = (0.5, 4.0)
"""Inputs uniform in (-s, s): 0.5 is the bench's scale; 4.0 moves exp/max-dominated graphs
(softmax, attention) into the range where a missing max subtraction or a swapped operand
shows."""
DEFAULT_RTOL = 1e-6
"""Both sides run in float64, so equivalent graphs differ only by summation order (about
1e-14); a wrong op differs by far more than 1e-6."""


class EquivalenceError(ValueError):
    """The two implementations cannot be compared (different numbers of outputs, or an
    output whose shape differs); the message names the output and both shapes."""


@dataclass(frozen=True)
class InputSpec:
    """One input: its shape (elements) and dtype name (`float16`, `bfloat16`, `float32`)."""

    shape: tuple[int, ...]
    dtype: str = "float16"


@dataclass
class Trial:
    """One random test: the seed and scale of its inputs and each output's relative error,
    max|a - b| / max|b| (0 when both are zero; inf where exactly one side is non-finite)."""

    seed: int
    scale: float
    errors: list[float]


@dataclass
class EquivalenceReport:
    """All trials of one comparison and the tolerance they were judged by."""

    rtol: float
    trials: list[Trial] = field(default_factory=list)

    @property
    def max_error(self) -> float:
        """The largest relative error over all trials and outputs."""
        return max((e for t in self.trials for e in t.errors), default=0.0)

    @property
    def equivalent(self) -> bool:
        """Every output of every trial within `rtol`."""
        return self.max_error <= self.rtol

    def worst(self) -> tuple[Trial, int] | None:
        """The trial and output index of the largest error (None without trials)."""
        best: tuple[Trial, int] | None = None
        for t in self.trials:
            for i, e in enumerate(t.errors):
                if best is None or e > best[0].errors[best[1]]:
                    best = (t, i)
        return best


def specs_of(func: Any) -> list[InputSpec]:
    """The input specs of a kernel graph (`func.func`) from its argument types.

    Raises:
        EquivalenceError: an argument is not a ranked tensor.
    """
    specs = []
    for i, typ in enumerate(func.function_type.inputs.data):
        shape = getattr(typ, "get_shape", None)
        if shape is None:
            raise EquivalenceError(f"argument {i} of @{func.sym_name.data} is not a tensor ({typ})")
        specs.append(InputSpec(tuple(int(d) for d in shape()), _dtype_name(typ)))
    return specs


def _dtype_name(typ: Any) -> str:
    names = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}
    return names.get(str(typ.element_type), str(typ.element_type))


def graph_runner(module: Any, func_name: str | None = None) -> Program:
    """A `Program` that runs kernel graph `func_name` of `module` with the reference executor."""
    return lambda inputs: run_reference(module, inputs, func_name=func_name)


def random_inputs(specs: Sequence[InputSpec], seed: int, scale: float) -> list[np.ndarray]:
    """float64 inputs uniform in (-scale, scale), rounded to each input's dtype where numpy
    has it (so both sides see values the GPU could hold)."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        x = rng.uniform(-scale, scale, size=spec.shape)
        if spec.dtype in ("float16", "float32"):
            x = x.astype(spec.dtype)
        out.append(x.astype(np.float64))
    return out


def relative_error(a: Any, b: Any) -> float:
    """max|a - b| / max|b| over the finite elements; NaN/inf must sit at the same places
    with the same values (inf where they do not).

    Raises:
        EquivalenceError: the shapes differ.
    """
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise EquivalenceError(f"shape {x.shape} against {y.shape}")
    fx, fy = np.isfinite(x), np.isfinite(y)
    if (fx != fy).any() or not np.array_equal(x[~fx], y[~fy], equal_nan=True):
        return float("inf")
    if not fx.any():
        return 0.0
    scale = np.abs(y[fy]).max()
    diff = np.abs(x[fx] - y[fy]).max()
    return float(diff / scale) if scale > 0 else float(diff)


def compare(
    candidate: Program,
    program: Program,
    specs: Sequence[InputSpec],
    seeds: Sequence[int] = DEFAULT_SEEDS,
    scales: Sequence[float] = DEFAULT_SCALES,
    rtol: float = DEFAULT_RTOL,
) -> EquivalenceReport:
    """Run `candidate` and `program` on the same random inputs (every seed at every scale).

    Raises:
        EquivalenceError: the two return different numbers of outputs, or an output's shape
            differs (the message names the output).
    """
    report = EquivalenceReport(rtol)
    for scale in scales:
        for seed in seeds:
            inputs = random_inputs(specs, seed, scale)
            got = list(candidate([x.copy() for x in inputs]))
            want = list(program([x.copy() for x in inputs]))
            if len(got) != len(want):
                raise EquivalenceError(f"the graph has {len(got)} outputs, the program {len(want)}")
            errors = []
            for i, (a, b) in enumerate(zip(got, want)):
                try:
                    errors.append(relative_error(a, b))
                except EquivalenceError as err:
                    raise EquivalenceError(f"output {i}: {err}") from None
            report.trials.append(Trial(seed, scale, errors))
    return report
