"""The state and shared helpers of the CUDA kernel printer.

`KernelPrinterBase` holds what printing one `cute.kernel` accumulates (emitted lines,
indentation, C names of SSA values, ring buffers, the loop being printed) and the helpers
every part of the printer uses: tile pointers, global pointers, natural layouts, epilogue
and store expressions, elementwise values.  The parts that print one family of ops are
mixins on top of it (`grid_sum_printer.py`, `row_chain_printer.py`, `mma_printer.py`);
`cuda_printer._KernelPrinter` combines them with the walk over the kernel.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from xdsl.dialects.builtin import ArrayAttr, Float32Type, IntegerAttr
from xdsl.ir import Attribute, Operation, SSAValue

from mirage_xdsl.codegen.cuda_syntax import (
    LOAD_MODES,
    c_float,
    c_type,
    fragment_load_mode,
    layout_t,
    missing_decision,
    printer_error,
)
from mirage_xdsl.codegen.kernel_resources import grid_sum_of, late_finisher_trips, mma_slicing, register_accumulators
from mirage_xdsl.codegen.square_sum_mma import plan_square_sums
from mirage_xdsl.codegen.weight_prefetch import triggers_dependents
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute import weight_params
from mirage_xdsl.dialects.cute.causal_skip import CAUSAL_TRIPS, MASK_FROM, BlockBound, heavy_first_axis, heavy_first_half, read_bound
from mirage_xdsl.dialects.cute.row_chains import GlobalIO, RowChain
from mirage_xdsl.dialects.kn import element_type_of


class KernelPrinterBase:
    """Printing state of one `cute.kernel` and the helpers shared by the printer's parts."""

    def __init__(
        self, kernel: cute.KernelOp, weight_args: Collection[int] = (), device_fn: bool = False, inline_task: bool = False
    ):
        self.kernel = kernel
        self.device_fn = device_fn
        """print a megakernel task body (`task_function`): a `__device__` function of the block
        index `mpk_block`, without PDL"""
        self.inline_task = inline_task
        """the task body is `__forceinline__` (`inline` dispatch), else `__noinline__`"""
        self.bidx = "mpk_block" if device_fn else "blockIdx"
        self.heavy_axis = None if device_fn else heavy_first_axis(kernel)
        """the grid axis walked in reverse (cute-causal-skip's `cute.heavy_first`; a megakernel
        task keeps its block index: the task graph's footprints assume it)"""
        self.causal_trips: str | None = None  # C name of the loop's runtime trip count (cute.causal_trips)
        self.unmasked: dict[Operation, str] = {}  # masked chain -> C name of its first masked iteration
        self.weights = weight_params(kernel, weight_args)  # params that may load before the PDL wait
        if not isinstance(kernel.attributes.get(cute.PDL_PREFETCH), IntegerAttr):
            missing_decision(kernel, cute.PDL_PREFETCH, "cute-weight-prefetch")
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
        self.loop_trips: int | str = 0  # iterations of the loop being printed (per split under the late finisher)
        self.grid_sum_op = grid_sum_of(kernel)
        self.late = late_finisher_trips(kernel)
        self.square_sums = plan_square_sums(kernel, self.reg_acc, lambda mma: LOAD_MODES[self.a_mode(mma)] == "kLdsm")
        self.frag_count = 0
        self.smem_count = 0
        self.chains: dict[Operation, RowChain] = {}  # first op -> register-resident row chain
        self.io = GlobalIO()
        self.skipped: set[Operation] = set()  # ops that a multi-op form above them replaced

    def emit(self, line: str) -> None:
        """Append one line of C++ at the current indentation."""
        self.lines.append("  " * self.indent + line)

    def elem(self, value: SSAValue) -> Attribute:
        """The element type of a shared tile or a kernel tensor."""
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

    def block_idx(self, axis: int) -> str:
        """C expression of the block's index along grid axis `axis` (0 = x): `blockIdx.<axis>`,
        the megakernel task's `mpk_block`, or the reordered index of a `cute.heavy_first` axis."""
        return f"mx_b{'xyz'[axis]}" if axis == self.heavy_axis else f"{self.bidx}.{'xyz'[axis]}"

    def block_linear(self, coefs: Sequence[int]) -> str:
        """C `int` expression `cx bx + cy by + cz bz` over the block index (`block_idx`)."""
        terms = [f"(int){self.block_idx(a)} * {c}" for a, c in enumerate(coefs) if c]
        return " + ".join(terms) if terms else "0"

    def causal_skip_prelude(self) -> None:
        """Declare what cute-causal-skip decided (dialects/cute/causal_skip.py), before any op:
        the reordered block index of a `cute.heavy_first` axis, the loop's runtime trip count
        `cs_trips` (`cute.causal_trips`) and the first masked iteration of a chain (`cute.mask_from`).

        Raises:
            CudaEmitError: a bound on a late-finisher kernel (its loop is split) or a malformed one."""
        if self.heavy_axis is not None:
            xyz = "xyz"[self.heavy_axis]
            g = self.kernel.grid[self.heavy_axis]
            h = heavy_first_half(g)
            b = f"{self.bidx}.{xyz}"
            self.emit(f"const unsigned mx_b{xyz} = {b} < {h}u ? {g - 1}u - {b} : {b} - {h}u;  // cute.heavy_first: heavy blocks first")
        for op in self.kernel.walk():
            try:
                trips, start = read_bound(op, CAUSAL_TRIPS), read_bound(op, MASK_FROM)
            except ValueError as e:
                raise printer_error(op, str(e)) from None
            if trips is not None and isinstance(op, cute.ForOp):
                if self.late is not None:
                    raise printer_error(op, "cute.causal_trips on a late-finisher loop (split by cute-late-finisher)")
                self.emit(f"const int cs_tiles = {self._bound(trips, up=True)};  // key tiles up to the diagonal")
                self.emit(f"const int cs_trips = cs_tiles < {op.trip_count} ? cs_tiles : {op.trip_count};  // cute.causal_trips")
                self.causal_trips = "cs_trips"
            if start is not None and isinstance(op, cute.MmaChainOp):
                name = f"cs_unmasked{len(self.unmasked)}"
                self.emit(f"const int {name} = {self._bound(start, up=False)};  // cute.mask_from: key tiles below the diagonal")
                self.unmasked[op] = name

    def _bound(self, bound: BlockBound, up: bool) -> str:
        add = bound.add + (bound.tile - 1 if up else 0)
        return f"({self.block_linear(bound.coefs)} + {add}) / {bound.tile}"

    def mask_origin(self, origin: tuple[int, ...]) -> str:
        """C expression of a causal mask's global row or column origin (dialects/cute/mask_ops.py:
        elements per blockIdx.x, .y, .z and iteration `it`); with the late finisher the split
        axis starts at its first iteration `gs_k0`, as `gmem_ptr` reads it."""
        split_axis = self.grid_sum_op.grid_axis if self.late is not None and self.grid_sum_op is not None else -1
        terms = []
        for axis, coef in enumerate(origin[:3]):
            if coef and axis == split_axis:
                terms.append(f"gs_k0 * {origin[3]}")
            elif coef:
                terms.append(f"(int){self.block_idx(axis)} * {coef}")
        if origin[3]:
            terms.append(f"it * {origin[3]}")
        return " + ".join(terms) if terms else "0"

    def gmem_ptr(self, op: cute.CopyG2SOp | cute.CopyS2GOp, arg: SSAValue) -> str:
        """C expression of the global address a copy of `arg` starts at: its view offset, its block offsets, the
        iteration's offset in the loop (or a prologue's fixed one), the late finisher's first split
        iteration `gs_k0` on the split axis."""
        terms = []
        split_axis = self.grid_sum_op.grid_axis if self.late is not None and self.grid_sum_op is not None else -1
        for axis, off in enumerate(cute.dense_ints(op.block_offset)):
            if off and axis == split_axis and isinstance(op, cute.CopyG2SOp):
                # whole iterations (verified): the split starts at its first iteration gs_k0
                terms.append(f"gs_k0 * {op.iter_stride.value.data}")
            elif off:
                terms.append(f"{self.block_idx(axis)} * {off}")
        if isinstance(op, cute.CopyG2SOp) and op.iter is not None and op.iter_stride.value.data:
            shift = op.iter_offset.value.data
            it = "it" if shift == 0 else f"(it + {shift})"
            terms.append(f"{it} * {op.iter_stride.value.data}")
        elif isinstance(op, cute.CopyG2SOp) and op.iter_offset.value.data and op.iter_stride.value.data:
            terms.append(str(op.iter_offset.value.data * op.iter_stride.value.data))  # prologue load
        if op.view_elems:
            terms.insert(0, str(op.view_elems))  # a view's first element (dialects/views.py)
        base = self.names[arg]
        return base if not terms else f"{base} + {' + '.join(terms)}"

    def natural_layout(self, typ: cute.SmemTensorType, order: Sequence[int] | None = None) -> str:
        """`mx::L<...>` of a shared tile with modes in `order` (default: innermost first)."""
        rank = len(typ.get_shape())
        order = list(order) if order is not None else list(reversed(range(rank)))
        return layout_t([typ.get_shape()[d] for d in order], [typ.strides[d] for d in order], typ.swizzle)

    @staticmethod
    def apply_epilogue(expr: str, epilogue: ArrayAttr) -> str:
        """`expr` with the unary epilogue functions applied in order (C expression)."""
        for fn in epilogue.data:
            assert isinstance(fn, cute.UnaryFnAttr)
            name, vals = fn.fn_name, fn.values
            if name == "mul_scalar":
                expr = f"({expr}) * {c_float(vals[0])}"
            elif name == "add_scalar":
                expr = f"({expr}) + {c_float(vals[0])}"
            elif name == "clamp":
                expr = f"mx::f_clamp({expr}, {c_float(vals[0])}, {c_float(vals[1])})"
            else:
                expr = f"mx::f_{name}({expr})"
        return expr

    @staticmethod
    def store_expr(mode: str, value: str, scale: str | None = None) -> tuple[str, bool]:
        """(C expression of the new value from the old `o`, whether it reads `o`) for a store mode
        (`store`, `add`, `max`, `rescale` by `scale`)."""
        if mode == "store":
            return value, False
        if mode == "add":
            return f"o + ({value})", True
        if mode == "max":
            return f"fmaxf(o, {value})", True
        assert scale is not None
        return f"o * {scale} + ({value})", True

    def operand_layout(self, value: SSAValue, out_dims: Sequence[int], order: Sequence[int]) -> str:
        """`mx::L<...>` reading `value`'s tile over `out_dims` in `order`: broadcast dims get stride 0."""
        typ = value.type
        assert isinstance(typ, cute.SmemTensorType)
        dims = typ.get_shape()
        strides = [0 if dims[d] == 1 else typ.strides[d] for d in order]
        return layout_t([out_dims[d] for d in order], strides, typ.swizzle)

    def elementwise_value(self, op: cute.ElementwiseOp) -> str:
        """The chain's value as a C expression of its inputs `a`, `b`, `c`."""
        lead = {"id": "a", "add": "a + b", "sub": "a - b", "mul": "a * b", "div": "a / b", "pow": "mx::f_pow(a, b)"}[op.fn.data]
        return self.apply_epilogue(lead, op.epilogue)

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

    def rounded(self, value: SSAValue, expr: str) -> str:
        """`expr` as the tile of `value` stores it (rounded to its element type)."""
        elem = self.elem(value)
        return expr if isinstance(elem, Float32Type) else f"mx::round_as<{c_type(elem)}>({expr})"

    def a_mode(self, mma: cute.MmaOp) -> int:
        """How mma_run reads the A operand of `mma` (LOAD_MODES index)."""
        frag, ta = mma.acc.type, mma.a.type
        assert isinstance(frag, cute.FragmentType) and isinstance(ta, cute.SmemTensorType)
        rank = len(ta.get_shape())
        return fragment_load_mode(ta, rank - 2, rank - 1, frag.mma.atom_shape[2])
