"""Passes of the Mirage transpiler, one module per pass (see passes/README.md for the IR contract).

`get_all_passes()` maps each pass name to a zero-argument factory returning the pass class,
so modules are imported only when a pipeline names them (xDSL's registry convention).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.passes import ModulePass

# pass name -> (module under mirage_xdsl.passes, class name)
PASS_MODULES: dict[str, tuple[str, str]] = {
    "kn-decompose-rms-norm": ("kn.decompose_rms_norm", "DecomposeKnRmsNormPass"),
    "tb-decompose-accumulators": ("tb.decompose_accumulators", "DecomposeAccumulatorsPass"),
    "tb-fusion-chains": ("tb.fusion_chains", "FusionChainsPass"),
    "tb-resolve-layout": ("tb.resolve_layout", "ResolveLayoutPass"),
    "tb-compute-strides": ("tb.compute_strides", "ComputeStridesPass"),
    "kn-alias-reshape": ("kn.alias_reshape", "KnAliasReshapePass"),
    "kn-plan-workspace": ("kn.plan_workspace", "PlanWorkspacePass"),
    "tb-schedule": ("tb.schedule", "SchedulePass"),
    "tb-plan-swizzle": ("tb.plan_swizzle", "PlanSwizzlePass"),
    "tb-plan-pipeline": ("tb.plan_pipeline", "PlanPipelinePass"),
    "tb-plan-smem": ("tb.plan_smem", "PlanSmemPass"),
    "convert-tb-to-cute": ("conversion.tb_to_cute", "ConvertTbToCutePass"),
    "cute-late-finisher": ("cute.late_finisher", "LateFinisherPass"),
    "cute-block-reduce": ("cute.block_reduce", "BlockReducePass"),
    "cute-slice-mma": ("cute.slice_mma", "SliceMmaPass"),
    "cute-register-accumulators": ("cute.register_accumulators", "RegisterAccumulatorsPass"),
    "cute-weight-prefetch": ("cute.weight_prefetch", "WeightPrefetchPass"),
    "cute-row-chains": ("cute.row_chains", "RowChainsPass"),
    "cute-grid-sum-epilogue": ("cute.grid_sum_epilogue", "GridSumEpiloguePass"),
    "cute-fuse-square-sum": ("cute.fuse_square_sum", "FuseSquareSumPass"),
    "cute-causal-skip": ("cute.causal_skip", "CausalSkipPass"),
    "cute-decisions": ("pipeline", "CuteDecisionsPass"),
    "mirage-transpile": ("pipeline", "MirageTranspilePass"),
    "kn-expand-composites": ("kn.expand_composites", "KnExpandCompositesPass"),
    "kn-recognize-composites": ("kn.expand_composites", "KnRecognizeCompositesPass"),
    "kn-simplify": ("kn.simplify", "KnSimplifyPass"),
    "kn-partition": ("conversion.kn_partition", "KnPartitionPass"),
    "kn-fold-views": ("kn.fold_views", "KnFoldViewsPass"),
    "kn-fuse": ("conversion.kn_fuse", "KnFusePass"),
    "kn-lift-customized": ("conversion.lift_customized", "KnLiftCustomizedPass"),
    "kn-widen-sums": ("kn.widen_sums", "KnWidenSumsPass"),
    "kn-to-task-graph": ("mpk.task_graph", "KnToTaskGraphPass"),
    "mirage-megakernel": ("mpk.pipeline", "MirageMegakernelPass"),
    "contraction-split-dim": ("contraction.passes", "SplitDimPass"),
    "contraction-fuse-dims": ("contraction.passes", "FuseDimsPass"),
    "contraction-permute-dims": ("contraction.passes", "PermuteDimsPass"),
    "contraction-make-executable": ("contraction.passes", "MakeExecutablePass"),
    "convert-contraction-to-hopper": ("contraction.to_hopper", "ConvertContractionToHopperPass"),
    "convert-contraction-to-tb": ("contraction.to_tb", "ConvertContractionToTbPass"),
    "contraction-permute-operands": ("contraction.permute_operands", "PermuteOperandsPass"),
    "convert-contraction-permute-to-cute": ("contraction.to_copy", "ConvertPermuteToCutePass"),
}


def _factory(module: str, cls: str) -> Callable[[], type[ModulePass]]:
    def load() -> type[ModulePass]:
        return getattr(importlib.import_module(f"mirage_xdsl.passes.{module}"), cls)

    return load


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name -> factory of the pass class, for every pass whose module exists."""
    available: dict[str, Callable[[], type[ModulePass]]] = {}
    for name, (module, cls) in PASS_MODULES.items():
        if importlib.util.find_spec(f"mirage_xdsl.passes.{module}") is not None:
            available[name] = _factory(module, cls)
    return available
