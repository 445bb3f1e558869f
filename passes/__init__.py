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
    "kn-decompose-rms-norm": ("decompose_kn_rms_norm", "DecomposeKnRmsNormPass"),
    "tb-decompose-accumulators": ("decompose_accumulators", "DecomposeAccumulatorsPass"),
    "tb-fusion-chains": ("fusion_chains", "FusionChainsPass"),
    "tb-resolve-layout": ("resolve_layout", "ResolveLayoutPass"),
    "tb-compute-strides": ("compute_strides", "ComputeStridesPass"),
    "kn-plan-workspace": ("plan_workspace", "PlanWorkspacePass"),
    "tb-schedule": ("schedule", "SchedulePass"),
    "tb-plan-swizzle": ("plan_swizzle", "PlanSwizzlePass"),
    "tb-plan-pipeline": ("plan_pipeline", "PlanPipelinePass"),
    "tb-plan-smem": ("plan_smem", "PlanSmemPass"),
    "convert-tb-to-cute": ("convert_tb_to_cute", "ConvertTbToCutePass"),
    "cute-late-finisher": ("late_finisher", "LateFinisherPass"),
    "mirage-transpile": ("pipeline", "MirageTranspilePass"),
    "kn-expand-composites": ("kn_expand_composites", "KnExpandCompositesPass"),
    "kn-recognize-composites": ("kn_expand_composites", "KnRecognizeCompositesPass"),
    "kn-simplify": ("kn_simplify", "KnSimplifyPass"),
    "kn-partition": ("kn_partition", "KnPartitionPass"),
    "kn-fuse": ("kn_fuse", "KnFusePass"),
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
