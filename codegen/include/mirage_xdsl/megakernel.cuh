// mirage_xdsl device library: the persistent megakernel's events and watchdog
// (codegen/megakernel.py; issue #32, seed 003 sections 2 and 5).
//
// Event counters are 64-bit and monotonic across launches: launch g (0, 1, ...) waits for
// counter >= (g + 1) * count; the last worker to finish a launch bumps the generation word, so
// the launch replays in a CUDA graph without resetting the counters.  Memory order (PTX ISA,
// "Memory Consistency Model"): a producer's threads meet in bar.sync, one thread fences and
// adds with atom.add.release.gpu; a consumer's thread 0 spins with ld.acquire.gpu and its
// block meets in bar.sync before the task reads (the pattern of cooperative groups' grid sync).
#pragma once
#include <cstdint>

#include "dependent_launch.cuh"

namespace mx {

// state words (uint64) at the megakernel's base in the counter buffer
enum MpkState : int {
  kMpkGen = 0,      // launches completed
  kMpkDone = 1,     // workers finished, summed over launches
  kMpkError = 2,    // 0; 1 once an event wait timed out; 2 when a worker found no SM-major slot;
                    // 3 when a worker's queue wait timed out; 4 when the scheduler's did
  kMpkErrTask = 3,
  kMpkErrEvent = 4,
  kMpkErrValue = 5,  // the event's count in this launch when the wait gave up
  kMpkErrNeeded = 6,
  kMpkErrWorker = 7,
  kMpkStateWords = 8,
};

__device__ __forceinline__ unsigned long long mpk_ld_acquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned long long mpk_add_release(unsigned long long* p, unsigned long long v) {
  unsigned long long old;
  asm volatile("atom.add.release.gpu.global.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}

// After mpk_add_release (or a fence) of the same thread: a relaxed add, ordered after the
// task's writes by that fence (PTX ISA, "release pattern": fence then a relaxed write).
__device__ __forceinline__ void mpk_add_relaxed(unsigned long long* p, unsigned long long v) {
  asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void mpk_st_relaxed(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ unsigned mpk_ld_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned long long mpk_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Record the launch's first error in the state words (runtime/megakernel.py reads them after
// the launch): `code` with its task, event, value and needed words and the recording worker,
// unless another thread recorded an error first.
__device__ __forceinline__ void mpk_record_error(unsigned long long* state, unsigned long long code, unsigned long long task,
                                                 unsigned long long event, unsigned long long value,
                                                 unsigned long long needed) {
  if (atomicCAS(state + kMpkError, 0ull, code) == 0ull) {
    state[kMpkErrTask] = task;
    state[kMpkErrEvent] = event;
    state[kMpkErrValue] = value;
    state[kMpkErrNeeded] = needed;
    state[kMpkErrWorker] = blockIdx.x;
    __threadfence();
  }
}

// Thread 0 of a worker: wait until *ev >= base + needed.  Returns 0 when reached, 1 when the
// wait gave up: it spun past timeout_ns (globaltimer ns; it records `code`, task, event and
// counts in the state words) or another worker has recorded an error.  Back-off: __nanosleep
// doubling from 32 to 256 ns.
__device__ __noinline__ int mpk_wait(const unsigned long long* ev, unsigned long long base, unsigned long long needed,
                                     unsigned long long* state, unsigned task, unsigned event,
                                     unsigned long long timeout_ns, unsigned long long code = 1ull) {
  const unsigned long long target = base + needed;
  if (mpk_ld_acquire(ev) >= target) return 0;
  const unsigned long long t0 = mpk_globaltimer();
  unsigned ns = 32;
  while (true) {
#ifndef MX_MPK_SPIN
    __nanosleep(ns);
    if (ns < 256) ns *= 2;
#endif
    if (mpk_ld_acquire(ev) >= target) return 0;
    if (*reinterpret_cast<volatile unsigned long long*>(state + kMpkError)) return 1;
    if (mpk_globaltimer() - t0 > timeout_ns) {
      const unsigned long long now = *reinterpret_cast<volatile const unsigned long long*>(ev);
      mpk_record_error(state, code, task, event, now - base, needed);
      return 1;
    }
  }
}

// Thread 0 of worker `worker` under scheduler dispatch (codegen/megakernel_scheduler.py): the
// task at position i of its queue in this launch, once the scheduler's head passed it
// (head >= base + i + 1, ld.acquire.gpu), or ~0u when the wait gave up (error 3: the worker in
// kMpkErrEvent, i in kMpkErrTask, the tasks pushed so far in kMpkErrValue).
__device__ __noinline__ unsigned mpk_pop(const unsigned long long* head, const unsigned* slots, unsigned long long base,
                                         unsigned i, unsigned long long* state, unsigned worker,
                                         unsigned long long timeout_ns) {
  if (mpk_wait(head, base, i + 1ull, state, i, worker, timeout_ns, 3ull)) return ~0u;
  return mpk_ld_relaxed(slots + i);
}

// Lane 0 of the scheduler when its watchdog fired while event `event` (at `ev`) had not
// reached base + needed: error 4 with the event, its count and its first consumer `task`.
__device__ __forceinline__ void mpk_schedule_timeout(unsigned long long* state, const unsigned long long* ev,
                                                     unsigned long long base, unsigned long long needed,
                                                     unsigned task, unsigned event) {
  mpk_record_error(state, 4ull, task, event, *reinterpret_cast<volatile const unsigned long long*>(ev) - base, needed);
}

// A worker's view of its launch (in __shared__ memory; codegen/megakernel.py).  Under static
// dispatch the megakernel is launched with programmatic dependent launch: a worker places
// itself (`mpk_place`), lets the next launch in, and issues the kn.weight loads of its first
// task's ring prologue before it waits for the previous grid (`mpk_launch_sync`, called by
// that task's body through its gate): weights are never written, everything else may be.
struct MpkLaunch {
  unsigned long long gen;     // launches completed before this one (set by mpk_launch_sync)
  unsigned long long ticket;  // the SM's slot counter before this worker's add (SM-major graphs)
  unsigned ctas;              // worker CTAs per SM of an SM-major graph, else 0
};

// Thread 0 of an SM-major worker, before the wait for the previous grid: its worker index
// slot * num_sms + smid, where slot counts the workers that reached this SM (the per-SM uint64
// counters grow by `ctas` per launch: slot = ticket % ctas; mpk_launch_sync checks that the
// ticket belongs to this launch, ticket / ctas == gen).  The launch asks for enough shared
// memory that at most `ctas` workers fit an SM, so `ctas` x SMs co-resident workers hold every
// slot once.  An SM id >= num_sms (another GPU than the graph was built for) records error 2
// (smid in kMpkErrTask) and returns ~0u; the worker then exits and the others' waits give up.
__device__ __forceinline__ unsigned mpk_place(unsigned long long* slots, MpkLaunch* launch, unsigned num_sms,
                                              unsigned long long* state) {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (sm < num_sms) {
    launch->ticket = atomicAdd(slots + sm, 1ull);
    return static_cast<unsigned>(launch->ticket % launch->ctas) * num_sms + sm;
  }
  mpk_record_error(state, 2ull, sm, 0ull, ~0ull, launch->ctas);
  return ~0u;
}

// Every thread of a worker, once, before it reads anything an earlier launch or kernel wrote:
// wait for the previous grid (griddepcontrol.wait; a no-op without PDL), read this launch's
// generation (the previous launch's last worker published it) and check the worker's placement
// ticket against it (error 2: more than `ctas` workers reached the SM in this launch; the
// would-be slot in kMpkErrValue).  Returns false when the worker must stop.
__device__ __noinline__ bool mpk_launch_sync(MpkLaunch* launch, unsigned long long* state, int* abort) {
  wait_for_prior_grids();
  if (threadIdx.x == 0) {
    const unsigned long long gen = *reinterpret_cast<volatile unsigned long long*>(state + kMpkGen);
    launch->gen = gen;
    if (launch->ctas != 0 && launch->ticket / launch->ctas != gen) {
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      mpk_record_error(state, 2ull, sm, 0ull, launch->ticket - gen * launch->ctas, launch->ctas);
      *abort = 1;
    }
  }
  __syncthreads();
  return *abort == 0;
}

// The dependency wait of one task, handed to its body (codegen/megakernel.py): the body first
// issues the cp.async loads of its ring prologue from kn.weight inputs, calls launch_sync()
// (the worker's first task under PDL waits for the previous grid there), issues the prologue
// loads of the other graph inputs (nothing in the launch writes one: a KV cache), then calls
// pass(): thread 0 waits on the task's event (launch g waits for (g + 1) x its count), the
// block meets in __syncthreads, and with tracing thread 0 stores the task's start.  The loads
// stream while the worker waits, as a PDL kernel's prologue does before griddepcontrol.wait.
// Both return false when the worker must stop (the watchdog gave up, a placement error); the
// body then returns at once.  A task of several blocks passes an armed gate to its first
// block only.
struct MpkGate {
  const unsigned long long* ev;   // nullptr: nothing to wait for
  unsigned long long needed;
  unsigned long long* state;
  unsigned task, event;
  unsigned long long timeout_ns;
  int* abort;                     // the worker's __shared__ abort flag
  unsigned long long* trace;      // nullptr, or where the task's start time goes
  MpkLaunch* launch;              // the worker's launch (its generation)
  bool sync;                      // the worker's first task: launch_sync() waits for the previous grid
  __device__ __forceinline__ bool launch_sync() const { return !sync || mpk_launch_sync(launch, state, abort); }
  __device__ __forceinline__ bool pass() const {
    if (ev != nullptr) {
      if (threadIdx.x == 0) *abort = mpk_wait(ev, launch->gen * needed, needed, state, task, event, timeout_ns);
      __syncthreads();
      if (*abort) return false;
    }
    if (trace != nullptr && threadIdx.x == 0) *trace = mpk_globaltimer();
    return true;
  }
};

// Thread 0 of a worker, after its last task: count the worker done; the last of the launch
// publishes the next generation (after every worker has read the current one at its start).
__device__ __forceinline__ void mpk_finish(unsigned long long* state, unsigned long long gen, unsigned workers) {
  __threadfence();
  const unsigned long long done = atomicAdd(state + kMpkDone, 1ull) + 1ull;
  if (done == (gen + 1ull) * workers) {
    __threadfence();
    atomicExch(state + kMpkGen, gen + 1ull);
  }
}

}  // namespace mx
