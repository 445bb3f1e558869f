"""`mirage-transpile`: the whole transpiler pipeline of passes/README.md, in order.

    kn-decompose-rms-norm, tb-decompose-accumulators, tb-fusion-chains, tb-resolve-layout,
    tb-compute-strides, kn-alias-reshape, kn-plan-workspace, tb-schedule, tb-plan-swizzle, tb-plan-pipeline,
    tb-plan-smem [, convert-tb-to-cute, convert-contraction-to-hopper [, cute-late-finisher]
    [, CUTE_DECISIONS]]

`CUTE_DECISIONS` are the cute-level passes that write the printer's code-generation choices
into the IR (passes/README.md, "Code generation decisions"); the CUDA printer reads them and
refuses a kernel without them.  `cute-decisions` runs just them (on hand-lowered cute IR).

Passes are looked up through `mirage_xdsl.passes.get_all_passes()`; `convert-tb-to-cute`
runs when it is registered and `to-cute=true` (the default). A pass of the list that is not
available is an error (the pipeline would silently skip a decision).

Options (eight; `mirage-opt FILE -p 'mirage-transpile{to-cute=false tuning="stages=3"}'`):
`fuse`, `lift` (kn-lift-customized: raise saved threadblock graphs to kn ops first),
`to-cute`, `decide` (how far to lower), `arch` (sm_90: lone matmuls with a GEMM view
become the sm_90a `cute.hopper_gemm`; other targets keep them as library calls), `smem-limit`
(tb-plan-smem and tb-plan-pipeline), `time-limit-ms` (tb-plan-smem) and `tuning`, a
`TuningPoint` (target/tuning.py) whose fields go to the pass that makes each choice: kn-fuse
(`candidate`, `always_split`, `grid_sum`, `online_softmax`, `flash_attention` as its
`hopper-attention`, `lone_block_max_stages`),
tb-plan-pipeline (`stages`, `lone_block_max_stages`), tb-decompose-accumulators
(`reduce_partials`) and cute-late-finisher (`late_finisher` as its `shift`; 0 = not run).
The tuner (driver/tune) searches exactly those fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.passes import get_all_passes
from mirage_xdsl.passes.conversion.lift_customized import lift_customized
from mirage_xdsl.passes.tb.plan_smem import SM90_SMEM_LIMIT
from mirage_xdsl.target.device import HOPPER_GEMM_ARCHS
from mirage_xdsl.target.tuning import TuningError, TuningPoint

PIPELINE = (
    "kn-decompose-rms-norm",
    "tb-decompose-accumulators",
    "tb-fusion-chains",
    "tb-resolve-layout",
    "tb-compute-strides",
    "kn-alias-reshape",
    "kn-plan-workspace",
    "tb-schedule",
    "tb-plan-swizzle",
    "tb-plan-pipeline",
    "tb-plan-smem",
)
TO_CUTE = "convert-tb-to-cute"
TO_HOPPER = "convert-contraction-to-hopper"
"""Runs right after convert-tb-to-cute: every `contraction.contract` (kn-fuse's lone matmuls
with `hopper-gemm`, or a frontend's) becomes a `cute.hopper_gemm`."""
LATE_FINISHER = "cute-late-finisher"
CUTE_DECISIONS = (
    "cute-block-reduce",
    "cute-slice-mma",
    "cute-register-accumulators",
    "cute-weight-prefetch",
    "cute-row-chains",
    "cute-fuse-square-sum",
    "cute-grid-sum-epilogue",
    "cute-causal-skip",
)
"""Run after convert-tb-to-cute and cute-late-finisher, in this order (a later one may read an
earlier one's attributes); none of them changes what cute-late-finisher reads."""


@dataclass(frozen=True)
class MirageTranspilePass(ModulePass):
    """Run passes 1-11 of passes/README.md (and, by default, the cute lowering and decisions).

    The options are what a user sets: how far to lower (`fuse`, `to-cute`, `decide`), the target
    (`arch`, `smem-limit`), the layout solver's budget (`time-limit-ms`) and a tuned plan
    (`tuning`, a `TuningPoint` spec such as "candidate=2,stages=3"; "" = the cost model's
    choices).  Python callers holding a dict of pipeline and tuning options use `from_options`.
    """

    name = "mirage-transpile"

    fuse: bool = True
    """Run `kn-fuse` first on the kernel-level ops outside `kn.customized` kernels, so
    `rms_norm(X) @ W` written as kn ops becomes fused kernels and a saved muGraph's loose
    matmul / exp / div chains are fused like a plain graph's (`fuse_plain_graphs`); the
    threadblock graphs a muGraph already holds are left as they are unless `lift` raises them."""
    lift: bool = True
    """Run `kn-lift-customized{saved-only=true}` first: a kernel read from a saved muGraph
    (`kn.saved_plan`) whose threadblock graph has an exact kernel-level form is replaced by those
    kn ops, so kn-fuse plans it like a plain graph; false keeps every saved threadblock plan as
    it is.  Hand-written threadblock graphs are never lifted here."""
    to_cute: bool = True
    """Lower to cute (convert-tb-to-cute and what follows); false stops at planned tb IR."""
    decide: bool = True
    """Run the cute decision passes (CUTE_DECISIONS) after convert-tb-to-cute; false leaves
    the kernels in those passes' input form (FileCheck inputs)."""
    arch: str = "sm_90"
    """The CUDA architecture compiled for: on sm_90 / sm_90a a lone matmul kn-fuse would leave
    to the library (cuBLAS) becomes a `contraction.contract` -> `cute.hopper_gemm` when it has
    a GEMM view; other targets keep such matmuls as library calls."""
    smem_limit: int = SM90_SMEM_LIMIT
    """Shared memory per block in bytes (tb-plan-smem's bound; tb-plan-pipeline's rings fit it)."""
    time_limit_ms: int = 200
    """tb-plan-smem's solver budget per threadblock graph, in milliseconds."""
    tuning: str = ""
    """A tuning point, `key=value` items separated by commas (target/tuning.py `TuningPoint`:
    candidate, stages, always_split, grid_sum, reduce_partials, late_finisher,
    lone_block_max_stages, online_softmax, flash_attention); unnamed keys keep the default
    pipeline's choice."""

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> MirageTranspilePass:
        """The pass of a dict holding pipeline options (fields of this class) and tuning
        options (fields of `TuningPoint`), e.g. `{"to_cute": False, "stages": 6}`.

        Raises:
            TuningError: a key that is neither, or a tuning value of the wrong type.
        """
        own = {f.name for f in fields(cls)}
        tuning = {k: v for k, v in options.items() if k not in own}
        point = TuningPoint.from_options(tuning)
        return cls(**{k: v for k, v in options.items() if k in own}, tuning=point.spec())  # type: ignore[arg-type]

    def point(self) -> TuningPoint:
        """The tuning point of the `tuning` option.

        Raises:
            PassFailedException: the spec names no tuning point (the message says why).
        """
        try:
            return TuningPoint.parse(self.tuning)
        except TuningError as err:
            raise PassFailedException(f"{self.name}{{tuning=\"{self.tuning}\"}}: {err}") from None

    def passes(self) -> list[ModulePass]:
        """The registered passes of `PIPELINE` in order, built with this pass's options, then (with
        `to_cute`) convert-tb-to-cute, convert-contraction-to-hopper, cute-late-finisher (a
        positive `late_finisher` in the tuning point) and the cute decision passes (`decide`).

        Raises:
            PassFailedException: a pass of `PIPELINE` is not registered, or the tuning spec is bad.
        """
        available = get_all_passes()
        missing = [p for p in PIPELINE if p not in available]
        if missing:
            raise PassFailedException(f"{self.name}: passes not available: {', '.join(missing)}")
        point = self.point()
        out: list[ModulePass] = []
        for name in PIPELINE:
            cls = available[name]()
            if name == "tb-plan-pipeline":
                out.append(
                    cls(stages=point.stages, smem_limit=self.smem_limit, lone_block_max_stages=point.lone_block_max_stages)  # type: ignore[call-arg]
                )
            elif name == "tb-decompose-accumulators":
                out.append(cls(reduce_partials=point.reduce_partials))  # type: ignore[call-arg]
            elif name == "tb-plan-smem":
                out.append(cls(time_limit_ms=self.time_limit_ms, smem_limit=self.smem_limit))  # type: ignore[call-arg]
            else:
                out.append(cls())
        if self.to_cute and TO_CUTE in available:
            out.append(available[TO_CUTE]()())
            if TO_HOPPER in available:
                out.append(available[TO_HOPPER]()())
            if point.late_finisher:
                out.append(available[LATE_FINISHER]()(shift=point.late_finisher))  # type: ignore[call-arg]
            if self.decide:
                out += cute_decision_passes()
        return out

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Fuse the plain kernel graphs of `op` first (`fuse`, with the tuning point's kn-fuse
        options), then run `passes()` in order.

        Raises:
            PassFailedException: a pass is not registered, the tuning spec is bad, or any pass
                fails (its located message).
        """
        point = self.point()
        if self.fuse and self.lift:
            lift_customized(op, saved_only=True)
        if self.fuse:
            fuse_plain_graphs(
                ctx,
                op,
                candidate=point.candidate,
                always_split=point.always_split,
                grid_sum=point.grid_sum,
                lone_block_max_stages=point.lone_block_max_stages,
                online_softmax=point.online_softmax,
                hopper_gemm=self.arch in HOPPER_GEMM_ARCHS,
                hopper_attention=point.flash_attention,
            )
        for p in self.passes():
            p.apply(ctx, op)


def cute_decision_passes() -> list[ModulePass]:
    """The passes of CUTE_DECISIONS, in order.

    Raises:
        PassFailedException: one of them is not registered."""
    available = get_all_passes()
    missing = [p for p in CUTE_DECISIONS if p not in available]
    if missing:
        raise PassFailedException(f"cute-decisions: passes not available: {', '.join(missing)}")
    return [available[name]()() for name in CUTE_DECISIONS]


@dataclass(frozen=True)
class CuteDecisionsPass(ModulePass):
    """`cute-decisions`: run every cute decision pass (CUTE_DECISIONS) in order, for cute IR
    lowered by hand or by convert-tb-to-cute alone."""

    name = "cute-decisions"

    without: str = ""
    """Comma-separated decision passes to leave out (tests of the printer's error when one
    decision is missing)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Run the cute decision passes not named in `without`, in `CUTE_DECISIONS` order.

        Raises:
            PassFailedException: a decision pass is not registered, or one fails.
        """
        skipped = {name.strip() for name in self.without.split(",") if name.strip()}
        for p in cute_decision_passes():
            if p.name not in skipped:
                p.apply(ctx, op)


def fuse_plain_graphs(ctx: Context, module: ModuleOp, **fuse_options: object) -> None:
    """Run `kn-fuse` with `fuse_options` (its own, `kn_partition.PartitionOptions`: `candidate`,
    `always_split`, ...; absent ones keep kn-fuse's defaults) on the functions of `module` that
    hold kernel-level ops outside `kn.customized` kernels: plain kernel graphs, and saved
    muGraphs whose loose ops (e.g. gated MLP's `kn.mul` after its kernel) would otherwise run
    as library calls. A saved kernel's own threadblock graph is left as it is (kn-partition
    reads a `kn.customized` result as an input). Keeps the order of the module's top-level ops."""
    from xdsl.dialects.func import FuncOp

    from mirage_xdsl.passes.conversion.plan_group import fusible_op

    def is_plain(top: object) -> bool:
        if not isinstance(top, FuncOp) or any(o.name == "cute.kernel" for o in top.walk()):
            return False
        return any(fusible_op(o) for o in top.body.block.ops)

    tops = list(module.body.block.ops)
    plain = [top for top in tops if is_plain(top)]
    fuse = get_all_passes().get("kn-fuse")
    if not plain or fuse is None:
        return
    for top in tops:
        top.detach()
    scratch = ModuleOp(plain)
    fuse()(**fuse_options).apply(ctx, scratch)  # type: ignore[call-arg]
    for top in plain:
        top.detach()
    module.body.block.add_ops(tops)
