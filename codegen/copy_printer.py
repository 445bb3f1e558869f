"""Printing shared-tile declarations and the copies between global and shared memory (a mixin
of `cuda_printer._KernelPrinter`): `cute.smem_alloc` as C pointers into the kernel's dynamic
shared memory (stage rings included), `cute.copy_g2s` / `cute.copy_s2g` as the `mx::g2s_*` /
`mx::s2g_*` templates of codegen/include/mirage_xdsl/copy.cuh."""

from __future__ import annotations

from xdsl.ir import SSAValue

from mirage_xdsl.codegen.cuda_syntax import c_type, copy_order, layout_t, smem_vec_ok
from mirage_xdsl.codegen.printer_base import KernelPrinterBase
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.kn import element_type_of


class CopyPrinter(KernelPrinterBase):
    """Shared-tile pointers and global <-> shared copies."""

    def smem_alloc(self, op: cute.SmemAllocOp) -> None:
        """Declare the C pointer(s) of a shared tile at its byte offset(s) from `smem`: `s<k>` for one
        buffer, `s<k>_0`, `s<k>_1`, ... for a ring of stage buffers, recorded in `ring` with the
        element stride between consecutive buffers (0 unless more than two are equally spaced; then
        only the first pointer is declared).

        Raises:
            ValueError: an element type without a C++ type (`c_type`)."""
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

    def copy_layouts(
        self, op: cute.CopyG2SOp | cute.CopyS2GOp, smem: cute.SmemTensorType, vec: int
    ) -> tuple[str, str, bool, int]:
        """(global layout, shared layout, whether the shared side takes `vec`-element vectors, the
        shared tile's stride along the fastest mode in elements) of a copy between `op`'s global tile
        and `smem`: both `mx::L<...>` over the copy's modes fastest first (`copy_order`), the fastest
        mode counted in vectors of `vec` elements (1: single elements).

        Raises:
            ValueError: more than 4 non-trivial modes (`layout_t`)."""
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

    def copy_modes(
        self, op: cute.CopyG2SOp | cute.CopyS2GOp, tile: SSAValue
    ) -> tuple[str, int, tuple[str, str, bool, int]]:
        """(mode, elements per vector (1 for `sync`), `copy_layouts`) of a copy of shared `tile`.

        Raises:
            ValueError: more than 4 non-trivial modes (`layout_t`)."""
        smem = tile.type
        assert isinstance(smem, cute.SmemTensorType)
        mode = op.mode.data
        vec = op.vec.value.data if mode != "sync" else 1
        return mode, vec, self.copy_layouts(op, smem, vec)

    def copy_g2s(self, op: cute.CopyG2SOp) -> None:
        """Load a global tile into its shared tile: `mx::g2s_sync` (mode `sync`), `mx::g2s_chunked`
        (mode `chunked`, or an async copy whose 16-byte vectors the shared side cannot take whole), else cp.async
        `mx::g2s_async` (`mx::g2s_async_evict_first` under `cute.l2_evict_first`).  A load `shift`
        iterations ahead (the ring's prefetch or prologue) goes to that iteration's stage buffer and
        is skipped past the loop's trip count (the runtime `cs_trips` for a prologue under causal skip).

        Raises:
            ValueError: more than 4 non-trivial modes (`layout_t`)."""
        mode, vec, (lg, ls, svec, ss0) = self.copy_modes(op, op.dst)
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
        elif shift and self.causal_trips is not None:
            # a ring prologue load of iteration `shift`: none past the runtime trip count, so
            # every commit group past it stays empty and the loop's waits drain the ring
            self.emit(f"if ({shift} < {self.causal_trips}) {call}")
        else:
            self.emit(call)

    def copy_s2g(self, op: cute.CopyS2GOp) -> None:
        """Store a shared tile to its global tile: `mx::s2g_sync` (mode `sync`) or `mx::s2g_chunked`
        (16-byte global vectors; whole vectors on the shared side too only when it has the global
        element type and its layout allows them).

        Raises:
            ValueError: more than 4 non-trivial modes (`layout_t`)."""
        mode, vec, (lg, ls, svec, ss0) = self.copy_modes(op, op.src)
        svec = svec and self.elem(op.src) == element_type_of(op.dst)
        dst = self.gmem_ptr(op, op.dst)
        src = self.tile_ptr(op.src)
        if mode == "sync":
            self.emit(f"mx::s2g_sync<{self.nt}, {lg}, {ls}>({dst}, {src}, tid);")
        else:
            self.emit(f"mx::s2g_chunked<{self.nt}, {lg}, {ls}, {vec}, {str(svec).lower()}, {ss0}>({dst}, {src}, tid);")
