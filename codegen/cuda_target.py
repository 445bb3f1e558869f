"""The `cuda` output target: one CUDA translation unit + one LaunchPlan per kernel graph.

    mirage-opt graph.mlir -p mirage-transpile -t cuda
    mirage-opt graph.mlir -p mirage-transpile -t 'cuda{arch="sm_90"}'

prints the source followed by one `/* mirage-launch-plan @<func> <json> */` comment per
function.  From Python: `emit_cuda(module, arch) -> CudaProgram(source, plans)`.  The
module must be lowered to the `cute` dialect (`mirage-transpile` ends with
`convert-tb-to-cute`): the target only prints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from mirage_xdsl.codegen.cuda_printer import print_module
from mirage_xdsl.codegen.cuda_syntax import CudaEmitError
from mirage_xdsl.codegen.hopper_gemm import target_arch
from mirage_xdsl.codegen.launch_plan import LaunchPlan

PLAN_BEGIN = "/* mirage-launch-plan @"
PLAN_END = "*/"


@dataclass(frozen=True)
class CudaProgram:
    """What the runtime compiles and runs: one translation unit and the plans that use it."""

    source: str
    plans: dict[str, LaunchPlan] = field(default_factory=dict)
    arch: str = "sm_90"

    @property
    def kernel_names(self) -> list[str]:
        """The `extern "C"` kernel names of `source`, in order."""
        return re.findall(r'extern "C" __global__ void __launch_bounds__\(\d+(?:, \d+)?\) (\w+)\(', self.source)

    def text(self) -> str:
        """The `-t cuda` output: the source, then one plan comment per function."""
        parts = [self.source]
        for name, plan in self.plans.items():
            parts.append(f"{PLAN_BEGIN}{name}\n{plan.to_json()}\n{PLAN_END}\n")
        return "\n".join(parts)


def parse_plans(text: str) -> dict[str, LaunchPlan]:
    """The plans of a `-t cuda` output (inverse of `CudaProgram.text`)."""
    plans: dict[str, LaunchPlan] = {}
    pattern = re.compile(re.escape(PLAN_BEGIN) + r"(\S+)\n(.*?)\n" + re.escape(PLAN_END), re.S)
    for name, body in pattern.findall(text):
        plans[name] = LaunchPlan.from_json(body)
    return plans


def _needs_lowering(module: ModuleOp) -> bool:
    from mirage_xdsl.dialects.kn import CustomizedOp

    return any(isinstance(op, CustomizedOp) for op in module.walk())


def emit_cuda(module: ModuleOp, arch: str = "sm_90") -> CudaProgram:
    """CUDA source (all functions of `module` in one translation unit) and launch plans.

    The program's `arch` may differ from the requested one: a module holding a
    `cute.hopper_gemm` asked for sm_90 is compiled for sm_90a (`hopper_gemm.target_arch`).

    Raises:
        DiagnosticException: an op cannot be lowered or printed (the message names the op
            and the missing pass or the rule); `HopperArchError` for a `cute.hopper_gemm`
            and a target other than sm_90.
    """
    if _needs_lowering(module):
        raise CudaEmitError(
            "emit_cuda: the module still holds kn.customized ops; lower them first with "
            "convert-tb-to-cute (mirage-transpile runs it)"
        )
    from mirage_xdsl.codegen.megakernel import has_task_graph, print_module_megakernels

    arch = target_arch(module, arch)  # sm_90 -> sm_90a for cute.hopper_gemm (the one place)
    if has_task_graph(module):
        source, plans = print_module_megakernels(module, arch)
    else:
        source, plans = print_module(module, arch)
    return CudaProgram(source, plans, arch)


@dataclass(frozen=True)
class CudaTarget(Target):
    """`-t cuda`: print the CUDA translation unit and the launch plans."""

    name = "cuda"

    arch: str = "sm_90"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        """Write the CUDA source of `module` (launch plans in its trailing comment) to `output`."""
        output.write(emit_cuda(module, self.arch).text())
