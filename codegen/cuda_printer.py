"""The CUDA printer: `cute.kernel` ops -> C++ kernels, kernel graphs -> launch plans.

A thin, transformation-free walk: every cute op becomes one call into our header library
(`codegen/include/mirage_xdsl/*.cuh`) with its layouts spelled as template arguments
(`mx::L<sizes..., strides..., B, M, S>`, modes fastest first) and its fusion-chain
arithmetic as a small lambda.  One translation unit per module: one
`extern "C" __global__` kernel per `cute.kernel` (name `<func>_k<i>`, parameters = output
pointers then input pointers, `__launch_bounds__(threads)`).

`plan_function` turns a `func.func` into a `LaunchPlan`: `cute.kernel` -> `KernelLaunch`,
every other `kn` op -> `LibraryCall` (run with CuPy/cuBLAS by the runtime), tensors
referenced as graph inputs, graph outputs or workspace slices (`kn.workspace_offset`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import NoReturn

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    Signedness,
)
from xdsl.ir import Attribute, BlockArgument, Operation, OpResult, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan, LibraryCall, TensorRef, TensorSpec
from mirage_xdsl.codegen.square_sum_mma import SquareSum, plan_square_sums
from mirage_xdsl.codegen.weight_prefetch import split_at_dependency_wait, triggers_dependents
from mirage_xdsl.dialects import cute, kn
from mirage_xdsl.dialects.cute import weight_params
from mirage_xdsl.dialects.cute.grid_sum_epilogue import EPILOGUE_PHASES, EpiloguePlan, Phase, read_epilogue
from mirage_xdsl.dialects.cute.row_chains import ROW_CHAINS, GlobalIO, RowChain, read_row_chains
from mirage_xdsl.dialects.kn import GRID_SUM_SCRATCH_ATTR, element_type_of, ints, shape_of
from mirage_xdsl.dialects.kn.strides import dtensor_strides
from mirage_xdsl.target import SM90, SMEM_OPTIN_PER_BLOCK
from mirage_xdsl.target.errors import SharedMemoryExceeded

HEADER = "mirage_xdsl/runtime.cuh"



class CudaEmitError(DiagnosticException):
    """The module cannot be printed as CUDA; the message names the op and the reason."""


def _err(op: Operation, msg: str) -> CudaEmitError:
    return CudaEmitError(f"cuda target: {op.name}: {msg}")


def _missing(op: Operation, attr: str, pass_name: str) -> NoReturn:
    """Raise a located error: `op` lacks the decision `attr` that the cute pass `pass_name`
    writes (the printer never makes these decisions itself).

    Raises:
        CudaEmitError: always."""
    msg = f"cuda target: {op.name}: no '{attr}' attribute; run {pass_name} first (mirage-transpile runs it)"
    op.emit_error(msg, CudaEmitError(msg))


def c_type(elem: Attribute) -> str:
    if isinstance(elem, Float16Type):
        return "mx::f16"
    if isinstance(elem, BFloat16Type):
        return "mx::bf16"
    if isinstance(elem, Float32Type):
        return "float"
    if isinstance(elem, Float64Type):
        return "double"
    raise ValueError(f"no CUDA type for element type {elem}")


def dtype_name(elem: Attribute) -> str:
    """numpy spelling of a builtin element type (LaunchPlan `DTypeName`)."""
    if isinstance(elem, Float16Type):
        return "float16"
    if isinstance(elem, BFloat16Type):
        return "bfloat16"
    if isinstance(elem, Float32Type):
        return "float32"
    if isinstance(elem, Float64Type):
        return "float64"
    if isinstance(elem, IntegerType):
        if elem.width.data == 8 and elem.signedness.data != Signedness.UNSIGNED:
            return "int8"
        if elem.width.data == 16 and elem.signedness.data == Signedness.UNSIGNED:
            return "uint16"
    raise ValueError(f"no dtype name for element type {elem}")


def c_float(value: float) -> str:
    """An fp32 C++ literal."""
    if math.isinf(value):
        return "mx::neg_inf()" if value < 0 else "(-mx::neg_inf())"
    if math.isnan(value):
        return "__int_as_float(0x7fc00000)"
    text = repr(float(value))
    return f"{text}f"


def c_ident(name: str) -> str:
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return ident if ident and not ident[0].isdigit() else f"k_{ident}"


# ---------------------------------------------------------------------------------------
# Layout spelling


def layout_t(dims: Sequence[int], strides: Sequence[int], swizzle: cute.SwizzleAttr | None = None) -> str:
    """`mx::L<...>` for modes (fastest first); size-1 modes are dropped, at most 4 remain."""
    modes = [(d, s) for d, s in zip(dims, strides) if d != 1]
    if len(modes) > 4:
        raise ValueError(f"more than 4 non-trivial modes: {modes}")
    modes += [(1, 0)] * (4 - len(modes))
    args = [str(d) for d, _ in modes] + [str(s) for _, s in modes]
    if swizzle is not None and swizzle.is_xor:
        args += [str(v) for v in swizzle.bms]
    return "mx::L<" + ",".join(args) + ">"


def matrix_t(sr: int, sc: int, swizzle: cute.SwizzleAttr | None = None) -> str:
    args = [str(sr), str(sc)]
    if swizzle is not None and swizzle.is_xor:
        args += [str(v) for v in swizzle.bms]
    return "mx::M2<" + ",".join(args) + ">"


def copy_order(dims: Sequence[int], gstrides: Sequence[int]) -> list[int]:
    """Copy modes fastest first: the DTensor's unit-stride dim, then by increasing stride."""
    rank = len(dims)
    inner = [d for d in range(rank) if gstrides[d] == 1 and dims[d] > 1]
    first = inner[0] if inner else rank - 1
    rest = sorted((d for d in range(rank) if d != first), key=lambda d: (gstrides[d], -d))
    return [first, *rest]


def smem_vec_ok(typ: cute.SmemTensorType, dim: int, vec: int) -> bool:
    strides = typ.strides
    if strides[dim] != 1:
        return False
    if any(strides[d] % vec for d in range(len(strides)) if d != dim and typ.get_shape()[d] > 1):
        return False
    if typ.swizzle.is_xor and (1 << typ.swizzle.bms[1]) < vec:
        return False
    return True


def pair_ok(typ: cute.SmemTensorType, k_dim: int, other_dim: int) -> bool:
    """(k, k+1) pairs of a 2-byte matrix operand are aligned 32-bit words."""
    strides, dims = typ.strides, typ.get_shape()
    if strides[k_dim] != 1 or cute.elem_bytes(typ.element_type) != 2:
        return False
    if dims[other_dim] > 1 and strides[other_dim] % 2:
        return False
    if typ.swizzle.is_xor and typ.swizzle.bms[1] < 1:
        return False
    return True


LOAD_MODES = ("kLdElem", "kLdPair", "kLdsm", "kLdsmT")


def fragment_load_mode(typ: cute.SmemTensorType, mn_dim: int, k_dim: int, atom_k: int) -> int:
    """How mma_run reads an MMA operand tile (index into LOAD_MODES).

    ldmatrix needs 16-byte rows: 2-byte elements, 8 contiguous elements along the row dim
    (stride 1), the other stride a multiple of 8 elements and a swizzle that keeps 8-element
    chunks whole (M >= 3).  Rows along k (`kLdsm`) also need K % 8 == 0 (a partial chunk
    would feed garbage into every output); rows along m/n (`kLdsmT`) may run into the row
    padding, which only reaches dropped outputs."""
    strides, dims = typ.strides, typ.get_shape()
    two_bytes = cute.elem_bytes(typ.element_type) == 2
    chunks_whole = not typ.swizzle.is_xor or typ.swizzle.bms[1] >= 3
    if atom_k == 16 and two_bytes and chunks_whole:
        if strides[k_dim] == 1 and (dims[mn_dim] == 1 or strides[mn_dim] % 8 == 0) and dims[k_dim] % 8 == 0:
            return 2
        if strides[mn_dim] == 1 and dims[mn_dim] > 1 and (dims[k_dim] == 1 or strides[k_dim] % 8 == 0):
            return 3
    return 1 if pair_ok(typ, k_dim, mn_dim) else 0


# ---------------------------------------------------------------------------------------
# Kernels


@dataclass(frozen=True)
class MmaSlicing:
    """Sliced K for the kernel's tensor-core accumulators as cute-slice-mma decided it
    (header: mma.cuh): the W / P warp groups of a block whose thr_layout uses P of its W
    warps split each call's k-steps, and their partial sums meet in a scratch region
    appended to the kernel's dynamic shared memory at `base`."""

    slices: dict[SSAValue, int]  # fragment (cute.mma_init result) -> K slices
    offsets: dict[SSAValue, int]  # fragment -> byte offset of its scratch from `smem`
    base: int
    total: int  # scratch bytes (0: no slicing)


def mma_slicing(kernel: cute.KernelOp) -> MmaSlicing:
    """The sliced-K decision of `kernel`, read from `cute.kslice_scratch` and the
    `cute.kslices` / `cute.kslice_offset` of its `cute.mma_init` ops.

    Raises:
        CudaEmitError: the kernel has no `cute.kslice_scratch` (cute-slice-mma has not run)."""
    region = kernel.attributes.get(cute.KSLICE_SCRATCH)
    if not isinstance(region, DenseArrayBase):
        _missing(kernel, cute.KSLICE_SCRATCH, "cute-slice-mma")
    base, total = cute.dense_ints(region)
    slices: dict[SSAValue, int] = {}
    offsets: dict[SSAValue, int] = {}
    for op in kernel.walk():
        ks, off = op.attributes.get(cute.KSLICES), op.attributes.get(cute.KSLICE_OFFSET)
        if isinstance(op, cute.MmaInitOp) and isinstance(ks, IntegerAttr) and isinstance(off, IntegerAttr):
            slices[op.result] = ks.value.data
            offsets[op.result] = off.value.data
    return MmaSlicing(slices, offsets, base, total)


def reduce_threads(op: cute.ReduceOp) -> int:
    """Threads per output of `op` as cute-block-reduce chose them (`cute.reduce_threads`).

    Raises:
        CudaEmitError: the attribute is missing (cute-block-reduce has not run)."""
    attr = op.attributes.get(cute.REDUCE_THREADS)
    if not isinstance(attr, IntegerAttr):
        _missing(op, cute.REDUCE_THREADS, "cute-block-reduce")
    return attr.value.data


def reduce_scratch_bytes(kernel: cute.KernelOp) -> int:
    """Shared memory for block-wide sum reductions: one float per warp (0 when none)."""
    nt = kernel.num_threads
    wide = any(isinstance(op, cute.ReduceOp) and reduce_threads(op) > 32 for op in kernel.walk())
    return (nt // 32) * 4 if wide else 0


GRID_SUM_FLAG_BYTES = 16
"""Shared memory of `cute.grid_sum`'s "this block arrived last" flag (4 bytes, 16-aligned)."""


def grid_sum_of(kernel: cute.KernelOp) -> cute.GridSumOp | None:
    """The kernel's `cute.grid_sum` (convert-tb-to-cute emits at most one)."""
    return next((op for op in kernel.walk() if isinstance(op, cute.GridSumOp)), None)


def grid_sum_flag_offset(kernel: cute.KernelOp) -> int:
    """Byte offset of the grid-sum flag in shared memory: after the plan, the sliced-K scratch
    and the block-reduction scratch."""
    slicing = mma_slicing(kernel)
    return slicing.base + slicing.total + reduce_scratch_bytes(kernel)


def launch_smem_bytes(kernel: cute.KernelOp) -> int:
    """Dynamic shared memory of a launch of `kernel`: its plan, then the sliced-K scratch,
    then the block-reduction scratch, then the grid-sum flag."""
    if grid_sum_of(kernel) is not None:
        return grid_sum_flag_offset(kernel) + GRID_SUM_FLAG_BYTES
    slicing = mma_slicing(kernel)
    extra = slicing.total + reduce_scratch_bytes(kernel)
    return slicing.base + extra if extra else kernel.smem_bytes


def grid_sum_slot(op: cute.GridSumOp) -> int:
    """fp32 elements of one block's partials (its tiles `ins`, back to back)."""
    return sum(math.prod(cute.smem_shape(v)) for v in op.ins)


def grid_sum_counters(kernel: cute.KernelOp) -> int:
    """32-bit words of the counter buffer a launch of `kernel` uses (0 without grid sum): one
    arrival counter per split group, or under the late finisher (`partner_trips`) one slot of
    partial words per partner and group (codegen/include/mirage_xdsl/grid.cuh)."""
    op = grid_sum_of(kernel)
    if op is None:
        return 0
    split = kernel.grid[op.grid_axis]
    groups = math.prod(kernel.grid) // split
    return groups if op.partner_trip_count is None else groups * (split - 1) * grid_sum_slot(op)


def late_finisher_trips(kernel: cute.KernelOp) -> tuple[int, int] | None:
    """(partner, finisher) iteration counts of a late-finisher kernel, else None."""
    op = grid_sum_of(kernel)
    if op is None or op.partner_trip_count is None:
        return None
    loop = next(o for o in kernel.body.block.ops if isinstance(o, cute.ForOp))
    split, e = kernel.grid[op.grid_axis], op.partner_trip_count
    return e, split * loop.trip_count - (split - 1) * e


def register_accumulators(kernel: cute.KernelOp) -> dict[SSAValue, int]:
    """Shared tiles of `kernel` kept in registers through its loop, each with its registers
    per thread, as cute-register-accumulators marked them (`cute.reg_accum` on their fills).

    Raises:
        CudaEmitError: the kernel has no `cute.reg_accums` (the pass has not run), or a fill
            marked `cute.accum_in_reg` (its shared tile may overlap the loop's buffers) is
            not kept in registers."""
    if not isinstance(kernel.attributes.get(cute.REG_ACCUMS), IntegerAttr):
        _missing(kernel, cute.REG_ACCUMS, "cute-register-accumulators")
    out: dict[SSAValue, int] = {}
    for op in kernel.body.block.ops:
        if not isinstance(op, cute.FillOp):
            continue
        regs = op.attributes.get(cute.REG_ACCUM)
        if isinstance(regs, IntegerAttr):
            out[op.dst] = regs.value.data
        elif cute.ACCUM_IN_REG in op.attributes:
            msg = f"cuda target: {op.name}: planned in registers ({cute.ACCUM_IN_REG}) but has no {cute.REG_ACCUM}"
            op.emit_error(msg, CudaEmitError(msg))
    return out


def _broadcast(value: SSAValue) -> bool:
    """A tile read with a size-1 dim repeated (not a whole row)."""
    typ = value.type
    return isinstance(typ, cute.SmemTensorType) and typ.get_shape()[-1] == 1


def _uniform(value: SSAValue) -> bool:
    """A tile of one element (a row sum): one register every thread holds."""
    typ = value.type
    return isinstance(typ, cute.SmemTensorType) and math.prod(typ.get_shape()) == 1


class _KernelPrinter:
    def __init__(self, kernel: cute.KernelOp, weight_args: Collection[int] = (), device_fn: bool = False):
        self.kernel = kernel
        self.device_fn = device_fn
        """print a megakernel task body (`task_function`): a `__device__` function of the block
        index `mpk_block`, without PDL"""
        self.bidx = "mpk_block" if device_fn else "blockIdx"
        self.weights = weight_params(kernel, weight_args)  # params that may load before the PDL wait
        if not isinstance(kernel.attributes.get(cute.PDL_PREFETCH), IntegerAttr):
            _missing(kernel, cute.PDL_PREFETCH, "cute-weight-prefetch")
        self.trigger_at_start = triggers_dependents(kernel)
        self.slicing = mma_slicing(kernel)
        self.reg_acc = register_accumulators(kernel)
        self.reg_names: dict[SSAValue, str] = {}
        self.loop_reg_tiles: list[tuple[SSAValue, str]] = []  # (tile, layout) updated in the current loop
        self.nt = kernel.num_threads
        self.lines: list[str] = []
        self.indent = 1
        self.names: dict[SSAValue, str] = {}
        # ring buffers of pipelined tiles: (buffer pointer names, element stride between
        # consecutive buffers or 0 when they are not equally spaced)
        self.ring: dict[SSAValue, tuple[list[str], int]] = {}
        self.loop: cute.ForOp | None = None
        self.loop_trips = 0  # iterations of the loop being printed (per split under the late finisher)
        self.grid_sum_op = grid_sum_of(kernel)
        self.late = late_finisher_trips(kernel)
        self.square_sums = plan_square_sums(kernel, self.reg_acc, lambda mma: LOAD_MODES[self.a_mode(mma)] == "kLdsm")
        self.frag_count = 0
        self.smem_count = 0
        self.chains: dict[Operation, RowChain] = {}  # first op -> register-resident row chain
        self.io = GlobalIO()
        self.skipped: set[Operation] = set()  # ops that a multi-op form above them replaced

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)

    def elem(self, value: SSAValue) -> Attribute:
        typ = value.type
        if isinstance(typ, cute.SmemTensorType):
            return typ.element_type
        return element_type_of(value)

    def tile_ptr(self, value: SSAValue, shift: int = 0) -> str:
        """C expression of a shared tile: for a ring of N stage buffers, buffer
        `(it + shift) % N` in the loop and buffer `shift % N` outside it (a prologue load)."""
        if value in self.ring:
            bufs, stride = self.ring[value]
            n = len(bufs)
            if self.loop is None:
                k = shift % n
                return bufs[k] if stride == 0 or k == 0 else f"({bufs[0]} + {k * stride})"
            it = "it" if shift == 0 else f"it + {shift}"
            if n == 2:
                return f"((({it}) & 1) ? {bufs[1]} : {bufs[0]})"
            if stride:
                return f"({bufs[0]} + (({it}) % {n}) * {stride})"
            expr = bufs[n - 1]
            for k in reversed(range(n - 1)):
                expr = f"(({it}) % {n} == {k} ? {bufs[k]} : {expr})"
            return expr
        return self.names[value]

    def print(self) -> str:
        k = self.kernel
        params = []
        nout = len(k.outputs)
        for i, arg in enumerate(k.body.block.args):
            ct = c_type(element_type_of(arg))
            if i < nout:
                name = f"o{i}"
                params.append(f"{ct}* __restrict__ {name}")
            else:
                # `const __restrict__` lets nvcc read through the non-coherent cache
                # (ld.global.nc), which is only defined for data that no one writes while the
                # kernel runs.  Under programmatic dependent launch this kernel may already run
                # while the previous grid writes its inputs (it only waits before reading), so
                # only kn.weight inputs, which nothing queued before writes, keep it.
                name = f"i{i - nout}"
                restrict = " __restrict__" if arg in self.weights else ""
                params.append(f"const {ct}*{restrict} {name}")
            self.names[arg] = name
        if self.grid_sum_op is not None and self.late is None:
            params += ["float* __restrict__ gs_scratch", "unsigned* __restrict__ gs_counters"]
        elif self.grid_sum_op is not None:
            params += ["unsigned* __restrict__ gs_counters"]
        b = k.block
        if self.device_fn:
            return self.print_task(params)
        header = [
            f"// {k.kernel_name.data}: grid ({k.grid[0]}, {k.grid[1]}, {k.grid[2]}), "
            f"block ({b[0]}, {b[1]}, {b[2]}), {launch_smem_bytes(k)} B dynamic shared memory, "
            f"for-loop {k.iterations}",
            f'extern "C" __global__ void __launch_bounds__({self.launch_bounds()}) {k.kernel_name.data}(',
            "    " + (",\n    ".join(params)) + ") {",
        ]
        self.emit("extern __shared__ __align__(128) unsigned char smem[];")
        if b[1] == 1 and b[2] == 1:
            self.emit("const int tid = threadIdx.x;")
        else:
            self.emit("const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);")
        self.emit("if (tid < 4) reinterpret_cast<int*>(smem)[tid] = 0;  // zeroed 16-byte header")
        if self.late is not None:
            self.late_finisher_split()
        self.plan_row_chains()
        early, late = split_at_dependency_wait(list(k.body.block.ops))
        if early:
            self.emit("// kn.weight loads of the ring prologue, issued while the previous grid finishes")
            self.print_ops(early)
        if self.trigger_at_start:
            self.emit("mx::allow_dependent_launch();  // the next grid's blocks take this one's SM slots as they free")
        nothing = "nothing else global" if early else "nothing global"
        self.emit(f"mx::wait_for_prior_grids();  // PDL: {nothing} is touched before the previous grid is done")
        self.print_ops(late)
        return "\n".join(header + self.lines + ["}", ""])

    def print_task(self, params: list[str]) -> str:
        """The kernel's body as `<name>_task(params..., mpk_block)`: a megakernel task body
        (codegen/megakernel.py), every use of `blockIdx` replaced by the parameter, no PDL
        (the megakernel orders tasks with its events)."""
        k = self.kernel
        header = [
            f"// {k.kernel_name.data} as a megakernel task: one call per threadblock {k.grid}, {self.nt} threads",
            f"static __device__ __noinline__ void {k.kernel_name.data}_task(",
            "    " + (",\n    ".join([*params, "const uint3 mpk_block"])) + ") {",
        ]
        self.emit("extern __shared__ __align__(128) unsigned char smem[];")
        self.emit("const int tid = threadIdx.x;")
        self.emit("if (tid < 4) reinterpret_cast<int*>(smem)[tid] = 0;  // zeroed 16-byte header")
        if self.late is not None:
            raise _err(k, "a late-finisher kernel cannot be a megakernel task (its blocks wait on each other)")
        self.plan_row_chains()
        self.print_ops(list(k.body.block.ops))
        return "\n".join(header + self.lines + ["}", ""])

    def launch_bounds(self) -> str:
        """`threads` or, for a late-finisher kernel, `threads, blocks per SM`: the occupancy
        its shared memory allows, capped where ptxas would have to keep a thread under 128
        registers.  Without the second figure ptxas scheduled the K loop's fragment loads for
        fewer registers, and rmsnorm bs8 took 13.9 instead of 13.6 us on an H200 (2026-11-25)."""
        if self.late is None:
            return str(self.nt)
        by_smem = SM90.smem_per_sm // (launch_smem_bytes(self.kernel) + SM90.smem_reserved_per_block)
        blocks = min(by_smem, SM90.registers_per_sm // (self.nt * 128))
        return f"{self.nt}, {blocks}" if blocks >= 2 else str(self.nt)

    def plan_row_chains(self) -> None:
        """The register-resident row chains of the kernel and the tiles they read from /
        write to global memory directly, as cute-row-chains marked them.

        Raises:
            CudaEmitError: the kernel has no `cute.row_chains` (the pass has not run)."""
        if not isinstance(self.kernel.attributes.get(ROW_CHAINS), IntegerAttr):
            _missing(self.kernel, ROW_CHAINS, "cute-row-chains")
        self.chains, self.io = read_row_chains(self.kernel)
        self.skipped |= self.io.skipped

    def print_ops(self, ops: Sequence[Operation]) -> None:
        """The ops of one block, with the multi-op forms: a grid sum and the epilogue it
        fuses (passes/cute/grid_sum_epilogue.py), register-resident row chains
        (passes/cute/row_chains.py)."""
        i = 0
        while i < len(ops):
            op = ops[i]
            i += 1
            if isinstance(op, cute.GridSumOp):
                i += self.grid_sum(op, ops[i:])
                continue
            chain = self.chains.get(op)
            if chain is not None:
                self.row_chain(chain)
                i += chain.consumed - 1
            elif op not in self.skipped:
                self.op(op)

    # ---- ops -----------------------------------------------------------------------------

    def op(self, op: Operation) -> None:
        if isinstance(op, cute.SmemAllocOp):
            self.smem_alloc(op)
        elif isinstance(op, cute.CopyG2SOp):
            self.copy_g2s(op)
        elif isinstance(op, cute.CopyS2GOp):
            self.copy_s2g(op)
        elif isinstance(op, cute.CpAsyncCommitOp):
            self.emit("mx::cp_async_commit();")
        elif isinstance(op, cute.CpAsyncWaitOp):
            self.emit(f"mx::cp_async_wait<{op.pending.value.data}>();")
        elif isinstance(op, cute.BarrierOp):
            self.emit("__syncthreads();")
        elif isinstance(op, cute.FillOp):
            self.fill(op)
        elif isinstance(op, cute.ElementwiseOp):
            self.elementwise(op)
        elif isinstance(op, cute.ReduceOp):
            self.reduce(op)
        elif isinstance(op, cute.ConcatOp):
            self.concat(op)
        elif isinstance(op, cute.MmaInitOp):
            self.mma_init(op)
        elif isinstance(op, cute.MmaOp):
            self.mma(op)
        elif isinstance(op, cute.MmaChainOp):
            self.mma_chain(op)
        elif isinstance(op, cute.FragStoreOp):
            self.frag_store(op)
        elif isinstance(op, cute.ForOp):
            self.for_loop(op)
        elif isinstance(op, cute.YieldOp):
            pass
        else:
            raise _err(op, "has no CUDA printing")

    def smem_alloc(self, op: cute.SmemAllocOp) -> None:
        ct = c_type(self.elem(op.result))
        name = f"s{self.smem_count}"
        self.smem_count += 1
        offs = op.byte_offsets
        if len(offs) == 2:
            b0, b1 = f"{name}_0", f"{name}_1"
            self.emit(f"{ct}* {b0} = reinterpret_cast<{ct}*>(smem + {offs[0]});")
            self.emit(f"{ct}* {b1} = reinterpret_cast<{ct}*>(smem + {offs[1]});")
            self.ring[op.result] = ([b0, b1], 0)
            self.names[op.result] = b0
        elif len(offs) > 2:
            # a ring of stage buffers: one pointer and an element stride when equally spaced
            eb = cute.elem_bytes(self.elem(op.result))
            step = offs[1] - offs[0]
            even = step > 0 and step % eb == 0 and all(o == offs[0] + k * step for k, o in enumerate(offs))
            bufs = [f"{name}_{k}" for k in range(len(offs))]
            for k, off in enumerate(offs if not even else offs[:1]):
                self.emit(f"{ct}* {bufs[k]} = reinterpret_cast<{ct}*>(smem + {off});")
            if even:
                self.emit(f"// {bufs[0]}: {len(offs)} stage buffers, {step} B apart")
            self.ring[op.result] = (bufs, step // eb if even else 0)
            self.names[op.result] = bufs[0]
        else:
            self.emit(f"{ct}* {name} = reinterpret_cast<{ct}*>(smem + {offs[0]});")
            self.names[op.result] = name

    def gmem_ptr(self, op: cute.CopyG2SOp | cute.CopyS2GOp, arg: SSAValue) -> str:
        terms = []
        split_axis = self.grid_sum_op.grid_axis if self.late is not None and self.grid_sum_op is not None else -1
        for axis, off in enumerate(cute.dense_ints(op.block_offset)):
            if off and axis == split_axis and isinstance(op, cute.CopyG2SOp):
                # whole iterations (verified): the split starts at its first iteration gs_k0
                terms.append(f"gs_k0 * {op.iter_stride.value.data}")
            elif off:
                terms.append(f"{self.bidx}.{'xyz'[axis]} * {off}")
        if isinstance(op, cute.CopyG2SOp) and op.iter is not None and op.iter_stride.value.data:
            shift = op.iter_offset.value.data
            it = "it" if shift == 0 else f"(it + {shift})"
            terms.append(f"{it} * {op.iter_stride.value.data}")
        elif isinstance(op, cute.CopyG2SOp) and op.iter_offset.value.data and op.iter_stride.value.data:
            terms.append(str(op.iter_offset.value.data * op.iter_stride.value.data))  # prologue load
        base = self.names[arg]
        return base if not terms else f"{base} + {' + '.join(terms)}"

    def copy_layouts(
        self, op: cute.CopyG2SOp | cute.CopyS2GOp, smem: cute.SmemTensorType, vec: int
    ) -> tuple[str, str, bool, int]:
        dims, gstrides = op.tile.dims, op.tile.strides
        order = copy_order(dims, gstrides)
        sd = [dims[d] for d in order]
        gs = [gstrides[d] for d in order]
        ss = [smem.strides[d] for d in order]
        svec = False
        ss0 = ss[0]
        if vec > 1:
            sd[0] //= vec
            gs[0] *= vec
            svec = smem_vec_ok(smem, order[0], vec)
            ss[0] *= vec
        return layout_t(sd, gs), layout_t(sd, ss, smem.swizzle), svec, ss0

    def copy_g2s(self, op: cute.CopyG2SOp) -> None:
        smem = op.dst.type
        assert isinstance(smem, cute.SmemTensorType)
        mode = op.mode.data
        vec = op.vec.value.data if mode != "sync" else 1
        lg, ls, svec, ss0 = self.copy_layouts(op, smem, vec)
        shift = op.iter_offset.value.data
        dst = self.tile_ptr(op.dst, shift)
        src = self.gmem_ptr(op, op.src)
        if mode == "sync":
            call = f"mx::g2s_sync<{self.nt}, {lg}, {ls}>({dst}, {src}, tid);"
        elif mode == "chunked" or not svec:
            call = f"mx::g2s_chunked<{self.nt}, {lg}, {ls}, {vec}, {str(svec).lower()}, {ss0}>({dst}, {src}, tid);"
        elif cute.L2_EVICT_FIRST in op.attributes:
            call = f"mx::g2s_async_evict_first<{self.nt}, {lg}, {ls}>({dst}, {src}, tid);"
        else:
            call = f"mx::g2s_async<{self.nt}, {lg}, {ls}>({dst}, {src}, tid);"
        if shift and self.loop is not None:
            self.emit(f"if (it + {shift} < {self.loop_trips}) {call}")
        else:
            self.emit(call)

    def copy_s2g(self, op: cute.CopyS2GOp) -> None:
        smem = op.src.type
        assert isinstance(smem, cute.SmemTensorType)
        mode = op.mode.data
        vec = op.vec.value.data if mode != "sync" else 1
        lg, ls, svec, ss0 = self.copy_layouts(op, smem, vec)
        svec = svec and smem.element_type == element_type_of(op.dst)
        dst = self.gmem_ptr(op, op.dst)
        src = self.tile_ptr(op.src)
        if mode == "sync":
            self.emit(f"mx::s2g_sync<{self.nt}, {lg}, {ls}>({dst}, {src}, tid);")
        else:
            self.emit(f"mx::s2g_chunked<{self.nt}, {lg}, {ls}, {vec}, {str(svec).lower()}, {ss0}>({dst}, {src}, tid);")

    def natural_layout(self, typ: cute.SmemTensorType, order: Sequence[int] | None = None) -> str:
        rank = len(typ.get_shape())
        order = list(order) if order is not None else list(reversed(range(rank)))
        return layout_t([typ.get_shape()[d] for d in order], [typ.strides[d] for d in order], typ.swizzle)

    def fill(self, op: cute.FillOp) -> None:
        typ = op.dst.type
        assert isinstance(typ, cute.SmemTensorType)
        if op.dst in self.reg_acc:
            name = f"r{len(self.reg_names)}"
            self.reg_names[op.dst] = name
            self.emit(f"mx::RegTile<{self.reg_acc[op.dst]}> {name};  // register-resident accumulator of {self.names[op.dst]}")
            self.emit(f"{name}.zero();")
            square = self.square_sums.get(op.dst)
            if square is not None:
                self.square_sum_decl(square, name)
            return
        self.emit(f"mx::fill<{self.nt}, {self.natural_layout(typ)}>({self.tile_ptr(op.dst)}, {c_float(op.fill_value)}, tid);")

    @staticmethod
    def apply_epilogue(expr: str, epilogue: ArrayAttr) -> str:
        for fn in epilogue.data:
            assert isinstance(fn, cute.UnaryFnAttr)
            name, vals = fn.fn_name, fn.values
            if name == "mul_scalar":
                expr = f"({expr}) * {c_float(vals[0])}"
            elif name == "clamp":
                expr = f"mx::f_clamp({expr}, {c_float(vals[0])}, {c_float(vals[1])})"
            else:
                expr = f"mx::f_{name}({expr})"
        return expr

    @staticmethod
    def store_expr(mode: str, value: str, scale: str | None = None) -> tuple[str, bool]:
        if mode == "store":
            return value, False
        if mode == "add":
            return f"o + ({value})", True
        if mode == "max":
            return f"fmaxf(o, {value})", True
        assert scale is not None
        return f"o * {scale} + ({value})", True

    def operand_layout(self, value: SSAValue, out_dims: Sequence[int], order: Sequence[int]) -> str:
        typ = value.type
        assert isinstance(typ, cute.SmemTensorType)
        dims = typ.get_shape()
        strides = [0 if dims[d] == 1 else typ.strides[d] for d in order]
        return layout_t([out_dims[d] for d in order], strides, typ.swizzle)

    def elementwise_value(self, op: cute.ElementwiseOp) -> str:
        """The chain's value as a C expression of its inputs `a`, `b`, `c`."""
        lead = {"id": "a", "add": "a + b", "sub": "a - b", "mul": "a * b", "div": "a / b", "pow": "mx::f_pow(a, b)"}[op.fn.data]
        return self.apply_epilogue(lead, op.epilogue)

    def elementwise(self, op: cute.ElementwiseOp) -> None:
        out = op.out.type
        assert isinstance(out, cute.SmemTensorType)
        order = cute.dense_ints(op.order)
        dims = out.get_shape()
        ins = list(op.ins)
        mode = op.mode.data
        scale = None
        if mode == "rescale":
            scale = "abc"[len(ins) - 1]
        body, read = self.store_expr(mode, self.elementwise_value(op), scale)
        layouts = [self.operand_layout(v, dims, order) for v in ins] + ["mx::LNone"] * (3 - len(ins))
        ptrs = [self.tile_ptr(v) for v in ins] + ["static_cast<const float*>(nullptr)"] * (3 - len(ins))
        lo = layout_t([dims[d] for d in order], [out.strides[d] for d in order], out.swizzle)
        if op.out in self.reg_names:
            self.loop_reg_tiles.append((op.out, lo))
            square = self.square_sums.get(op.out)
            if square is not None and square.update is op:
                self.emit(f"{self.reg_names[op.out]}_sq.add({self.tile_ptr(square.mma.a)}, tid);  // sum of squares as diag(A A^T)")
                return
            self.emit(
                f"mx::elementwise_reg<{self.nt}, {lo}, {', '.join(layouts)}>({self.reg_names[op.out]}, {', '.join(ptrs)}, tid,"
            )
            self.emit(f"    [](float o, float a, float b, float c) {{ return {body}; }});")
            return
        self.emit(
            f"mx::elementwise<{self.nt}, 0, {lo}, {', '.join(layouts)}, {str(read).lower()}>("
            f"{self.tile_ptr(op.out)}, {', '.join(ptrs)}, tid,"
        )
        self.emit(f"    [](float o, float a, float b, float c) {{ return {body}; }});")

    def reduce(self, op: cute.ReduceOp) -> None:
        src = op.input.type
        assert isinstance(src, cute.SmemTensorType)
        outs = list(op.outs)
        out = outs[0].type
        assert isinstance(out, cute.SmemTensorType)
        order = cute.dense_ints(op.order)
        d = op.dim.value.data
        group = op.group.value.data
        odims = out.get_shape()
        k = src.get_shape()[d] // group
        ks = group * src.strides[d]
        g = op.threads.value.data
        lo = layout_t([odims[x] for x in order], [out.strides[x] for x in order], out.swizzle)
        li = layout_t([odims[x] for x in order], [src.strides[x] for x in order], src.swizzle)
        if op.kind.data == "max" and len(outs) == 2:
            dtyp = outs[1].type
            assert isinstance(dtyp, cute.SmemTensorType)
            ld = layout_t([odims[x] for x in order], [dtyp.strides[x] for x in order], dtyp.swizzle)
            self.emit(
                f"mx::reduce_max_running<{self.nt}, {g}, {k}, {ks}, {lo}, {ld}, {li}>("
                f"{self.tile_ptr(outs[0])}, {self.tile_ptr(outs[1])}, {self.tile_ptr(op.input)}, tid);"
            )
            return
        value = self.apply_epilogue("v", op.epilogue)
        body, read = self.store_expr(op.mode.data, value)
        g = reduce_threads(op)
        scratch = (
            f"reinterpret_cast<float*>(smem + {self.slicing.base + self.slicing.total})"
            if g > 32
            else "static_cast<float*>(nullptr)"
        )
        fn = "reduce_max" if op.kind.data == "max" else "reduce_sum"
        self.emit(
            f"mx::{fn}<{self.nt}, {g}, {k}, {ks}, {lo}, {li}, {str(read).lower()}>("
            f"{self.tile_ptr(outs[0])}, {self.tile_ptr(op.input)}, {scratch}, tid,"
        )
        self.emit(f"    [](float o, float v) {{ return {body}; }});")

    def grid_sum(self, op: cute.GridSumOp, following: Sequence[Operation]) -> int:
        """Partials to the scratch slot of this block (group-major, then split index), arrive,
        and -- in the last block of the group only -- the group's sums into `outs`, the
        elementwise ops after them that passes/cute/grid_sum_epilogue.py runs in registers, and
        the discard of the group's dead partials from L2 (mx::grid_discard_partials).
        Returns how many ops of `following` (the ops after the grid sum) were printed.  The
        slot layout matches passes/plan_workspace.grid_sum_scratch_bytes."""
        if self.late is not None:
            return self.late_grid_sum(op, following)
        k = self.kernel
        axis, xyz = op.grid_axis, "xyz"
        split = k.grid[axis]
        types = [v.type for v in op.ins]
        slot = grid_sum_slot(op)
        bases = self.partial_bases(op)
        flag = grid_sum_flag_offset(k)
        self.emit(f"{{  // grid sum: the {split} blocks along {self.bidx}.{xyz[axis]} of each group, one of them goes on")
        self.indent += 1
        self.emit(f"const unsigned gs_group = {self.group_index(op)};")
        self.emit(f"float* gs_part = gs_scratch + (size_t)(gs_group * {split}u + {self.bidx}.{xyz[axis]}) * {slot};")
        for v, typ, base in zip(op.ins, types, bases.values()):
            self.emit(f"mx::grid_partial_store<{self.nt}, {self.natural_layout(typ)}>(gs_part + {base}, {self.tile_ptr(v)}, tid);")  # type: ignore[arg-type]
        self.emit(
            f"if (!mx::grid_arrive(gs_counters + gs_group, {split}u, reinterpret_cast<unsigned*>(smem + {flag}), tid)) return;"
        )
        self.emit(f"const float* gs_all = gs_scratch + (size_t)gs_group * {split * slot};")
        plan = self.epilogue_of(op, following)
        phases = plan.phases if plan is not None else []
        # every phase's sums first: all their loads in flight together (one L2 round trip)
        sum_regs = self.phase_sums(phases, bases, split, slot)
        for v in op.outs if plan is None else plan.unfused_sums:
            typ = v.type
            self.emit(
                f"mx::grid_partial_sum<{self.nt}, {split}, {slot}, {self.natural_layout(typ)}>("  # type: ignore[arg-type]
                f"{self.tile_ptr(v)}, gs_all + {bases[v]}, tid);"
            )
        copies_out = plan.copies_out if plan is not None else {}
        self.skipped.update(copies_out.values())
        for phase in phases:
            self.epilogue_phase(phase, sum_regs, copies_out)
        self.emit(f"mx::grid_discard_partials<{self.nt}>(gs_all, {split * slot}, tid);  // no write-back of dead partials")
        self.indent -= 1
        self.emit("}")
        return 0 if plan is None else plan.consumed

    def epilogue_of(self, op: cute.GridSumOp, following: Sequence[Operation]) -> EpiloguePlan | None:
        """The register epilogue cute-grid-sum-epilogue marked after `op` (None: op by op).

        Raises:
            CudaEmitError: `op` has no `cute.epilogue_phases` (the pass has not run)."""
        if EPILOGUE_PHASES not in op.attributes:
            _missing(op, EPILOGUE_PHASES, "cute-grid-sum-epilogue")
        return read_epilogue(op, following)

    def group_index(self, op: cute.GridSumOp) -> str:
        """C expression of this block's split group (the grid index without the split axis)."""
        group, scale = [], 1
        for a in range(3):
            if a == op.grid_axis or self.kernel.grid[a] == 1:
                continue
            group.append(f"{self.bidx}.{'xyz'[a]}" if scale == 1 else f"{scale}u * {self.bidx}.{'xyz'[a]}")
            scale *= self.kernel.grid[a]
        return " + ".join(group) or "0u"

    @staticmethod
    def partial_bases(op: cute.GridSumOp) -> dict[SSAValue, int]:
        """Offset of each sum's partial in a block's slot (keyed by the output tile)."""
        sizes = [math.prod(v.type.get_shape()) for v in op.ins]  # type: ignore[attr-defined]
        return {v: sum(sizes[:j]) for j, v in enumerate(op.outs)}

    # ---- the late finisher (cute.grid_sum partner_trips; grid.cuh "The late finisher") ----

    def late_finisher_split(self) -> None:
        """This block's split index, role and first iteration."""
        op, late = self.grid_sum_op, self.late
        assert op is not None and late is not None
        split = self.kernel.grid[op.grid_axis]
        self.emit(
            f"// late finisher: splits 0-{split - 2} run {late[0]} iterations each, split {split - 1} (the finisher) {late[1]}"
        )
        self.emit(f"const int gs_split = {self.bidx}.{'xyz'[op.grid_axis]};")
        self.emit(f"const bool gs_finisher = gs_split == {split - 1};")
        self.emit(f"const int gs_k0 = gs_split * {late[0]};  // this split's first iteration")

    def partner_words_decl(self) -> None:
        """The group's partner words and the finisher's registers for them, one per tile."""
        op = self.grid_sum_op
        assert op is not None
        partners = self.kernel.grid[op.grid_axis] - 1
        slot = grid_sum_slot(op)
        self.emit(f"unsigned* gs_words = gs_counters + (size_t)({self.group_index(op)}) * {partners * slot};")
        for j, v in enumerate(op.ins):
            n = math.prod(v.type.get_shape())  # type: ignore[attr-defined]
            self.emit(f"mx::PartnerWords<{self.nt}, {partners}, {slot}, {n}> gw{j};  // the partners' {self.names[v]}")

    def load_partner_words(self) -> None:
        op = self.grid_sum_op
        assert op is not None
        for j, base in enumerate(self.partial_bases(op).values()):
            self.emit(f"gw{j}.load(gs_words + {base}, tid);")

    def late_grid_sum(self, op: cute.GridSumOp, following: Sequence[Operation]) -> int:
        """Partners publish their tiles and return; the finisher waits for their words
        (loaded in its last iteration), re-arms them, adds its own tiles in split order and
        runs the epilogue phases of passes/cute/grid_sum_epilogue.py on the sums.  Returns how
        many ops of `following` were printed."""
        bases = self.partial_bases(op)
        slot = grid_sum_slot(op)
        self.emit("{  // late finisher: the partners publish and leave, the finisher adds their partials to its own")
        self.indent += 1
        self.emit("if (!gs_finisher) {")
        self.indent += 1
        self.emit(f"unsigned* gs_mine = gs_words + gs_split * {slot};")
        for v, base in zip(op.ins, bases.values()):
            typ = v.type
            self.emit(f"mx::grid_publish<{self.nt}, {self.natural_layout(typ)}>(gs_mine + {base}, {self.tile_ptr(v)}, tid);")  # type: ignore[arg-type]
        self.emit("return;")
        self.indent -= 1
        self.emit("}")
        for j, base in enumerate(bases.values()):
            self.emit(f"gw{j}.wait(gs_words + {base}, tid);")
        for j, base in enumerate(bases.values()):
            self.emit(f"gw{j}.rearm(gs_words + {base}, tid);")
        sum_regs: dict[SSAValue, str] = {}
        for j, (v, out) in enumerate(zip(op.ins, op.outs)):
            n = math.prod(v.type.get_shape())  # type: ignore[attr-defined]
            name = sum_regs[out] = f"g{j}"
            self.emit(f"float {name}[{-(-n // self.nt)}];  // {self.names[out]}")
            self.emit(f"gw{j}.finish<{self.natural_layout(v.type)}>({name}, {self.tile_ptr(v)}, tid);")  # type: ignore[arg-type]
        self.emit("__syncthreads();  // every own partial read before any sum tile, which may overlap them, is written")
        plan = self.epilogue_of(op, following)
        unfused = list(op.outs) if plan is None else plan.unfused_sums
        for out in unfused:
            n = math.prod(out.type.get_shape())  # type: ignore[attr-defined]
            self.emit(f"mx::store_mine<{self.nt}, {n}, {self.natural_layout(out.type)}>({self.tile_ptr(out)}, {sum_regs[out]}, tid);")  # type: ignore[arg-type]
        if unfused:
            self.emit("__syncthreads();")
        copies_out = plan.copies_out if plan is not None else {}
        self.skipped.update(copies_out.values())
        for phase in [] if plan is None else plan.phases:
            self.epilogue_phase(phase, sum_regs, copies_out)
        self.indent -= 1
        self.emit("}")
        return 0 if plan is None else plan.consumed

    def rounded(self, value: SSAValue, expr: str) -> str:
        """`expr` as the tile of `value` stores it (rounded to its element type)."""
        elem = self.elem(value)
        return expr if isinstance(elem, Float32Type) else f"mx::round_as<{c_type(elem)}>({expr})"

    def phase_sums(self, phases: Sequence[Phase], bases: dict[SSAValue, int], split: int, slot: int) -> dict[SSAValue, str]:
        """This thread's elements of every phase's sums into register arrays `g<k>`."""
        regs: dict[SSAValue, str] = {}
        for phase in phases:
            n = phase.size
            for v in phase.sums:
                name = regs[v] = f"g{len(regs)}"
                call = f"mx::grid_partial_sum_mine<{self.nt}, {split}, {slot}, {max(1, n // self.nt)}>({name}, gs_all + {bases[v]}, tid);"
                self.emit(f"float {name}[{max(1, n // self.nt)}];  // {self.names[v]}")
                self.emit(call if n >= self.nt else f"if (tid < {n}) {call}")
        return regs

    def epilogue_phase(self, phase: Phase, sum_regs: dict[SSAValue, str], copies_out: dict[SSAValue, cute.CopyS2GOp]) -> None:
        """One phase of the grid-sum epilogue: on this thread's elements of the phase's sums
        (registers `sum_regs`), the elementwise ops, the stores of what is read later, and
        the barrier that ends the phase."""
        nt, n = self.nt, phase.size
        trips = max(1, n // nt)
        names = ", ".join(self.names[v] for v in phase.values)
        self.emit(f"{{  // in registers: {names}")
        self.indent += 1
        if n < nt:
            self.emit(f"if (tid < {n}) {{")
            self.indent += 1
        self.emit("#pragma unroll")
        self.emit(f"for (int j = 0; j < {trips}; ++j) {{")
        self.indent += 1
        self.emit(f"const int i = tid + j * {nt};")
        regs: dict[SSAValue, str] = {}
        for v in phase.sums:
            typ = v.type
            assert isinstance(typ, cute.SmemTensorType)
            regs[v] = self.phase_value(phase, v, f"{sum_regs[v]}[j]", len(regs), self.natural_layout(typ), copies_out)
        for op in phase.ops:
            # the op's own layouts: its order walks the elements like the sums' flat index
            order = cute.dense_ints(op.order)
            out = op.out.type
            assert isinstance(out, cute.SmemTensorType)
            lo = layout_t([phase.shape[d] for d in order], [out.strides[d] for d in order], out.swizzle)
            args = [
                regs[v] if v in regs else f"mx::to_f({self.tile_ptr(v)}[{self.operand_layout(v, phase.shape, order)}::off(i)])"
                for v in op.ins
            ] + ["0.0f"] * (3 - len(op.ins))
            fn = f"[](float o, float a, float b, float c) {{ return {self.elementwise_value(op)}; }}"
            regs[op.out] = self.phase_value(phase, op.out, f"{fn}(0.0f, {', '.join(args)})", len(regs), lo, copies_out)
        self.indent -= 1
        self.emit("}")
        if n < nt:
            self.indent -= 1
            self.emit("}")
        self.indent -= 1
        self.emit("}")
        self.emit("__syncthreads();")

    def phase_value(
        self, phase: Phase, value: SSAValue, expr: str, index: int, layout: str, copies_out: dict[SSAValue, cute.CopyS2GOp]
    ) -> str:
        """Declare register `r<index>` = expr (rounded to the tile's type); store it to the
        shared tile (at `layout`, flat index `i`) when it is read outside the phase, or
        straight to global memory when its one reader is a copy there."""
        reg = f"r{index}"
        self.emit(f"const float {reg} = {self.rounded(value, expr)};  // {self.names[value]}")
        copy = copies_out.get(value)
        if copy is not None:
            dims = phase.shape
            order = list(reversed(range(len(dims))))
            self.emit(f"{self.global_element(copy, value, dims, order)} = mx::from_f<{c_type(element_type_of(copy.dst))}>({reg});")
        elif value in phase.stored:
            self.emit(f"{self.tile_ptr(value)}[{layout}::off(i)] = mx::from_f<{c_type(self.elem(value))}>({reg});")
        return reg

    def row_chain(self, chain: RowChain) -> None:
        """A register-resident row chain (passes/cute/row_chains.py): value `v<k>` of op k is
        this thread's elements `v<k>[j]` (flat index tid + j * NT) or, for a row sum, one
        float every thread holds; stores of what is read later; one barrier at the end."""
        nt = self.nt
        trips = chain.length // nt
        scratch = f"reinterpret_cast<float*>(smem + {self.slicing.base + self.slicing.total})"
        contiguous = self.chain_contiguous(chain)
        index = f"tid * {trips} + j" if contiguous else f"tid + j * {nt}"
        self.emit(f"{{  // in registers: {', '.join(self.names[v] for v in chain.values)}")
        self.indent += 1
        regs: dict[SSAValue, str] = {}
        self.preload_inputs(chain, regs, index, contiguous)
        for k, op in enumerate(chain.ops):
            name = f"v{k}"
            if isinstance(op, cute.ReduceOp):
                out = op.outs[0]
                is_max = op.kind.data == "max"
                self.emit(f"float t{k} = {'mx::neg_inf()' if is_max else '0.0f'};")
                self.emit("#pragma unroll")
                step = f"t{k} = fmaxf(t{k}, {regs[op.input]}[j]);" if is_max else f"t{k} += {regs[op.input]}[j];"
                self.emit(f"for (int j = 0; j < {trips}; ++j) {step}")
                fn = f"[](float o, float v) {{ return {self.apply_epilogue('v', op.epilogue)}; }}"
                combine = f"mx::block_{'max' if is_max else 'sum'}<{nt}>(t{k}, {scratch}, tid)"
                self.emit(f"const float {name} = {self.rounded(out, f'{fn}(0.0f, {combine})')};")
                if out in chain.stored:
                    self.emit(f"if (tid == 0) {self.tile_ptr(out)}[0] = mx::from_f<{c_type(self.elem(out))}>({name});")
                regs[out] = name
                continue
            assert isinstance(op, cute.ElementwiseOp)
            out_t = op.out.type
            assert isinstance(out_t, cute.SmemTensorType)
            order = cute.dense_ints(op.order)
            dims = out_t.get_shape()
            lo = layout_t([dims[d] for d in order], [out_t.strides[d] for d in order], out_t.swizzle)
            args = []
            for v in op.ins:
                if v in regs:
                    args.append(regs[v] if _uniform(v) else f"{regs[v]}[j]")
                elif v in self.io.loads:
                    args.append(f"mx::to_f({self.global_element(self.io.loads[v], v, dims, order)})")
                else:
                    args.append(f"mx::to_f({self.tile_ptr(v)}[{self.operand_layout(v, dims, order)}::off(i)])")
            args += ["0.0f"] * (3 - len(op.ins))
            body, read = self.store_expr(op.mode.data, self.elementwise_value(op))
            out_copy = self.io.stores.get(op.out)
            # an accumulator written straight out held the fill value 0 before this one trip
            o = f"mx::to_f({self.tile_ptr(op.out)}[{lo}::off(i)])" if read and out_copy is None else "0.0f"
            fn = f"[](float o, float a, float b, float c) {{ return {body}; }}"
            vector_out = out_copy is not None and contiguous and self.row_vectors(out_copy, op.out, trips)
            call = f"{fn}({o}, {', '.join(args)})"
            body_lines = [f"{name}[j] = {self.rounded(op.out, call)};"]
            if out_copy is not None and not vector_out:
                gt = c_type(element_type_of(out_copy.dst))
                body_lines.append(f"{self.global_element(out_copy, op.out, dims, order)} = mx::from_f<{gt}>({name}[j]);")
            elif out_copy is None and op.out in chain.stored:
                body_lines.append(f"{self.tile_ptr(op.out)}[{lo}::off(i)] = mx::from_f<{c_type(out_t.element_type)}>({name}[j]);")
            self.emit(f"float {name}[{trips}];")
            self.emit("#pragma unroll")
            self.emit(f"for (int j = 0; j < {trips}; ++j) {{")
            self.indent += 1
            if any("(i)" in line for line in body_lines):
                self.emit(f"const int i = {index};")
            for line in body_lines:
                self.emit(line)
            self.indent -= 1
            self.emit("}")
            if vector_out:
                assert out_copy is not None
                self.emit(f"mx::store_row<{trips}>(&{self.global_element(out_copy, op.out, dims, order, f'tid * {trips}')}, {name});")
            regs[op.out] = name
        self.indent -= 1
        self.emit("}")
        self.emit("__syncthreads();")

    def chain_contiguous(self, chain: RowChain) -> bool:
        """Whether the chain's threads may own consecutive elements (flat index tid * T + j,
        16-byte global vectors) instead of every NT-th (tid + j * NT): only when it touches
        no whole-row shared tile, where consecutive elements per thread would conflict on
        banks.  (The row sums then add in another order than the op-by-op print's.)"""
        values = set(chain.values)
        for op in chain.ops:
            if isinstance(op, cute.ReduceOp) and op.input not in values and op.input not in self.io.loads:
                return False
            if not isinstance(op, cute.ElementwiseOp):
                continue
            for v in op.ins:
                if v not in values and v not in self.io.loads and not _broadcast(v):
                    return False
        return all(v in self.io.stores or _uniform(v) for v in chain.stored)

    def row_vectors(self, copy: cute.CopyG2SOp | cute.CopyS2GOp, tile: SSAValue, trips: int) -> bool:
        """Whether a thread's `trips` consecutive elements of `tile` move as 16-byte global
        vectors: unit stride along the row, and the planner already allows 16-byte vectors
        for this tensor (the copy's `vec`), so the row start is 16-byte aligned."""
        eb = cute.elem_bytes(self.elem(tile))
        return copy.tile.strides[-1] == 1 and copy.vec.value.data * eb == 16 and (trips * eb) % 16 == 0

    def preload_inputs(self, chain: RowChain, regs: dict[SSAValue, str], index: str, contiguous: bool) -> None:
        """Whole-row inputs that the chain reads from global memory, loaded once into
        register arrays `x<k>` before its first op: every load in flight together."""
        trips = chain.length // self.nt
        values = set(chain.values)
        for op in chain.ops:
            if isinstance(op, cute.ReduceOp):
                if op.input not in values and op.input not in regs:
                    self.preload_reduced(op.input, regs, index, contiguous, trips)
                continue
            if not isinstance(op, cute.ElementwiseOp):
                continue
            out = op.out.type
            assert isinstance(out, cute.SmemTensorType)
            order = cute.dense_ints(op.order)
            for v in op.ins:
                if v in regs or v not in self.io.loads or v.type.get_shape() != out.get_shape():  # type: ignore[attr-defined]
                    continue
                name = regs[v] = f"x{len([r for r in regs.values() if r.startswith('x')])}"
                copy = self.io.loads[v]
                self.emit(f"float {name}[{trips}];  // {self.names[v]}, from global memory")
                if contiguous and self.row_vectors(copy, v, trips):
                    start = self.global_element(copy, v, out.get_shape(), order, f"tid * {trips}")
                    self.emit(f"mx::load_row<{trips}>({name}, &{start});")
                    continue
                self.emit("#pragma unroll")
                self.emit(f"for (int j = 0; j < {trips}; ++j) {{")
                self.emit(f"  const int i = {index};")
                self.emit(f"  {name}[j] = mx::to_f({self.global_element(copy, v, out.get_shape(), order)});")
                self.emit("}")

    def preload_reduced(self, tile: SSAValue, regs: dict[SSAValue, str], index: str, contiguous: bool, trips: int) -> None:
        """A row tile a chain reduces without computing it: into register array `x<k>` from
        global memory (when only chains read it) or from its shared tile; the chain's later
        elementwise ops read the same registers."""
        typ = tile.type
        assert isinstance(typ, cute.SmemTensorType)
        dims = typ.get_shape()
        order = list(reversed(range(len(dims))))
        name = regs[tile] = f"x{len([r for r in regs.values() if r.startswith('x')])}"
        copy = self.io.loads.get(tile)
        where = "global" if copy is not None else "shared"
        self.emit(f"float {name}[{trips}];  // {self.names[tile]}, from {where} memory")
        if copy is not None and contiguous and self.row_vectors(copy, tile, trips):
            self.emit(f"mx::load_row<{trips}>({name}, &{self.global_element(copy, tile, dims, order, f'tid * {trips}')});")
            return
        if copy is not None:
            element = self.global_element(copy, tile, dims, order)
        else:
            element = f"{self.tile_ptr(tile)}[{self.natural_layout(typ)}::off(i)]"
        self.emit("#pragma unroll")
        self.emit(f"for (int j = 0; j < {trips}; ++j) {{")
        self.emit(f"  const int i = {index};")
        self.emit(f"  {name}[j] = mx::to_f({element});")
        self.emit("}")

    def global_element(
        self, copy: cute.CopyG2SOp | cute.CopyS2GOp, tile: SSAValue, dims: Sequence[int], order: Sequence[int], index: str = "i"
    ) -> str:
        """The global element behind flat index `index` (walking `dims` in `order`) of
        `tile`, which `copy` moves between shared and global memory; size-1 dims broadcast."""
        typ = tile.type
        assert isinstance(typ, cute.SmemTensorType)
        tdims, gstrides = typ.get_shape(), copy.tile.strides
        lg = layout_t([dims[d] for d in order], [0 if tdims[d] == 1 else gstrides[d] for d in order])
        arg = copy.src if isinstance(copy, cute.CopyG2SOp) else copy.dst
        return f"({self.gmem_ptr(copy, arg)})[{lg}::raw({index})]"

    def concat(self, op: cute.ConcatOp) -> None:
        out = op.out.type
        assert isinstance(out, cute.SmemTensorType)
        order = cute.dense_ints(op.order)
        d = op.dim.value.data
        value = self.apply_epilogue("a", op.epilogue)
        body, read = self.store_expr(op.mode.data, value)
        base = 0
        for part in (op.lhs, op.rhs):
            pt = part.type
            assert isinstance(pt, cute.SmemTensorType)
            pdims = pt.get_shape()
            lo = layout_t([pdims[x] for x in order], [out.strides[x] for x in order], out.swizzle)
            la = self.operand_layout(part, pdims, order)
            self.emit(
                f"mx::elementwise<{self.nt}, {base}, {lo}, {la}, mx::LNone, mx::LNone, {str(read).lower()}>("
                f"{self.tile_ptr(op.out)}, {self.tile_ptr(part)}, static_cast<const float*>(nullptr), "
                "static_cast<const float*>(nullptr), tid,"
            )
            self.emit(f"    [](float o, float a, float b, float c) {{ return {body}; }});")
            base += pdims[d] * out.strides[d]

    @staticmethod
    def frag_info(frag: cute.FragmentType) -> tuple[int, int, str, int, int, int, bool]:
        m, n = frag.get_shape()
        mma = frag.mma
        atom = mma.atom_name
        tgm, tgn = mma.tg
        ak = mma.atom_shape[2]
        return m, n, atom, tgm, tgn, ak, "BF16" in atom

    def mma_init(self, op: cute.MmaInitOp) -> None:
        frag = op.result.type
        assert isinstance(frag, cute.FragmentType)
        m, n, atom, tgm, tgn, ak, _ = self.frag_info(frag)
        name = f"f{self.frag_count}"
        self.frag_count += 1
        self.names[op.result] = name
        if atom == "UniversalFMA":
            self.emit(f"mx::FmaAcc<{m}, {n}, {self.nt}> {name};  // {atom}")
        else:
            ks = self.slicing.slices.get(op.result, 1)
            sliced = f", {ks}" if ks > 1 else ""
            note = f", K sliced over {ks} warp groups" if ks > 1 else ""
            self.emit(f"mx::MmaAcc<{m}, {n}, {tgm}, {tgn}, {ak}{sliced}> {name};  // {atom}, thr_layout ({tgm},{tgn}){note}")
        self.emit(f"{name}.zero();")

    def mma(self, op: cute.MmaOp) -> None:
        frag = op.acc.type
        assert isinstance(frag, cute.FragmentType)
        m, n, atom, tgm, tgn, ak, bf = self.frag_info(frag)
        ta, tbt = op.a.type, op.b.type
        assert isinstance(ta, cute.SmemTensorType) and isinstance(tbt, cute.SmemTensorType)
        ra, rb = len(ta.get_shape()), len(tbt.get_shape())
        k = ta.get_shape()[-1]
        acc = self.names[op.acc]
        a, b = self.tile_ptr(op.a), self.tile_ptr(op.b)
        sa_m, sa_k = ta.strides[-2], ta.strides[-1]
        sb_k, sb_n = tbt.strides[-2], tbt.strides[-1]
        if atom == "UniversalFMA":
            la = matrix_t(sa_m, sa_k, ta.swizzle)
            lb = matrix_t(sb_k, sb_n, tbt.swizzle)
            self.emit(f"mx::fma_run<{self.nt}, decltype({acc}), {m}, {n}, {k}, {la}, {lb}>({acc}, {a}, {b}, tid);")
            return
        la = matrix_t(sa_m, sa_k, ta.swizzle)
        lb = matrix_t(sb_n, sb_k, tbt.swizzle)  # B^T view: (n, k)
        am = fragment_load_mode(ta, ra - 2, ra - 1, ak)
        bm = fragment_load_mode(tbt, rb - 1, rb - 2, ak)
        self.emit(
            f"mx::mma_run<{self.nt}, decltype({acc}), {m}, {n}, {k}, {tgm}, {tgn}, {ak}, {str(bf).lower()}, "
            f"{la}, {lb}, mx::{LOAD_MODES[am]}, mx::{LOAD_MODES[bm]}>({acc}, {a}, {b}, smem, tid);  // {atom}"
        )

    def mma_chain(self, op: cute.MmaChainOp) -> None:
        acc, total = op.acc.type, op.sum.type
        assert isinstance(acc, cute.FragmentType) and isinstance(total, cute.FragmentType)
        m, n1, atom, tgm, warps, _, bf = self.frag_info(total)
        ta, tbt, tc = op.a.type, op.b.type, op.c.type
        assert isinstance(ta, cute.SmemTensorType) and isinstance(tbt, cute.SmemTensorType)
        assert isinstance(tc, cute.SmemTensorType)
        k1, d = ta.get_shape()[-1], tc.get_shape()[-1]
        ra, rb, rc = len(ta.get_shape()), len(tbt.get_shape()), len(tc.get_shape())
        la = matrix_t(ta.strides[-2], ta.strides[-1], ta.swizzle)
        lb = matrix_t(tbt.strides[-1], tbt.strides[-2], tbt.swizzle)  # B^T view: (n, k)
        lc = matrix_t(tc.strides[-1], tc.strides[-2], tc.swizzle)  # C^T view: (d, key)
        am = LOAD_MODES[fragment_load_mode(ta, ra - 2, ra - 1, 16)]
        bm = LOAD_MODES[fragment_load_mode(tbt, rb - 1, rb - 2, 16)]
        cm = LOAD_MODES[fragment_load_mode(tc, rc - 1, rc - 2, 16)]
        cm = cm if cm == "kLdsmT" else "kLdElem"  # mma_chain_run reads C by ldmatrix.trans or elements
        value = self.apply_epilogue("v", op.epilogue)
        acc_name, sum_name = self.names[op.acc], self.names[op.sum]
        self.emit(
            f"mx::mma_chain_run<{self.nt}, decltype({acc_name}), decltype({sum_name}), {m}, {n1}, {k1}, {d}, {tgm}, {warps}, "
            f"{str(bf).lower()}, {la}, {lb}, mx::{am}, mx::{bm}, {lc}, mx::{cm}>({acc_name}, {sum_name}, "
            f"{self.tile_ptr(op.a)}, {self.tile_ptr(op.b)}, {self.tile_ptr(op.c)}, smem, tid,"
        )
        self.emit(f"    [](float v) {{ return {value}; }});  // {atom}: P = epilogue(A @ B) stays in registers")

    def frag_store(self, op: cute.FragStoreOp) -> None:
        frag = op.acc.type
        out = op.out.type
        assert isinstance(frag, cute.FragmentType) and isinstance(out, cute.SmemTensorType)
        m, n, atom, tgm, tgn, _, _ = self.frag_info(frag)
        value = self.apply_epilogue("v", op.epilogue)
        body, read = self.store_expr(op.mode.data, value)
        lc = matrix_t(out.strides[-2], out.strides[-1], out.swizzle)
        acc = self.names[op.acc]
        dst = self.tile_ptr(op.out)
        if atom == "UniversalFMA":
            self.emit(f"mx::fma_store<{self.nt}, decltype({acc}), {m}, {n}, {lc}, {str(read).lower()}>({acc}, {dst}, tid,")
        else:
            off = self.slicing.offsets.get(op.acc)
            scratch = "static_cast<float*>(nullptr)" if off is None else f"reinterpret_cast<float*>(smem + {off})"
            self.emit(
                f"mx::mma_store<decltype({acc}), {m}, {n}, {tgm}, {tgn}, {lc}, {str(read).lower()}>({acc}, {dst}, "
                f"{scratch}, tid,"
            )
        self.emit(f"    [](float o, float v) {{ return {body}; }});")

    def for_loop(self, op: cute.ForOp) -> None:
        if self.loop is not None:
            raise _err(op, "nested cute.for loops are not supported")
        if self.late is None:
            self.loop_body(op, op.trip_count)
        else:
            # one loop per split length, each with compile-time bounds (a runtime trip count
            # cost 0.2-0.4 us on rmsnorm on an H200, 2026-11-24)
            partner, finisher = self.late
            self.partner_words_decl()
            self.emit("if (gs_finisher) {")
            self.indent += 1
            self.loop_body(op, finisher, early=self.load_partner_words)
            self.indent -= 1
            self.emit("} else {")
            self.indent += 1
            self.loop_reg_tiles = []  # the same tiles again
            self.loop_body(op, partner)
            self.indent -= 1
            self.emit("}")
        for tile, layout in self.loop_reg_tiles:
            square = self.square_sums.get(tile)
            if square is not None:
                reg = self.reg_names[tile]
                scale = "" if square.scale == 1.0 else f" * {c_float(square.scale)}"
                self.emit(f"{reg}.r[0] = {reg}_sq.row_share(tid){scale};  // row (tid % 16)'s share, in element 0")
            self.emit(f"mx::reg_store<{self.nt}, {layout}>({self.names[tile]}, {self.reg_names[tile]}, tid);")
        if self.loop_reg_tiles:
            self.emit("__syncthreads();")
        self.loop_reg_tiles = []

    def loop_body(self, op: cute.ForOp, trips: int, early: Callable[[], None] | None = None) -> None:
        """`for (it < trips)` around the loop's ops; `early()` prints what the last iteration
        issues first (the finisher's loads of its partners' words)."""
        self.emit("#pragma unroll 1")
        self.emit(f"for (int it = 0; it < {trips}; ++it) {{")
        self.indent += 1
        if early is not None:
            self.emit(f"if (it == {trips - 1}) {{  // the partners' words, in flight during the last stage")
            self.indent += 1
            early()
            self.indent -= 1
            self.emit("}")
        self.loop, self.loop_trips = op, trips
        self.print_ops(list(op.body.block.ops))
        self.loop = None
        self.indent -= 1
        self.emit("}")

    def a_mode(self, mma: cute.MmaOp) -> int:
        """How mma_run reads the A operand of `mma` (LOAD_MODES index)."""
        frag, ta = mma.acc.type, mma.a.type
        assert isinstance(frag, cute.FragmentType) and isinstance(ta, cute.SmemTensorType)
        rank = len(ta.get_shape())
        return fragment_load_mode(ta, rank - 2, rank - 1, frag.mma.atom_shape[2])

    def square_sum_decl(self, square: SquareSum, reg: str) -> None:
        frag, ta = square.mma.acc.type, square.mma.a.type
        assert isinstance(frag, cute.FragmentType) and isinstance(ta, cute.SmemTensorType)
        bf16 = str("BF16" in frag.mma.atom_name).lower()
        la = matrix_t(ta.strides[-2], ta.strides[-1], ta.swizzle)
        k = ta.get_shape()[-1]
        self.emit(f"mx::SquareSumMma<{self.nt}, {k}, {bf16}, {la}> {reg}_sq;  // {reg}'s sum of squares on the tensor cores")
        self.emit(f"{reg}_sq.zero();")


def print_kernel(kernel: cute.KernelOp, weight_args: Collection[int] = ()) -> str:
    """The C++ text of one `cute.kernel`; `weight_args` are the indices of the enclosing
    function's arguments marked `kn.weight` (codegen/weight_prefetch.py)."""
    return _KernelPrinter(kernel, weight_args).print()


def task_function(kernel: cute.KernelOp, weight_args: Collection[int] = ()) -> str:
    """The body of one `cute.kernel` as a megakernel task: `static __device__ void
    <name>_task(<the kernel's parameters>, const uint3 mpk_block)`, block index as a parameter.

    Raises:
        CudaEmitError: a late-finisher kernel, or a decision pass has not run."""
    return _KernelPrinter(kernel, weight_args, device_fn=True).print()


# ---------------------------------------------------------------------------------------
# Launch plans


def _spec(value: SSAValue, strides: Sequence[int] | None = None) -> TensorSpec:
    return TensorSpec(
        tuple(shape_of(value)),
        tuple(strides if strides is not None else dtensor_strides(value)),
        dtype_name(element_type_of(value)),  # type: ignore[arg-type]
    )


def _result_strides(fn: func.FuncOp, index: int, value: SSAValue) -> tuple[int, ...]:
    if fn.res_attrs is not None:
        attrs = fn.res_attrs.data[index]
        st = getattr(attrs, "data", {}).get("kn.strides")
        if isinstance(st, DenseArrayBase):
            return ints(st)
    return dtensor_strides(value)


LIBRARY_OPS = {
    kn.ExpOp: "exp",
    kn.SquareOp: "square",
    kn.SqrtOp: "sqrt",
    kn.SiluOp: "silu",
    kn.SigmoidOp: "sigmoid",
    kn.GeluOp: "gelu",
    kn.ReluOp: "relu",
    kn.LogOp: "log",
    kn.ClampOp: "clamp",
    kn.MulScalarOp: "mul_scalar",
    kn.AddOp: "add",
    kn.SubOp: "sub",
    kn.MulOp: "mul",
    kn.DivOp: "div",
    kn.PowOp: "pow",
    kn.MatmulOp: "matmul",
    kn.ReductionOp: "reduction",
    kn.ReductionMaxOp: "reduction_max",
    kn.RmsNormOp: "rms_norm",
    kn.ConcatOp: "concat",
    kn.ChunkOp: "chunk",
    kn.AllReduceOp: "all_reduce",
}


def library_params(op: Operation) -> dict[str, float | int | list[int]]:
    """The `LibraryCall.params` of a kernel-level op (exact semantics in the runtime)."""
    if isinstance(op, kn.ClampOp):
        return {"min": float(op.min_value.value.data), "max": float(op.max_value.value.data)}
    if isinstance(op, kn.MulScalarOp):
        return {"scalar": float(op.scalar.value.data)}
    if isinstance(op, kn.ReductionOp):
        # size > 1 sums STRIDED groups: out[..., j, ...] = sum_k in[..., j + k*size, ...]
        return {"dim": op.dim.value.data, "size": op.size.value.data, "strided": 1}
    if isinstance(op, kn.ReductionMaxOp):
        return {"dim": op.dim.value.data}
    if isinstance(op, kn.RmsNormOp):
        return {"normalized_shape": list(ints(op.normalized_shape)), "eps": 0.0}
    if isinstance(op, kn.ConcatOp):
        return {"dim": op.dim.value.data}
    if isinstance(op, kn.ChunkOp):
        return {"dim": op.dim.value.data, "chunks": len(op.outputs)}
    return {}


def supports_pdl(arch: str) -> bool:
    """Whether kernels for `arch` ("sm_90", "sm_90a", "sm_100", ...) can be launched with
    programmatic dependent launch: `griddepcontrol` needs sm_90 (PTX ISA, "griddepcontrol")."""
    digits = re.search(r"\d+", arch)
    return digits is not None and int(digits.group()) >= 90


def plan_function(fn: func.FuncOp, arch: str = "sm_90") -> LaunchPlan:
    """The LaunchPlan of one kernel graph whose customized ops are `cute.kernel`s."""
    block = fn.body.block
    ret = block.last_op
    if not isinstance(ret, func.ReturnOp):
        raise _err(fn, "the kernel graph must end with func.return")
    returned = list(ret.arguments)
    out_index: dict[SSAValue, int] = {}
    for i, v in enumerate(returned):
        out_index.setdefault(v, i)
    inputs = tuple(_spec(a) for a in block.args)
    outputs = tuple(_spec(v, _result_strides(fn, i, v)) for i, v in enumerate(returned))

    def ref(value: SSAValue, user: Operation) -> TensorRef:
        if isinstance(value, BlockArgument) and value.block is block:
            return TensorRef("input", value.index)
        if value in out_index:
            return TensorRef("output", out_index[value])
        if not isinstance(value, OpResult):
            raise _err(user, "operand is neither a graph input nor an op result")
        offs = value.op.attributes.get("kn.workspace_offset")
        if not isinstance(offs, DenseArrayBase) or value.index >= len(ints(offs)) or ints(offs)[value.index] < 0:
            raise _err(
                value.op,
                "an intermediate tensor has no 'kn.workspace_offset'; run kn-plan-workspace first "
                "(mirage-transpile runs every pass in order)",
            )
        return TensorRef("workspace", 0, ints(offs)[value.index], _spec(value))

    steps: list[KernelLaunch | LibraryCall] = []
    counters = 0
    for op in block.ops:
        if isinstance(op, func.ReturnOp) or op.name == "mpk.task_graph":
            continue  # a task graph runs the kernels beside it (codegen/megakernel.py)
        if isinstance(op, cute.KernelOp):
            limit = SMEM_OPTIN_PER_BLOCK.get(arch.rstrip("a"), cute.MAX_SMEM_BYTES)
            if (needed := launch_smem_bytes(op)) > limit:
                raise SharedMemoryExceeded(
                    f"cuda target: {op.name}: {op.kernel_name.data} needs {needed} B of shared memory, more than {arch}'s {limit} B",
                    needed,
                    limit,
                )
            args = tuple(ref(v, op) for v in op.outputs) + tuple(ref(v, op) for v in op.inputs)
            if n_counters := grid_sum_counters(op):
                if late_finisher_trips(op) is None:
                    scratch = op.attributes.get(GRID_SUM_SCRATCH_ATTR)
                    if not isinstance(scratch, IntegerAttr):
                        raise _err(op, f"a kernel with a grid sum needs '{GRID_SUM_SCRATCH_ATTR}'; run kn-plan-workspace first")
                    args += (TensorRef("workspace", 0, scratch.value.data),)
                args += (TensorRef("counters", 0, 4 * counters),)
                counters += n_counters
            pdl = supports_pdl(arch)
            one_wave = pdl and triggers_dependents(op)
            steps.append(
                KernelLaunch(op.kernel_name.data, op.grid, op.block, launch_smem_bytes(op), args, pdl, one_wave=one_wave)
            )
            continue
        if isinstance(op, kn.CustomizedOp):
            raise _err(op, "kn.customized was not lowered; run convert-tb-to-cute (mirage-transpile) first")
        name = LIBRARY_OPS.get(type(op))  # type: ignore[call-overload]  # keyed by the kn op classes
        if name is None:
            raise _err(op, "has no library lowering")
        steps.append(
            LibraryCall(
                name,
                tuple(ref(v, op) for v in op.operands),
                tuple(ref(v, op) for v in op.results),
                library_params(op),
            )
        )
    # graph outputs that are graph inputs or repeat another output are copied at the end
    for i, v in enumerate(returned):
        src: TensorRef | None = None
        if isinstance(v, BlockArgument) and v.block is block:
            src = TensorRef("input", v.index)
        elif out_index[v] != i:
            src = TensorRef("output", out_index[v])
        if src is not None:
            steps.append(LibraryCall("copy", (src,), (TensorRef("output", i),), {}))
    ws = fn.attributes.get("kn.workspace_size")
    workspace = ws.value.data if isinstance(ws, IntegerAttr) else 0
    for s in steps:
        for r in (*s.args, *(s.results if isinstance(s, LibraryCall) else ())):
            if r.kind == "workspace" and r.spec is not None:
                need = r.offset + _spec_bytes(r.spec)
                if need > workspace:
                    raise _err(fn, f"workspace slice [{r.offset}, {need}) exceeds kn.workspace_size = {workspace}")
    return LaunchPlan(fn.sym_name.data, inputs, outputs, workspace, tuple(steps), arch, counters)


_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint16": 2}


def _spec_bytes(spec: TensorSpec) -> int:
    """Bytes spanned by a strided tensor (1 + the largest element offset)."""
    top = sum((d - 1) * s for d, s in zip(spec.shape, spec.strides))
    return (top + 1) * _DTYPE_BYTES[spec.dtype]


def print_module(module: ModuleOp, arch: str = "sm_90") -> tuple[str, dict[str, LaunchPlan]]:
    """(CUDA source, plans by func name) of a module whose graphs are lowered to cute."""
    kernels: list[str] = []
    plans: dict[str, LaunchPlan] = {}
    funcs = [op for op in module.walk() if isinstance(op, func.FuncOp)]
    seen: set[str] = set()
    for fn in funcs:
        weights = kn.weight_inputs(fn)
        for op in fn.body.block.ops:
            if isinstance(op, cute.KernelOp):
                name = op.kernel_name.data
                if name in seen or c_ident(name) != name:
                    raise _err(op, f"kernel name '{name}' is not a unique C identifier")
                seen.add(name)
                kernels.append(print_kernel(op, weights))
        plans[fn.sym_name.data] = plan_function(fn, arch)
    head = [
        f"// Generated by mirage_xdsl (cuda target, {arch}): {len(kernels)} kernel(s), "
        f"{len(plans)} kernel graph(s).",
        f'#include "{HEADER}"',
        "",
    ]
    return "\n".join(head + kernels), plans
