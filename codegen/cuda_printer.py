"""The CUDA printer: `cute.kernel` ops -> C++ kernels, kernel graphs -> launch plans.

A thin, transformation-free walk: every cute op becomes one call into our header library
(`codegen/include/mirage_xdsl/*.cuh`) with its layouts spelled as template arguments
(`mx::L<sizes..., strides..., B, M, S>`, modes fastest first) and its fusion-chain
arithmetic as a small lambda.  One translation unit per module: one
`extern "C" __global__` kernel per `cute.kernel` (name `<func>_k<i>`, parameters = output
pointers then input pointers, `__launch_bounds__(threads)`).

`print_module` prints every kernel and builds each function's launch plan
(`build_launch_plan.plan_function`).  The printer's parts, one module each:

| module | prints / provides |
|---|---|
| `cuda_printer.py` | this walk: op dispatch, fills, elementwise ops, reductions, the for-loop |
| `copy_printer.py` | shared-tile pointers (`cute.smem_alloc`), global <-> shared copies |
| `printer_base.py` | the printing state and helpers every part shares |
| `grid_sum_printer.py` | `cute.grid_sum`, its epilogue phases and the late finisher |
| `row_chain_printer.py` | register-resident row chains |
| `mma_printer.py` | tensor-core ops (`cute.mma_init`, `cute.mma`, `cute.mma_chain`, `cute.frag_store`) |
| `cuda_syntax.py` | C++ spelling of types, literals and layouts; `CudaEmitError` |
| `kernel_resources.py` | scratch, counters and shared-memory bytes read from the cute passes' decisions |
| `build_launch_plan.py` | `LaunchPlan`s of kernel graphs |
| `weight_prefetch.py`, `square_sum_mma.py` | the PDL weight prefetch split, squared-row sums on an MMA |
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation

from mirage_xdsl.codegen.build_launch_plan import plan_function
from mirage_xdsl.codegen.copy_printer import CopyPrinter
from mirage_xdsl.codegen.cuda_syntax import c_float, c_ident, c_type, layout_t, missing_decision, printer_error
from mirage_xdsl.codegen.decode_attention import print_decode_attention
from mirage_xdsl.codegen.grid_sum_printer import GridSumPrinter
from mirage_xdsl.codegen.hopper_attention import print_hopper_attention
from mirage_xdsl.codegen.hopper_gemm import print_hopper_gemm
from mirage_xdsl.codegen.kernel_resources import launch_smem_bytes, reduce_threads
from mirage_xdsl.codegen.launch_plan import LaunchPlan
from mirage_xdsl.codegen.mma_printer import MmaPrinter
from mirage_xdsl.codegen.permute_copy import print_permute_copy
from mirage_xdsl.codegen.row_chain_printer import RowChainPrinter
from mirage_xdsl.codegen.weight_prefetch import split_at_dependency_wait, split_task_prologue
from mirage_xdsl.dialects import cute, kn
from mirage_xdsl.dialects.cute.causal_skip import CAUSAL_TRIPS
from mirage_xdsl.dialects.cute.decode_attention import DecodeAttentionOp
from mirage_xdsl.dialects.cute.hopper_attention import HopperAttentionOp
from mirage_xdsl.dialects.cute.hopper_gemm import HopperGemmOp
from mirage_xdsl.dialects.cute.permute_copy import PermuteCopyOp
from mirage_xdsl.dialects.cute.row_chains import ROW_CHAINS, read_row_chains
from mirage_xdsl.dialects.kn import element_type_of
from mirage_xdsl.target import SM90

HEADER = "mirage_xdsl/runtime.cuh"


_SMEM_DECL = re.compile(r"^\s*[\w:]+\* (s\d+(?:_\d+)?) = reinterpret_cast<[\w:]+\*>\(smem \+ \d+\);$")


def used_lines(lines: list[str]) -> list[str]:
    """`lines` without the declarations of shared-memory tile pointers that nothing else
    names: a register row chain with global inputs and outputs (cute-row-chains) leaves the
    tiles it replaced unreferenced, and nvcc warns about each (#177-D)."""
    text = "\n".join(line.split("//")[0] for line in lines)  # names in comments do not count
    keep = []
    for line in lines:
        m = _SMEM_DECL.match(line)
        if m and len(re.findall(rf"\b{m.group(1)}\b", text)) == 1:
            continue
        keep.append(line)
    return keep


class _KernelPrinter(CopyPrinter, GridSumPrinter, RowChainPrinter, MmaPrinter):
    """The walk over one `cute.kernel`: its ops in order, copies, fills, elementwise ops,
    reductions, concatenations and the for-loop (see the module docstring)."""

    def print(self) -> str:
        """The C++ text of the kernel: a comment (grid, block, dynamic shared-memory bytes, for-loop
        trips), `extern "C" __global__ void __launch_bounds__(...) <name>(o0.., i0..)` (outputs, then
        const inputs, `__restrict__` only on kn.weight ones; the grid sum's scratch and counters after
        them) and its body, in which only the kn.weight loads of the ring prologue come before
        `mx::wait_for_prior_grids()`.  A megakernel task (`device_fn`) is printed by `print_task`.

        Raises:
            CudaEmitError: an op without a CUDA printing, a decision of a cute pass missing (the pass
                has not run) or malformed, or a late-finisher kernel printed as a megakernel task.
            ValueError: an element type without a C++ type (`c_type`)."""
        k = self.kernel
        params = []
        nout = len(k.outputs)
        for i, arg in enumerate(k.body.block.args):
            ct = c_type(element_type_of(arg))
            if i < nout:
                # no `__restrict__` on outputs either: with restrict outputs nvcc proves that
                # no store of the kernel touches a const input and reads it through the
                # non-coherent cache all the same (see below; a decoder layer's rms_norm after
                # a triggering o-projection read stale lines that way on an H200, 2026-11-26)
                name = f"o{i}"
                params.append(f"{ct}* {name}")
            else:
                # `const __restrict__` lets nvcc read through the non-coherent cache
                # (ld.global.nc), which is only defined for data that no one writes while the
                # kernel runs.  Under programmatic dependent launch this kernel may already run
                # while the previous grid writes its inputs (it only waits before reading), and
                # a megakernel task's inputs are written by other tasks of the same launch, so
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
        self.causal_skip_prelude()
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
        return "\n".join(header + used_lines(self.lines) + ["}", ""])

    def print_task(self, params: list[str]) -> str:
        """The kernel's body as `<name>_task(params..., mpk_block, mpk_gate)`: a megakernel
        task body (codegen/megakernel.py), every use of `blockIdx` replaced by the parameter;
        where a kernel would wait for the previous grid (PDL), the task waits on its event
        through `mpk_gate` (the ops marked `cute.before_pdl_wait`, its ring-prologue loads of
        graph inputs, come first; of those, the ones marked `cute.before_grid_wait`, its
        kn.weight loads, come before `mpk_gate.launch_sync()`, where the worker's first task
        waits for the previous grid)."""
        k = self.kernel
        header = [
            f"// {k.kernel_name.data} as a megakernel task: one call per threadblock {k.grid}, {self.nt} threads",
            f"static __device__ {'__forceinline__' if self.inline_task else '__noinline__'} void {k.kernel_name.data}_task(",
            "    " + (",\n    ".join([*params, "const uint3 mpk_block", "const mx::MpkGate mpk_gate"])) + ") {",
        ]
        self.emit("extern __shared__ __align__(128) unsigned char smem[];")
        self.emit("const int tid = threadIdx.x;")
        self.emit("if (tid < 4) reinterpret_cast<int*>(smem)[tid] = 0;  // zeroed 16-byte header")
        if self.late is not None:
            raise printer_error(k, "a late-finisher kernel cannot be a megakernel task (its blocks wait on each other)")
        self.causal_skip_prelude()
        self.plan_row_chains()
        before_grid, early, late = split_task_prologue(list(k.body.block.ops))
        if before_grid:
            self.emit("// ring prologue loads of kn.weight inputs, issued before the worker's first task waits for the previous grid")
            self.print_ops(before_grid)
        self.emit("if (!mpk_gate.launch_sync()) return;  // the worker's first task: the previous grid has finished")
        if early:
            self.emit("// ring prologue loads of graph inputs no task writes, issued before the task's dependency wait")
            self.print_ops(early)
        self.emit("if (!mpk_gate.pass()) return;  // the task's event (mx::MpkGate); false: the watchdog gave up")
        self.print_ops(late)
        return "\n".join(header + used_lines(self.lines) + ["}", ""])

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
            missing_decision(self.kernel, ROW_CHAINS, "cute-row-chains")
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

    def op(self, op: Operation) -> None:
        """Print one op of the walk, dispatched by its type to the part that prints it (the cp.async
        commit and wait and the barrier as one line each, `cute.yield` as nothing).

        Raises:
            CudaEmitError: an op without a CUDA printing, or one its printer rejects (a nested
                `cute.for`, a missing decision of a cute pass)."""
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
        elif isinstance(op, cute.CausalMaskOp):
            self.causal_mask(op)
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
            raise printer_error(op, "has no CUDA printing")

    def fill(self, op: cute.FillOp) -> None:
        """Fill a shared tile with the op's value (`mx::fill`); for a register-resident accumulator
        (cute-register-accumulators) declare its `mx::RegTile` `r<k>` instead and zero it, with the
        tensor-core sum of squares that rides on it where there is one (square_sum_mma.py).

        Raises:
            ValueError: more than 4 non-trivial modes (`layout_t`)."""
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

    def elementwise(self, op: cute.ElementwiseOp) -> None:
        """`mx::elementwise` over the output tile in the op's order: the chain's value of inputs `a`,
        `b`, `c` (broadcast dims at stride 0) with its epilogue, stored by the op's mode (`store`,
        `add`, `max`, or `rescale`: the old value times the last input, plus the value).  Into a
        register-resident accumulator it is `mx::elementwise_reg` (or the update of its tensor-core
        sum of squares) and the tile is stored after the loop (`for_loop`).

        Raises:
            ValueError: more than 4 non-trivial modes (`layout_t`)."""
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
        """Reduce dim `dim` of the input tile to the output's extent: each output element combines
        `extent / group` inputs `group` elements apart (`mx::reduce_sum`, `reduce_sum_squares`,
        `reduce_max` with the epilogue and the store mode, `cute.reduce_threads` threads per output,
        one float per warp of block scratch after the sliced-K scratch when more than 32), or
        Mirage's running max with its two outputs (`mx::reduce_max_running`: new max, old - new).

        Raises:
            CudaEmitError: no `cute.reduce_threads` (cute-block-reduce has not run).
            ValueError: more than 4 non-trivial modes (`layout_t`)."""
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
        lo = layout_t([odims[x] for x in order], [out.strides[x] for x in order], out.swizzle)
        li = layout_t([odims[x] for x in order], [src.strides[x] for x in order], src.swizzle)
        g = reduce_threads(op)
        scratch = (
            f"reinterpret_cast<float*>(smem + {self.slicing.base + self.slicing.total})"
            if g > 32
            else "static_cast<float*>(nullptr)"
        )
        if op.kind.data == "max" and len(outs) == 2:
            dtyp = outs[1].type
            assert isinstance(dtyp, cute.SmemTensorType)
            ld = layout_t([odims[x] for x in order], [dtyp.strides[x] for x in order], dtyp.swizzle)
            self.emit(
                f"mx::reduce_max_running<{self.nt}, {g}, {k}, {ks}, {lo}, {ld}, {li}>("
                f"{self.tile_ptr(outs[0])}, {self.tile_ptr(outs[1])}, {self.tile_ptr(op.input)}, {scratch}, tid);"
            )
            return
        value = self.apply_epilogue("v", op.epilogue)
        body, read = self.store_expr(op.mode.data, value)
        fn = {"sum": "reduce_sum", "sum_squares": "reduce_sum_squares", "max": "reduce_max"}[op.kind.data]
        self.emit(
            f"mx::{fn}<{self.nt}, {g}, {k}, {ks}, {lo}, {li}, {str(read).lower()}>("
            f"{self.tile_ptr(outs[0])}, {self.tile_ptr(op.input)}, {scratch}, tid,"
        )
        self.emit(f"    [](float o, float v) {{ return {body}; }});")

    def causal_mask(self, op: cute.CausalMaskOp) -> None:
        """`mx::causal_mask` over the output tile in the op's order: the row and column modes'
        divisors within that order, the origins of dialects/cute/mask_ops.py."""
        out = op.out.type
        assert isinstance(out, cute.SmemTensorType)
        order = cute.dense_ints(op.order)
        dims = out.get_shape()
        rank = len(dims)
        div = {d: math.prod(dims[e] for e in order[: order.index(d)]) for d in (rank - 2, rank - 1)}
        body, read = self.store_expr(op.mode.data, self.apply_epilogue("a", op.epilogue))
        lo = layout_t([dims[d] for d in order], [out.strides[d] for d in order], out.swizzle)
        la = self.operand_layout(op.input, dims, order)
        rows, cols = op.origins
        self.emit(
            f"mx::causal_mask<{self.nt}, {lo}, {la}, {div[rank - 2]}, {dims[rank - 2]}, {div[rank - 1]}, {dims[rank - 1]}, "
            f"{str(read).lower()}>({self.tile_ptr(op.out)}, {self.tile_ptr(op.input)}, {self.mask_origin(rows)}, "
            f"{self.mask_origin(cols)}, {op.offset.value.data}, tid,"
        )
        self.emit(f"    [](float o, float a) {{ return {body}; }});  // causal mask: column <= row + offset")

    def concat(self, op: cute.ConcatOp) -> None:
        """Two `mx::elementwise` passes that write `lhs`, then `rhs` into the output tile, `rhs`
        starting after `lhs`'s extent along `dim`, each with the op's epilogue and store mode.

        Raises:
            ValueError: more than 4 non-trivial modes (`layout_t`)."""
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

    def for_loop(self, op: cute.ForOp) -> None:
        """Print a `cute.for` (`loop_body`) over its trip count, or the runtime `cs_trips` under
        `cute.causal_trips`; on a late-finisher kernel one loop per split length, the finisher's
        (loading its partners' words during the last stage) and the other blocks'.  Afterwards every
        register-resident tile the loop updated is stored to its shared tile (`mx::reg_store`, a sum
        of squares' row share first), then a barrier.

        Raises:
            CudaEmitError: a `cute.for` nested in another, or from the loop's ops."""
        if self.loop is not None:
            raise printer_error(op, "nested cute.for loops are not supported")
        if self.late is None:
            self.loop_body(op, self.causal_trips if CAUSAL_TRIPS in op.attributes and self.causal_trips else op.trip_count)
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

    def loop_body(self, op: cute.ForOp, trips: int | str, early: Callable[[], None] | None = None) -> None:
        """`for (it < trips)` around the loop's ops (`trips`: a count, or the C name of a
        runtime one); `early()` prints what the last iteration issues first (the finisher's
        loads of its partners' words; compile-time `trips` only)."""
        self.emit("#pragma unroll 1")
        self.emit(f"for (int it = 0; it < {trips}; ++it) {{")
        self.indent += 1
        if early is not None:
            assert isinstance(trips, int)
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


def print_kernel(kernel: cute.KernelOp, weight_args: Collection[int] = ()) -> str:
    """The C++ text of one `cute.kernel`; `weight_args` are the indices of the enclosing
    function's arguments marked `kn.weight` (codegen/weight_prefetch.py)."""
    return _KernelPrinter(kernel, weight_args).print()


def task_function(kernel: cute.KernelOp, weight_args: Collection[int] = (), inline: bool = False) -> str:
    """The body of one `cute.kernel` as a megakernel task: `static __device__ void
    <name>_task(<the kernel's parameters>, const uint3 mpk_block, const mx::MpkGate mpk_gate)`,
    block index as a parameter; `__forceinline__` with `inline` (the `inline` dispatch of
    dialects/mpk/ops.py), else `__noinline__`.

    Raises:
        CudaEmitError: a late-finisher kernel, or a decision pass has not run."""
    return _KernelPrinter(kernel, weight_args, device_fn=True, inline_task=inline).print()


def print_module(module: ModuleOp, arch: str = "sm_90") -> tuple[str, dict[str, LaunchPlan]]:
    """(CUDA source, plans by func name) of a module whose graphs are lowered to cute."""
    kernels: list[str] = []
    plans: dict[str, LaunchPlan] = {}
    funcs = [op for op in module.walk() if isinstance(op, func.FuncOp)]
    seen: set[str] = set()
    for fn in funcs:
        weights = kn.weight_inputs(fn)
        for op in fn.body.block.ops:
            if isinstance(op, cute.KernelOp | HopperGemmOp | HopperAttentionOp | DecodeAttentionOp | PermuteCopyOp):
                name = op.kernel_name.data
                if name in seen or c_ident(name) != name:
                    raise printer_error(op, f"kernel name '{name}' is not a unique C identifier")
                seen.add(name)
                if isinstance(op, HopperGemmOp):
                    kernels.append(print_hopper_gemm(op))
                elif isinstance(op, HopperAttentionOp):
                    kernels.append(print_hopper_attention(op))
                elif isinstance(op, DecodeAttentionOp):
                    kernels.append(print_decode_attention(op))
                elif isinstance(op, PermuteCopyOp):
                    kernels.append(print_permute_copy(op))
                else:
                    kernels.append(print_kernel(op, weights))
        plans[fn.sym_name.data] = plan_function(fn, arch)
    head = [
        f"// Generated by mirage_xdsl (cuda target, {arch}): {len(kernels)} kernel(s), "
        f"{len(plans)} kernel graph(s).",
        f'#include "{HEADER}"',
        "",
    ]
    return "\n".join(head + kernels), plans
