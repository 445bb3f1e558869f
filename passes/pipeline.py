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
available is an error (the pipeline would silently skip a decision). Options forwarded:
`hopper-gmma` (tb-plan-swizzle), `stages` (tb-plan-pipeline: force the cp.async pipeline
depth, 0 = automatic), `time-limit-ms` and `smem-limit` (tb-plan-smem; `smem-limit` also
bounds tb-plan-pipeline), `candidate` and `always-split` (kn-fuse: which default threadblock
graph to take, for tuning), `lone-block-max-stages` (tb-plan-pipeline and kn-fuse: the ring
depth of wide lone blocks, built and estimated alike), `late-finisher` (cute-late-finisher's
`shift`, run after convert-tb-to-cute when positive; 0 = off), `decide` (run
CUTE_DECISIONS; false stops after convert-tb-to-cute / cute-late-finisher, the input form of
the cute decision passes), `hopper-gemm` (kn-fuse: lone library matmuls with a GEMM view
become `contraction.contract`s, which convert-contraction-to-hopper lowers to the sm_90a
`cute.hopper_gemm` beside the other kernels; false for targets other than sm_90).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.passes import get_all_passes
from mirage_xdsl.passes.tb.plan_pipeline import LONE_BLOCK_MAX_STAGES
from mirage_xdsl.passes.tb.plan_smem import SM90_SMEM_LIMIT

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
    "cute-grid-sum-epilogue",
    "cute-fuse-square-sum",
    "cute-causal-skip",
)
"""Run after convert-tb-to-cute and cute-late-finisher, in this order (a later one may read an
earlier one's attributes); none of them changes what cute-late-finisher reads."""


@dataclass(frozen=True)
class MirageTranspilePass(ModulePass):
    """Run passes 1-11 of passes/README.md."""

    name = "mirage-transpile"

    fuse: bool = True
    """Run `kn-fuse` first on the kernel-level ops outside `kn.customized` kernels, so
    `rms_norm(X) @ W` written as kn ops becomes fused kernels and a saved muGraph's loose
    matmul / exp / div chains are fused like a plain graph's (`fuse_plain_graphs`); the
    threadblock graphs a muGraph already holds are left as they are."""
    to_cute: bool = True
    hopper_gmma: bool = False
    time_limit_ms: int = 200
    smem_limit: int = SM90_SMEM_LIMIT
    stages: int = 0
    candidate: int = 0
    """Forwarded to `kn-fuse`: lower each fused group with its plan of this cost rank."""
    always_split: bool = True
    """Forwarded to `kn-fuse`: also consider split-K plans when an unsplit grid fills the SMs."""
    grid_sum: bool = True
    """Forwarded to `kn-fuse`: also consider split-K plans combined inside the kernel."""
    reduce_partials: bool = True
    """Forwarded to `tb-decompose-accumulators`: reduce a split block's accumulator before
    its grid sum (a smaller partial)."""
    lone_block_max_stages: int = LONE_BLOCK_MAX_STAGES
    """Forwarded to `tb-plan-pipeline` (the ring depth of wide lone blocks) and to `kn-fuse`,
    whose estimates count that ring, so the plan chosen and the kernel built agree."""
    online_softmax: bool = False
    """Forwarded to `kn-fuse`: a max over the loop axis read inside the loop becomes a running
    max with rescaled accumulators (one kernel; see `target.cost_model.DeviceModel.online_softmax`)."""
    late_finisher: int = 1
    """Forwarded to `cute-late-finisher` as `shift` (iterations each split-K partner hands to
    its group's finisher); 0 = equal splits combined by the last block to arrive.  On by
    default: it touches only split-K grid sums, and on both shared workloads that have one it
    was faster (H200, 2026-11-26: rmsnorm bs1 13.4 -> 12.7 µs, bs8 14.8 -> 14.6)."""
    decide: bool = True
    """Run the cute decision passes (CUTE_DECISIONS) after convert-tb-to-cute; false leaves
    the kernels in those passes' input form (FileCheck inputs)."""
    hopper_gemm: bool = True
    """Forwarded to `kn-fuse`: a lone matmul it would leave to the library (cuBLAS) becomes a
    `contraction.contract` -> `cute.hopper_gemm` (sm_90a) when it has a GEMM view; pass false
    for targets other than sm_90."""

    def passes(self) -> list[ModulePass]:
        """The registered passes of `PIPELINE` in order, built with this pass's options, then (with
        `to_cute`) convert-tb-to-cute, cute-late-finisher (`late_finisher` > 0) and the cute
        decision passes (`decide`).

        Raises:
            PassFailedException: a pass of `PIPELINE` is not registered.
        """
        available = get_all_passes()
        missing = [p for p in PIPELINE if p not in available]
        if missing:
            raise PassFailedException(f"{self.name}: passes not available: {', '.join(missing)}")
        out: list[ModulePass] = []
        for name in PIPELINE:
            cls = available[name]()
            if name == "tb-plan-swizzle":
                out.append(cls(hopper_gmma=self.hopper_gmma))  # type: ignore[call-arg]
            elif name == "tb-plan-pipeline":
                out.append(
                    cls(stages=self.stages, smem_limit=self.smem_limit, lone_block_max_stages=self.lone_block_max_stages)  # type: ignore[call-arg]
                )
            elif name == "tb-decompose-accumulators":
                out.append(cls(reduce_partials=self.reduce_partials))  # type: ignore[call-arg]
            elif name == "tb-plan-smem":
                out.append(cls(time_limit_ms=self.time_limit_ms, smem_limit=self.smem_limit))  # type: ignore[call-arg]
            else:
                out.append(cls())
        if self.to_cute and TO_CUTE in available:
            out.append(available[TO_CUTE]()())
            if TO_HOPPER in available:
                out.append(available[TO_HOPPER]()())
            if self.late_finisher:
                out.append(available[LATE_FINISHER]()(shift=self.late_finisher))  # type: ignore[call-arg]
            if self.decide:
                out += cute_decision_passes()
        return out

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Fuse the plain kernel graphs of `op` first (`fuse`, with the kn-fuse options), then run `passes()` in order.

        Raises:
            PassFailedException: a pass is not registered, or any pass fails (its located message).
        """
        if self.fuse:
            fuse_plain_graphs(
                ctx,
                op,
                candidate=self.candidate,
                always_split=self.always_split,
                grid_sum=self.grid_sum,
                lone_block_max_stages=self.lone_block_max_stages,
                online_softmax=self.online_softmax,
                hopper_gemm=self.hopper_gemm,
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
