"""The target model: what the compiler assumes about the GPU.

One place for the device limits that the planner (`passes/conversion/plan_cost.py`),
the verifiers (`dialects/cute`), the printer (`codegen/`), the host emulator and the runtime
all read (`device.py`, importable without xDSL), the errors raised when a kernel
exceeds them (`errors.py`), and the planner's device model built on them (`cost_model.py`:
the rates, latencies and calibrations of kn-partition's cost model, with where each was
measured).
"""

from mirage_xdsl.target.device import (  # noqa: F401
    DEFAULT_SMEM_PER_BLOCK,
    ELEMENTWISE_ACCUM_MAX_REGS,
    MAX_FORLOOP_RANGE,
    MAX_NESTING_DEPTH,
    MAX_TENSOR_ELEMENTS,
    SM90,
    SMEM_OPTIN_PER_BLOCK,
    GpuLimits,
)
