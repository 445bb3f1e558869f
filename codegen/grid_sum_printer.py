"""Printing `cute.grid_sum`: the in-kernel combine of split-K partials.

Every split block stores its partial tiles into the grid-sum workspace, counts its arrival,
and the last block of each split group sums the partials and runs the epilogue that
cute-grid-sum-epilogue planned (phases of one tile shape in registers, one barrier each).
Under the late finisher (cute-late-finisher) the partner blocks exchange words and the last
block also finishes `partner_trips` iterations of each partner (device side in
`codegen/include/mirage_xdsl/grid_sum.cuh`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.codegen.cuda_syntax import c_type, layout_t, missing_decision
from mirage_xdsl.codegen.kernel_resources import grid_sum_flag_offset, grid_sum_slot
from mirage_xdsl.codegen.printer_base import KernelPrinterBase
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.grid_sum_epilogue import EPILOGUE_PHASES, EpiloguePlan, Phase, read_epilogue
from mirage_xdsl.dialects.kn import element_type_of


class GridSumPrinter(KernelPrinterBase):
    """The grid-sum part of the kernel printer (a mixin of `cuda_printer._KernelPrinter`)."""

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
        axis = op.grid_axis
        split = k.grid[axis]
        types = [v.type for v in op.ins]
        slot = grid_sum_slot(op)
        bases = self.partial_bases(op)
        flag = grid_sum_flag_offset(k)
        self.emit(f"{{  // grid sum: the {split} blocks along {self.block_idx(axis)} of each group, one of them goes on")
        self.indent += 1
        self.emit(f"const unsigned gs_group = {self.group_index(op)};")
        self.emit(f"float* gs_part = gs_scratch + (size_t)(gs_group * {split}u + {self.block_idx(axis)}) * {slot};")
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
            missing_decision(op, EPILOGUE_PHASES, "cute-grid-sum-epilogue")
        return read_epilogue(op, following)

    def group_index(self, op: cute.GridSumOp) -> str:
        """C expression of this block's split group (the grid index without the split axis)."""
        group, scale = [], 1
        for a in range(3):
            if a == op.grid_axis or self.kernel.grid[a] == 1:
                continue
            group.append(f"{self.block_idx(a)}" if scale == 1 else f"{scale}u * {self.block_idx(a)}")
            scale *= self.kernel.grid[a]
        return " + ".join(group) or "0u"

    @staticmethod
    def partial_bases(op: cute.GridSumOp) -> dict[SSAValue, int]:
        """Offset of each sum's partial in a block's slot (keyed by the output tile)."""
        sizes = [math.prod(v.type.get_shape()) for v in op.ins]  # type: ignore[attr-defined]
        return {v: sum(sizes[:j]) for j, v in enumerate(op.outs)}

    def late_finisher_split(self) -> None:
        """This block's split index, role and first iteration."""
        op, late = self.grid_sum_op, self.late
        assert op is not None and late is not None
        split = self.kernel.grid[op.grid_axis]
        self.emit(
            f"// late finisher: splits 0-{split - 2} run {late[0]} iterations each, split {split - 1} (the finisher) {late[1]}"
        )
        self.emit(f"const int gs_split = {self.block_idx(op.grid_axis)};")
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
        """Load the partners' partial words of the grid sum from the grid-sum workspace (`gs_words`)."""
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
