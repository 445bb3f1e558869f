"""Run a `CudaProgram` on the CPU: the generated kernels compiled as host C++ (-DMX_HOST).

For tests on machines without a GPU.  `codegen/include/mirage_xdsl/host.cuh` turns every
CUDA thread of a block into a cooperative fiber, emulates barriers, warp shuffles and
`mma.sync` (decoding the PTX fragment layouts), and converts half/bfloat16 in software, so
the numbers produced are those of the generated code (up to fp32 summation order).  Library
steps of a LaunchPlan run in numpy with the reference executor's semantics.

    emu = HostEmulator(emit_cuda(module))
    outputs = emu.run("graph_0", [x, w])          # numpy arrays in, numpy arrays out

bfloat16 tensors (numpy has none) are stored as their uint16 bit patterns like the CuPy
runtime does (`runtime/library_ops.py`): inputs are rounded to bf16 on the way in, bf16
outputs come back as float32 arrays holding the bf16 values.

Slow (a block of 128 threads costs about a millisecond per barrier phase); meant for a few
kernel graphs per test.  Needs a C++17 compiler (`$CXX`, else g++/c++/clang++) on Linux.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mirage_xdsl.codegen.cuda_target import CudaProgram
from mirage_xdsl.codegen.device_library import DEVICE_LIBRARY_INCLUDE
from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan, LibraryCall, TensorRef, TensorSpec
from mirage_xdsl.runtime.guarded_memory import GuardedBuffers
from mirage_xdsl.runtime.interop import strided_view
from mirage_xdsl.runtime.library_ops import int_param, load, store
from mirage_xdsl.target import SM90

INCLUDE_DIR = DEVICE_LIBRARY_INCLUDE
SIGNATURE = re.compile(r'extern "C" __global__ void __launch_bounds__\(\d+(?:, \d+)?\) (\w+)\(\n(.*?)\) \{', re.S)
SMEM_BYTES = SM90.smem_per_block_optin
_SMEM_ARRAY_BYTES = -(-SMEM_BYTES // 65536) * 65536  # whole pages (up to 64 KiB ones): the tail is protected per launch

_NP_DTYPES = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "int8": np.int8, "uint16": np.uint16}


class HostEmulationError(RuntimeError):
    """The host build failed or a plan step cannot be emulated."""


def find_cxx() -> str | None:
    """Path of the host C++ compiler: `$CXX`, else g++, c++ or clang++ on PATH; None if none."""
    for cand in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


@functools.cache
def _is_gcc(cxx: str) -> bool:
    """Whether `cxx` is GCC (its `--version` names no clang): GCC-only flags are passed to it."""
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "clang" not in out.lower()


def _thunks(source: str) -> str:
    lines = [
        "",
        "// ---- host emulation entry points (generated) ----",
        f'extern "C" {{ __attribute__((aligned(65536))) unsigned char smem[{_SMEM_ARRAY_BYTES}]; }}',
        "namespace {",
        "struct Entry { const char* name; void (*fn)(void**); };",
    ]
    entries = []
    for name, params in SIGNATURE.findall(source):
        types = []
        for p in params.split(","):
            p = p.strip()
            ctype = re.sub(r"\s*\b\w+$", "", p).replace("__restrict__", "").strip()  # drop the name
            types.append(ctype)
        args = ", ".join(f"({t})a[{i}]" for i, t in enumerate(types))
        lines.append(f"void thunk_{name}(void** a) {{ {name}({args}); }}")
        entries.append(f'{{"{name}", thunk_{name}}}')
    # a plan of library calls only has no kernel: the table then holds just the end marker
    lines.append("const Entry kEntries[] = {" + ", ".join([*entries, "{nullptr, nullptr}"]) + "};")
    lines.append("}  // namespace")
    lines.append(
        """
// 0: done; -1: no kernel of that name; else mxh::launch_checked's code (*bad: the byte).
extern "C" int mxh_launch(const char* name, int gx, int gy, int gz, int bx, int by, int bz, int smem_bytes,
                          void** args, long* bad) {
  for (const Entry* e = kEntries; e->name; ++e)
    if (std::strcmp(e->name, name) == 0)
      return mxh::launch_checked(e->fn, args, mxh_dim3{(unsigned)gx, (unsigned)gy, (unsigned)gz},
                                 mxh_dim3{(unsigned)bx, (unsigned)by, (unsigned)bz}, (size_t)smem_bytes, smem, sizeof(smem), bad);
  return -1;
}
"""
    )
    return "\n".join(lines)


def build_host_library(program: CudaProgram, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Compile the program's kernels as a host shared library (cached by content).

    The library is `<cache dir>/host/<key>.so`, the key a sha256 of the source, our headers,
    the compiler and its flags; the cache dir is `cache_dir`, else `$MIRAGE_XDSL_CACHE_DIR`,
    else `~/.cache/mirage_xdsl`.

    Raises:
        HostEmulationError: no C++ compiler found, or the build failed (its first 4000
            characters of errors in the message).
        OSError: the cache dir cannot be created or written.
    """
    cxx = find_cxx()
    if cxx is None:
        raise HostEmulationError("no C++ compiler found (set CXX)")
    source = program.source + _thunks(program.source)
    # -U_FORTIFY_SOURCE: compilers that fortify by default (Ubuntu's g++) turn _longjmp into
    # __longjmp_chk, which aborts the process when a fiber switch jumps to another stack.
    # -fno-ipa-icf (GCC only): g++ 12.2 -O2 folded the split-off tails (`.part.0`) of two instantiations
    # of `mx::ld_pair` (row bounds R = 1 and R = 2) into one, after which a 2-row matmul read
    # row 0's last k element for row 1 -- seemingly what the compiler knew of the R = 1
    # callers (row 0 only) applied to both (fuzz tc seed 14, graphs 409 and 410 in one
    # translation unit; right alone, at -O1, or without this folding or -ftree-vrp).  Folding
    # identical functions only saves code size here.
    flags = ["-std=c++17", "-O2", *(["-fno-ipa-icf"] if _is_gcc(cxx) else []), "-fPIC", "-shared", "-DMX_HOST"]
    flags += ["-U_FORTIFY_SOURCE", "-w", f"-I{INCLUDE_DIR}"]
    headers = "".join(p.read_text() for p in sorted((INCLUDE_DIR / "mirage_xdsl").glob("*.cuh")))
    key = hashlib.sha256("\0".join([source, headers, cxx, *flags]).encode()).hexdigest()[:24]
    directory = Path(cache_dir or os.environ.get("MIRAGE_XDSL_CACHE_DIR") or Path.home() / ".cache" / "mirage_xdsl")
    directory = directory / "host"
    directory.mkdir(parents=True, exist_ok=True)
    lib = directory / f"{key}.so"
    if lib.is_file():
        return lib
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        src = Path(tmp) / "kernels.cpp"
        src.write_text(source)
        out = Path(tmp) / "kernels.so"
        cmd = [cxx, *flags, "-o", str(out), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise HostEmulationError(f"host build failed:\n{proc.stderr[:4000]}")
        os.replace(out, lib)
    return lib


_NO_KERNEL, _SMEM_WRITE, _GLOBAL_FAULT = -1, -2, -4
"""`mxh_launch`'s codes: no kernel of that name, and `mxh::launch_checked`'s kSmemWrite and
kGlobalFault (codegen/include/mirage_xdsl/host.cuh; -3 is kSmemFault)."""


def _launch_fault(step: KernelLaunch, rc: int, bad: int, buffers: GuardedBuffers) -> str:
    """The message of a failed `mxh::launch_checked`: a shared store past the launch's size, a
    fault in shared memory (`bad` the byte) or in global memory (`bad` the address)."""
    if rc == _GLOBAL_FAULT:
        return f"kernel {step.kernel} faulted {buffers.locate(bad)} (an out-of-bounds global access)"
    what = "wrote" if rc == _SMEM_WRITE else "touched"
    return (
        f"kernel {step.kernel} {what} shared memory at byte {bad}, past the {step.smem_bytes} bytes its launch asks "
        "for (the GPU faults there: an illegal address); the launch plan's smem_bytes or a tile's layout is wrong"
    )


def _storage(dtype_name: str) -> np.dtype:
    """numpy dtype a tensor of plan dtype `dtype_name` is stored as (bfloat16 -> its uint16 bits)."""
    return np.dtype(np.uint16) if dtype_name == "bfloat16" else np.dtype(_NP_DTYPES[dtype_name])


def _strided(buffer: np.ndarray, offset: int, spec: TensorSpec) -> np.ndarray:
    dtype = _storage(spec.dtype)
    return np.lib.stride_tricks.as_strided(
        buffer[offset:].view(dtype), shape=spec.shape, strides=tuple(s * dtype.itemsize for s in spec.strides)
    )


def _span_bytes(spec: TensorSpec) -> int:
    top = sum((d - 1) * s for d, s in zip(spec.shape, spec.strides))
    return (top + 1) * _storage(spec.dtype).itemsize


def _unary(op: str, x: np.ndarray, params: dict) -> np.ndarray:
    from mirage_xdsl.reference.numpy_ops import UNARY

    if op == "clamp":
        return np.clip(x, params["min"], params["max"])
    if op == "mul_scalar":
        return x * params["scalar"]
    if op == "add_scalar":
        return x + params["scalar"]
    return UNARY[op](x)


def _library(call: LibraryCall, args: list[np.ndarray]) -> list[np.ndarray]:
    from mirage_xdsl.reference.numpy_ops import BINARY, rms_normalize, strided_sum

    xs = [a.astype(np.float64) for a in args]
    op, p = call.op, call.params
    if op == "matmul":
        return [np.matmul(xs[0], xs[1])]
    if op in BINARY:
        return [BINARY[op](xs[0], xs[1])]
    if op == "reduction":
        return [strided_sum(xs[0], int_param(p["dim"]), int_param(p["size"]))]
    if op == "reduction_max":
        return [xs[0].max(axis=int_param(p["dim"]), keepdims=True)]
    if op == "rms_norm":
        n = len(p["normalized_shape"])  # type: ignore[arg-type]
        return [rms_normalize(xs[0], tuple(range(-n, 0)))]
    if op == "concat":
        return [np.concatenate(xs, axis=int_param(p["dim"]))]
    if op == "chunk":
        return list(np.split(xs[0], int_param(p["chunks"]), axis=int_param(p["dim"])))
    if op == "reshape":
        return [xs[0].reshape(tuple(p["shape"]))]  # type: ignore[arg-type]
    if op in ("all_reduce", "copy"):
        return [xs[0]]
    return [_unary(op, xs[0], p)]


class HostEmulator:
    """Runs the launch plans of a CudaProgram on the CPU.

    Builds (or finds in the cache) the host library of `program` and loads it.

    Args:
        program: the output of `emit_cuda` (source and launch plans).
        cache_dir: where host libraries are cached (see `build_host_library`).

    Raises:
        HostEmulationError: no C++ compiler, the host build failed, or a plan launches the
            sm_90a kernel (`cute.hopper_gemm`, `cute.hopper_attention`, `cute.decode_attention`), which has
            no host emulation.
        OSError: the cache dir cannot be written or the library cannot be loaded.
    """

    def __init__(self, program: CudaProgram, cache_dir: str | os.PathLike[str] | None = None):
        for name, plan in program.plans.items():
            hopper = next((s.kernel for s in plan.steps if isinstance(s, KernelLaunch) and (s.sm90a or s.tensor_maps)), None)
            if hopper is not None:
                raise HostEmulationError(
                    f"{name}: kernel {hopper} is an sm_90a kernel (cute.hopper_gemm, cute.hopper_attention or "
                    "cute.decode_attention), which the host emulator cannot run; lower the graph for a target without it "
                    "(mirage-transpile{arch=sm_80}) to emulate it"
                )
        self.program = program
        self.lib = ctypes.CDLL(str(build_host_library(program, cache_dir)))
        self.lib.mxh_launch.restype = ctypes.c_int
        ints = [ctypes.c_int] * 7  # grid, block, shared memory bytes; then the kernel arguments and the bad byte
        self.lib.mxh_launch.argtypes = [ctypes.c_char_p, *ints, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_long)]
        # grid-sum arrival counters: zeroed once per plan and kept, as the CuPy runtime does
        self.counters = {name: np.zeros(max(plan.counters, 1), np.uint32) for name, plan in program.plans.items()}

    def run(self, func_name: str, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run the plan of `func_name` on numpy inputs; return its outputs as numpy arrays.

        Inputs are copied into poisoned buffers laid out with the plan's strides (bfloat16
        inputs rounded to bf16 on the way in); bfloat16 outputs come back as float32 arrays.
        The grid-sum counters of the plan persist across calls, as on the GPU.

        Library steps run in numpy with the reference executor's operators.

        Raises:
            KeyError: the program has no plan of that name, or a library step names an op
                the reference executor does not know.
            HostEmulationError: the number of inputs is wrong, a kernel of the plan is
                missing from the host library, or a kernel accessed memory outside its
                buffers or its launch's shared memory (`mxh::launch_checked`, `GuardedBuffers`).
            ReferenceExecutionError: a library reduction whose dim does not divide.
        """
        plan: LaunchPlan = self.program.plans[func_name]
        if len(inputs) != len(plan.inputs):
            raise HostEmulationError(f"{func_name} takes {len(plan.inputs)} inputs, got {len(inputs)}")
        buffers = GuardedBuffers()  # poisoned (NaN), guarded on both sides

        def alloc_tensor(what: str, spec: TensorSpec) -> np.ndarray:
            # 16 bytes of slack past the span, as the GPU's allocations have (a 16-byte vector
            # load of a tensor's last elements may reach past them)
            return _strided(buffers.alloc(what, _span_bytes(spec) + 16), 0, spec)

        ins = []
        for k, (spec, x) in enumerate(zip(plan.inputs, inputs)):
            view = alloc_tensor(f"input {k}", spec)
            store(view, np.asarray(x), spec.dtype, np)
            ins.append(view)
        outs = [alloc_tensor(f"output {k}", spec) for k, spec in enumerate(plan.outputs)]
        workspace = buffers.alloc("the workspace", max(plan.workspace_bytes, 16))

        def view_of(ref: TensorRef) -> np.ndarray:
            if ref.kind in ("input", "output"):
                base = (ins if ref.kind == "input" else outs)[ref.index]
                return base if ref.spec is None else strided_view(np, base, ref.spec)  # an aliased reshape's view
            assert ref.spec is not None
            return _strided(workspace, ref.offset, ref.spec)

        def dtype_of(ref: TensorRef) -> str:
            if ref.kind == "input":
                return plan.inputs[ref.index].dtype
            if ref.kind == "output":
                return plan.outputs[ref.index].dtype
            assert ref.spec is not None
            return ref.spec.dtype

        counters = self.counters[func_name]

        def pointer(ref: TensorRef) -> int:
            if ref.kind == "counters":
                return counters.ctypes.data + ref.offset
            if ref.kind == "workspace" and ref.spec is None:
                return workspace.ctypes.data + ref.offset
            return view_of(ref).ctypes.data

        for step in plan.steps:
            if isinstance(step, KernelLaunch):
                ptrs = (ctypes.c_void_p * len(step.args))(*[pointer(r) for r in step.args])
                bad = ctypes.c_long(-1)
                rc = self.lib.mxh_launch(step.kernel.encode(), *step.grid, *step.block, step.smem_bytes, ptrs, ctypes.byref(bad))
                if rc == _NO_KERNEL:
                    raise HostEmulationError(f"kernel {step.kernel} not found in the host library")
                if rc != 0:
                    raise HostEmulationError(_launch_fault(step, rc, bad.value, buffers))
                problem = buffers.violation(step.kernel)
                if problem is not None:
                    raise HostEmulationError(problem)
            else:
                results = _library(step, [load(view_of(r), dtype_of(r), np) for r in step.args])
                for ref, value in zip(step.results, results):
                    store(view_of(ref), value, dtype_of(ref), np)
        return [np.array(load(o, s.dtype, np) if s.dtype == "bfloat16" else o) for o, s in zip(outs, plan.outputs)]
