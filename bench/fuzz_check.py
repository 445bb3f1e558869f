"""Judging one fuzz case: lower and print it, compute the float64 reference and its rounding
noise, run it (host emulator or GPU, NaN-poisoned outputs) and compare (`compare`:
max |out - ref| / max |ref| within `TOLERANCE[dtype]` plus `NOISE_FACTOR` times the noise),
giving an `Outcome` (`ok`, `rejected`, `mismatch`, `crash`; see `fuzz.py`).
"""

from __future__ import annotations

import math
import os
import re
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mirage_xdsl.bench.fuzz_graphs import INPUT_SCALE, TOLERANCE, FuzzCase


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


def lower_case(case: FuzzCase, options: dict[str, Any] | None = None) -> Any:
    """The case's module through `mirage-transpile` with `options` (pipeline options and
    tuning-point fields, `MirageTranspilePass.from_options`; a clone: the case keeps its kn IR);
    an 'einsum' case through `mx.einsum`'s lowering with its schedule options instead, an
    'attention' case with a forced kernel through `fuzz_attention.lower_attention_case`."""
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    if case.kind == "einsum":
        from mirage_xdsl.driver.einsum import lower_einsum

        return lower_einsum(case.module.clone(), **case.options)
    if case.kind == "attention" and case.options:
        from mirage_xdsl.bench.fuzz_attention import lower_attention_case

        return lower_attention_case(case.module, case.options)
    lowered = case.module.clone()
    MirageTranspilePass.from_options(options or {}).apply(make_context(), lowered)
    return lowered


def reference_of(case: FuzzCase, plan: Any, seed: int) -> tuple[list[np.ndarray], Reference]:
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
    failure: the outcome says what happened.  Attention groups keep their generated kernels
    (`flash_attention` off unless `options` set it): the emulator does not model the sm_90a
    flash-attention kernel."""
    from mirage_xdsl.codegen.cuda_target import emit_cuda

    out = Outcome(case.name, "ok", dtype=case.dtype, kind=case.kind)
    try:
        program = emit_cuda(lower_case(case, {"flash_attention": False, **(options or {})}))
    except Exception as err:  # noqa: BLE001 - classified: rejection or crash
        return failed_outcome(out, err, rejected=is_rejection(err))
    return run_emulated(out, case, program, seed, cache_dir)


def check_gpu(
    case: FuzzCase, seed: int = 0, cache_dir: str | os.PathLike[str] | None = None, options: dict[str, Any] | None = None
) -> Outcome:
    """`check_emulated` on the GPU of this machine (nvcc for its architecture, CuPy): the
    same seeded inputs, NaN-poisoned outputs and comparison.  Never raises for a graph's
    failure."""
    out = Outcome(case.name, "ok", dtype=case.dtype, kind=case.kind)
    try:
        lowered = lower_case(case, options)
    except Exception as err:  # noqa: BLE001 - classified: rejection or crash
        return failed_outcome(out, err, rejected=is_rejection(err))
    return check_gpu_lowered(case, lowered, seed, cache_dir)


def check_gpu_lowered(case: FuzzCase, lowered: Any, seed: int = 0, cache_dir: str | os.PathLike[str] | None = None) -> Outcome:
    """`check_gpu` of a module lowered already (e.g. with a kernel forced by a test), checked
    against the reference of `case.module` (its kn graph).  Never raises for a graph's failure."""
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.nvcc import compile_cuda
    from mirage_xdsl.runtime.interop import detect_arch

    out = Outcome(case.name, "ok", dtype=case.dtype, kind=case.kind)
    arch = detect_arch()
    try:
        program = emit_cuda(lowered, arch)
        cubin = str(compile_cuda(program.source, program.arch, cache_dir=cache_dir))
        plan = program.plans[case.name]
        inputs, refs = reference_of(case, plan, seed)
    except Exception as err:  # noqa: BLE001 - classified: rejection or crash
        return failed_outcome(out, err, rejected=is_rejection(err))
    out.compiled = True
    run_gpu(ReadyCase(0, plan, cubin, program.source, inputs, refs), out)
    return out


def run_emulated(out: Outcome, case: FuzzCase, program: Any, seed: int, cache_dir: str | os.PathLike[str] | None) -> Outcome:
    """Run `case` (already printed as `program`) in the host emulator on the inputs of `seed`
    and judge it into `out`; a host build failure of generated code is a crash."""
    try:
        inputs, refs = reference_of(case, program.plans[case.name], seed)
        outs = _emulate(program, case, inputs, cache_dir)
    except Exception as err:  # noqa: BLE001 - a host build failure of generated code is a crash
        return failed_outcome(out, err, rejected=False)
    from mirage_xdsl.runtime.random_inputs import numpy_values

    out.compiled = True
    plan = program.plans[case.name]
    outs = [numpy_values(o, s.dtype) if s.dtype != "bfloat16" else o for o, s in zip(outs, plan.outputs)]
    return judge(out, outs, refs)


def judge(out: Outcome, outs: Sequence[np.ndarray], refs: Reference) -> Outcome:
    """Compare `outs` with the reference (`compare`) and record the error, the unjudged
    ill-conditioned elements and, on a mismatch, its reason in `out`."""
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


def failed_outcome(out: Outcome, err: BaseException, rejected: bool) -> Outcome:
    """Record `err` in `out`: a rejection (its first line) or a crash (its traceback)."""
    out.status = "rejected" if rejected else "crash"
    out.reason = reason_of(err)
    if rejected:
        out.message = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
    else:
        out.message = "".join(traceback.format_exception(type(err), err, err.__traceback__))[-4000:]
    return out


@dataclass
class ReadyCase:
    """A graph compiled in a worker, to run on the GPU in the main process."""

    index: int
    plan: Any
    cubin: str | None
    source: str
    inputs: list[np.ndarray]
    refs: Reference


def gpu_outputs(plan: Any, cubin: str | None, source: str, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of one compiled graph run on this machine's GPU (CuPy) on host `inputs`
    (bf16 as bit patterns), NaN-poisoned before the launch, as float host arrays.

    Raises:
        Exception: whatever loading or launching the cubin raises (CuPy's CUDA errors).
    """
    import cupy  # type: ignore[import-not-found]

    from mirage_xdsl.bench.check import to_device
    from mirage_xdsl.runtime.executable import CompiledGraph
    from mirage_xdsl.runtime.random_inputs import laid_out, numpy_values

    graph = CompiledGraph(plan, cubin, source=source, poison_outputs=True).load()
    # the worker's strided inputs arrive contiguous (pickled): give them the plan's strides
    laid = [laid_out(x, spec.strides) for x, spec in zip(inputs, plan.inputs)]
    outs = graph(*[to_device(cupy, x) for x in laid])
    cupy.cuda.get_current_stream().synchronize()
    return [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, plan.outputs)]


def run_gpu(ready: ReadyCase, out: Outcome) -> None:
    """Run one compiled graph on the GPU with NaN-poisoned outputs; update `out`."""
    try:
        host = gpu_outputs(ready.plan, ready.cubin, ready.source, ready.inputs)
    except Exception as err:  # noqa: BLE001 - a launch failure of a compiled graph is a crash
        failed_outcome(out, err, rejected=False)
        return
    judge(out, host, ready.refs)
