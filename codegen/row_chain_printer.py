"""Printing register-resident row chains (cute-row-chains).

A row chain is a run of elementwise ops and whole-block row sums / maxima over one
[1, ..., 1, C] tile that the cute-row-chains pass marked: each thread keeps its elements in
registers across the chain, inputs only the chain reads come straight from global memory,
and only values marked `cute.row_chain_stored` are written back to their tiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.codegen.cuda_syntax import c_type, layout_t, printer_error
from mirage_xdsl.codegen.printer_base import KernelPrinterBase
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.row_chains import ROW_CHAIN_FP32, ROW_CHAIN_VECTORS, RowChain, uniform_tile
from mirage_xdsl.dialects.kn import element_type_of


@dataclass(frozen=True)
class RowOwnership:
    """Which flat elements (the chain tile walked in its order) thread `tid` holds in register
    `j` of a row chain of `trips` elements per thread on `nt` threads, as cute-row-chains
    decided (`cute.row_chain_run` = `run`): 0, every NT-th (tid + j * NT); `trips`,
    consecutive (tid * T + j); otherwise runs of `run` (one 16-byte vector) interleaved
    across the block, run c at (c * NT + tid) * run."""

    nt: int
    trips: int
    run: int

    def index(self) -> str:
        """The C expression of the flat index of register j."""
        if self.run == 0:
            return f"tid + j * {self.nt}"
        if self.run == self.trips:
            return f"tid * {self.trips} + j"
        return f"(j / {self.run} * {self.nt} + tid) * {self.run} + j % {self.run}"


class RowChainPrinter(KernelPrinterBase):
    """The row-chain part of the kernel printer (a mixin of `cuda_printer._KernelPrinter`)."""

    own: RowOwnership = RowOwnership(0, 0, 0)
    """the ownership of the chain being printed (its `cute.row_chain_run`)"""

    def row_chain(self, chain: RowChain) -> None:
        """A register-resident row chain (passes/cute/row_chains.py): value `v<k>` of op k is
        this thread's elements `v<k>[j]` (which flat elements: `RowOwnership`) or, for a row
        sum, one float every thread holds; stores of what is read later; one barrier at the end."""
        nt = self.nt
        trips = chain.length // nt
        scratch = f"reinterpret_cast<float*>(smem + {self.slicing.base + self.slicing.total})"
        if chain.run < 0:
            raise printer_error(self.kernel, "a row chain without `cute.row_chain_run`: run cute-row-chains before printing")
        own = RowOwnership(nt, trips, chain.run)
        index = own.index()
        self.own = own
        self.emit(f"{{  // in registers: {', '.join(self.names[v] for v in chain.values)}")
        self.indent += 1
        regs: dict[SSAValue, str] = {}
        self.preload_inputs(chain, regs, index)
        for k, op in enumerate(chain.ops):
            name = f"v{k}"
            if isinstance(op, cute.ElementwiseOp) and any(v in self.io.late and v not in regs for v in op.ins):
                self.preload_inputs(chain, regs, index, only=op)
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
                    args.append(regs[v] if uniform_tile(v) else f"{regs[v]}[j]")
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
            vector_out = out_copy is not None and self.row_vectors(out_copy)
            call = f"{fn}({o}, {', '.join(args)})"
            value = call if ROW_CHAIN_FP32 in op.attributes else self.rounded(op.out, call)
            body_lines = [f"{name}[j] = {value};"]
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
                self.emit_vectors("store", name, out_copy, op.out, dims, order)
            regs[op.out] = name
        self.indent -= 1
        self.emit("}")
        self.emit("__syncthreads();")

    def emit_vectors(
        self, kind: str, name: str, copy: cute.CopyG2SOp | cute.CopyS2GOp, tile: SSAValue, dims: Sequence[int], order: Sequence[int]
    ) -> None:
        """Load (`kind` "load") or store register array `name` of this thread as 16-byte
        vectors of `tile`'s global tensor, in the chain's ownership (`self.own`)."""
        own = self.own
        t = own.trips
        if own.run == t:  # consecutive elements: one run from the thread's first element
            at = f"&{self.global_element(copy, tile, dims, order, f'tid * {t}')}"
            self.emit(f"mx::load_row<{t}>({name}, {at});" if kind == "load" else f"mx::store_row<{t}>({at}, {name});")
            return
        at = f"[&](int c) {{ return &{self.global_element(copy, tile, dims, order, f'(c * {own.nt} + tid) * {own.run}')}; }}"
        self.emit(f"mx::load_vectors<{t}>({name}, {at});" if kind == "load" else f"mx::store_vectors<{t}>({at}, {name});")

    def row_vectors(self, copy: cute.CopyG2SOp | cute.CopyS2GOp) -> bool:
        """Whether the chain being printed moves `copy`'s global tensor as 16-byte vectors, as
        cute-row-chains decided (`cute.row_chain_vectors`).  A chain holding every NT-th
        element (`cute.row_chain_run` = 0) has no runs to move as vectors, whatever the copy
        says (a test may force run 0 after the pass)."""
        if self.own.run == 0:
            return False
        attr = copy.attributes.get(ROW_CHAIN_VECTORS)
        if not isinstance(attr, IntegerAttr):
            raise printer_error(copy, "a row chain's global copy without `cute.row_chain_vectors`: run cute-row-chains before printing")
        return bool(attr.value.data)

    def preload_inputs(self, chain: RowChain, regs: dict[SSAValue, str], index: str, only: Operation | None = None) -> None:
        """Whole-row inputs that the chain reads from global memory, loaded once into
        register arrays `x<k>` before its first op: every load in flight together; with
        consecutive elements per thread also inputs broadcast along a dim other than the
        last (rotary's cosines: one row per token for every head), as 16-byte vectors.
        Tiles marked `cute.row_chain_late` wait for the call with `only` = the first op
        reading them, just before that op."""
        trips = chain.length // self.nt
        values = set(chain.values)
        for op in chain.ops if only is None else [only]:
            if isinstance(op, cute.ReduceOp):
                if op.input not in values and op.input not in regs:
                    self.preload_reduced(op.input, regs, index, trips)
                continue
            if not isinstance(op, cute.ElementwiseOp):
                continue
            out = op.out.type
            assert isinstance(out, cute.SmemTensorType)
            order = cute.dense_ints(op.order)
            for v in op.ins:
                if v in regs or v not in self.io.loads or (only is None and v in self.io.late):
                    continue
                copy = self.io.loads[v]
                shape = cute.smem_shape(v)
                broadcast_row = shape[-1] == out.get_shape()[-1] > 1 and self.row_vectors(copy)
                if shape != out.get_shape() and not broadcast_row:
                    continue
                name = regs[v] = f"x{len([r for r in regs.values() if r.startswith('x')])}"
                self.emit(f"float {name}[{trips}];  // {self.names[v]}, from global memory")
                if self.row_vectors(copy):
                    self.emit_vectors("load", name, copy, v, out.get_shape(), order)
                    continue
                self.emit("#pragma unroll")
                self.emit(f"for (int j = 0; j < {trips}; ++j) {{")
                self.emit(f"  const int i = {index};")
                self.emit(f"  {name}[j] = mx::to_f({self.global_element(copy, v, out.get_shape(), order)});")
                self.emit("}")

    def preload_reduced(self, tile: SSAValue, regs: dict[SSAValue, str], index: str, trips: int) -> None:
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
        if copy is not None and self.row_vectors(copy):
            self.emit_vectors("load", name, copy, tile, dims, order)
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
