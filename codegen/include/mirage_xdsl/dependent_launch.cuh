// mirage_xdsl device library: programmatic dependent launch (PDL, sm_90+).
//
// The runtime launches generated kernels with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
// (LaunchPlan step field `pdl`).  Such a kernel may be launched as soon as every block of the
// previous kernel of the stream has exited, before that kernel's completion is signalled and
// its writes are flushed, which takes the end-of-kernel -> next-launch latency off the
// critical path.  That is only correct because every generated kernel calls
// `wait_for_prior_grids` before its first global memory access: `griddepcontrol.wait` blocks
// until the prerequisite grids have completed and their memory operations are visible (PTX
// ISA, "griddepcontrol"; CUDA C++ Programming Guide, "Programmatic Dependent Launch and
// Synchronization").
//
// The kernels do not trigger their dependents early (`griddepcontrol.launch_dependents`):
// on the H200 that let the next grid's blocks take SM slots while this grid still ran, and
// cost 1.5 µs on rmsnorm_linear bs1 and 1.7 µs on gqa_bs8 (2026-11-25); the implicit trigger
// at block exit never lost.
// Triggering after the main loop instead (the epilogue left) was no faster either: gated_mlp
// lost 2.4-3.7 µs, and 7 of 8 gqa_bs8 plans failed the output check in both runs
// (H200, 2026-11-25), most likely the ld.global.nc hazard described below:
// their combine kernel read its partials through the non-coherent path.
//
// The exception: a kernel that streams `kn.weight` inputs issues the weights' ring prologue
// before its wait and triggers its dependents at its start (`allow_dependent_launch`),
// launched so that each SM holds at most ceil(blocks / SMs) blocks (KernelLaunch.one_wave):
// the next such grid's blocks then take this grid's SM slots as they free and prefetch their
// weights while this grid finishes (codegen/weight_prefetch.py: 0.2-0.6 µs per launch on an
// H200 over a trigger after the main loop).
//
// Because a kernel may run while the previous grid still writes, the printer declares its
// inputs without `__restrict__` (no non-coherent ld.global.nc loads, which are undefined for
// data written during the kernel's lifetime); only kn.weight inputs keep it.  With the trigger
// at the start, a plan's combine kernel that read its partials through ld.global.nc gave a
// wrong result once in three runs (gated_mlp c15x, H200, 2026-11-25).
//
// Launched without the attribute (older plans, `programmatic_launch=False`) the wait is a
// no-op; below sm_90 and in the host emulation nothing is emitted.
#pragma once
#include "core.cuh"

namespace mx {

__device__ __forceinline__ void wait_for_prior_grids() {
#if !defined(MX_HOST) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Let the dependent grid launch once every block of this grid has called this or exited.
// Its blocks still wait (`wait_for_prior_grids`) for this grid to complete before they read
// anything but weights (PTX ISA, "griddepcontrol").
__device__ __forceinline__ void allow_dependent_launch() {
#if !defined(MX_HOST) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace mx
