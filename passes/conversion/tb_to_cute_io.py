"""convert-tb-to-cute, tiles and copies: the `cute.smem_alloc` of every materialised tile (N
stage buffers for a cp.async-pipelined input), and each `tb.input` / `tb.output` as
`cute.copy_g2s` / `cute.copy_s2g` (sync, 16-byte chunked or cp.async where the global
strides, offsets and the shared layout allow 16-byte vectors).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from mirage_xdsl.dialects import cute, tb, views
from mirage_xdsl.dialects.kn import element_type_of, shape_of
from mirage_xdsl.passes.conversion.tb_to_cute_base import KernelBuilderBase, convert_error, ints_of


class IoLowering(KernelBuilderBase):
    """Tile allocation and copies (a mixin of `tb_to_cute._KernelBuilder`)."""

    def alloc_tiles(self, ops: Sequence[Operation]) -> list[Operation]:
        """One `cute.smem_alloc` per shared-memory result of `ops` (`tb.smem_offset` >= 0; -1 means none).

        Inputs marked `tb.pipelined` whose tiles can be copied with 16-byte cp.async
        (`async_ok`) get the ring of offsets `tb.smem_offsets_pipeline` and are recorded in
        `self.pipelined`; fills `self.smem` and `self.num_stages`.

        Raises:
            ConvertError: a result count / offset count mismatch, an unsupported element type, a bad
                pipeline ring, or pipelined inputs with different stage counts.
        """
        allocs: list[Operation] = []
        for op in ops:
            if isinstance(op, tb.OutputOp) or not op.results:
                continue
            offsets = ints_of(self.attr(op, "tb.smem_offset"))
            if len(offsets) != len(op.results):
                raise convert_error(op, "'tb.smem_offset' needs one offset per result")
            for i, res in enumerate(op.results):
                self.check_element_type(op, element_type_of(res))
                if offsets[i] < 0:
                    continue
                offs = [offsets[i]]
                typ = self.smem_type(op, i)
                if isinstance(op, tb.InputOp) and "tb.pipelined" in op.attributes:
                    ring = list(ints_of(self.attr(op, "tb.smem_offsets_pipeline")))
                    if len(ring) < 2 or ring[0] != offsets[i]:
                        raise convert_error(
                            op, "'tb.smem_offsets_pipeline' needs >= 2 offsets, the first equal to 'tb.smem_offset'"
                        )
                    if self.async_ok(op, typ):
                        if self.num_stages and len(ring) != self.num_stages:
                            raise convert_error(
                                op,
                                f"pipelined inputs of one graph need the same number of stages "
                                f"({len(ring)} != {self.num_stages}); run tb-plan-pipeline and tb-plan-smem",
                            )
                        self.num_stages = len(ring)
                        offs = ring
                        self.pipelined.add(op)
                alloc = cute.SmemAllocOp(typ, offs)
                alloc.result.name_hint = f"s{len(allocs)}"
                allocs.append(alloc)
                self.smem[res] = alloc.result
        return allocs

    def gmem_vec_ok(self, tile_dims: Sequence[int], gstrides: Sequence[int], offsets: Sequence[int], elem: Attribute) -> int | None:
        """Unit-stride dim of a 16-B chunkable global tile, or None."""
        vec = 16 // cute.elem_bytes(elem)
        inner = [d for d, s in enumerate(gstrides) if s == 1 and tile_dims[d] > 1]
        if len(inner) != 1:
            return None
        di = inner[0]
        if tile_dims[di] % vec:
            return None
        if any(gstrides[d] % vec for d in range(len(tile_dims)) if d != di and tile_dims[d] > 1):
            return None
        if any(o % vec for o in offsets):
            return None
        return di

    @staticmethod
    def smem_vec_ok(typ: cute.SmemTensorType, di: int, vec: int) -> bool:
        """The 16-B vectors along dim `di` are contiguous and aligned in shared memory."""
        strides = typ.strides
        if strides[di] != 1:
            return False
        if any(strides[d] % vec for d in range(len(strides)) if d != di and typ.get_shape()[d] > 1):
            return False
        if typ.swizzle.is_xor:
            _, m, _ = typ.swizzle.bms
            if (1 << m) < vec:
                return False
        return True

    def input_geometry(self, op: tb.InputOp) -> tuple[tuple[int, ...], list[int], int]:
        """(global element strides of the dtensor, element offset of the tile per block index along
        each grid axis x/y/z (0 where the axis does not partition it), element step per loop
        iteration along `fdim` (0 without a for-loop dim)) of input `op`; a view's tiles partition
        its box (`view_offset` itself is `view_elements`)."""
        src = op.dtensor
        dims = op.view_dims
        assert isinstance(src, BlockArgument)
        gstrides = self.kernel_arg_strides[src.index + len(self.graph.outputs)]
        grid = self.graph.grid
        offsets = [0, 0, 0]
        for a, (g, m) in enumerate(zip(grid, op.imap)):
            if g > 1 and m >= 0:
                offsets[a] = (dims[m] // g) * gstrides[m]
        tile_dims = shape_of(op.result)
        step = tile_dims[op.fdim] * gstrides[op.fdim] if op.fdim >= 0 else 0
        return gstrides, offsets, step

    def view_elements(self, op: tb.InputOp) -> int:
        """Elements from the start of input `op`'s dtensor to its view's first element (0 without a view)."""
        assert isinstance(op.dtensor, BlockArgument)
        gstrides = self.kernel_arg_strides[op.dtensor.index + len(self.graph.outputs)]
        return views.element_offset(op.view_offsets, gstrides)

    def async_ok(self, op: tb.InputOp, typ: cute.SmemTensorType) -> bool:
        """Whether input `op` can be loaded with 16-byte cp.async into `typ`: it iterates a for-loop dim,
        and both the global tile (`gmem_vec_ok`) and the shared tile (`smem_vec_ok`) are 16-byte vectorisable.
        """
        if op.fdim < 0:
            return False
        gstrides, offsets, step = self.input_geometry(op)
        di = self.gmem_vec_ok(shape_of(op.result), gstrides, [*offsets, step, self.view_elements(op)], typ.element_type)
        return di is not None and self.smem_vec_ok(typ, di, 16 // cute.elem_bytes(typ.element_type))

    def lower_input(
        self, op: tb.InputOp, kargs: Sequence[SSAValue], iv: SSAValue | None, prologue: int | None
    ) -> list[Operation]:
        """The load of one input; `prologue` = k: the prologue load of iteration k of a
        pipelined input (no iteration operand)."""
        dst = self.tile(op, op.result)
        typ = dst.type
        assert isinstance(typ, cute.SmemTensorType)
        gstrides, offsets, step = self.input_geometry(op)
        view = self.view_elements(op)
        tile = cute.LayoutAttr(shape_of(op.result), gstrides)
        src = kargs[len(self.graph.outputs) + self.dtensor_arg(op.dtensor)]
        vec = 16 // cute.elem_bytes(typ.element_type)
        mode = "sync"
        if op in self.pipelined:
            mode = "async"
        elif "tb.chunked" in op.attributes:
            if self.gmem_vec_ok(tile.dims, gstrides, [*offsets, step, view], typ.element_type) is not None:
                mode = "chunked"
        iterated = op.fdim >= 0
        return [
            cute.CopyG2SOp(
                mode,
                src,
                dst,
                tile,
                offsets,
                vec if mode != "sync" else 1,
                iter=iv if (iterated and prologue is None) else None,
                iter_stride=step,
                iter_offset=(self.num_stages - 1 if mode == "async" else 0) if prologue is None else prologue,
                view_offset=view,
            )
        ]

    def lower_output(self, op: tb.OutputOp, index: int, kargs: Sequence[SSAValue]) -> list[Operation]:
        """The `cute.copy_s2g` of output `op` (kernel parameter `index`, at its `view_offset`): "chunked"
        16-byte stores when marked `tb.chunked` and vectorisable, else element by element ("sync").

        Raises:
            ConvertError: the output's input tile is not in shared memory.
        """
        src = self.tile(op, op.input)
        dst = kargs[index]
        gstrides = self.kernel_arg_strides[index]
        tile_dims = shape_of(op.input)
        offsets = [0, 0, 0]
        for a, (g, m) in enumerate(zip(self.graph.grid, op.omap)):
            if g > 1 and m >= 0:
                offsets[a] = tile_dims[m] * gstrides[m]
        elem = element_type_of(dst)
        view = views.element_offset(op.view_offsets, gstrides)
        mode, vec = "sync", 1
        if "tb.chunked" in op.attributes and self.gmem_vec_ok(tile_dims, gstrides, [*offsets, view], elem) is not None:
            mode, vec = "chunked", 16 // cute.elem_bytes(elem)
        return [cute.CopyS2GOp(mode, src, dst, cute.LayoutAttr(tile_dims, gstrides), offsets, vec, view)]
