"""Global buffers for the host emulator that catch out-of-bounds accesses of a kernel.

Each buffer gets its own anonymous mapping: `GUARD_BYTES` of guard fill before it, the
buffer (start 128-byte aligned), a few bytes of guard fill after it up to a page boundary,
then one page made inaccessible (`mprotect`, PROT_NONE).  A kernel that reads or writes past
a buffer's end by more than those few bytes faults, which `mxh::launch_checked`
(codegen/include/mirage_xdsl/host.cuh) catches and reports with the address, and `locate`
names the buffer; a write into a guard fill is found after the launch (`violation`).  On a GPU
such an access may fault (cudaErrorIllegalAddress) or silently read or clobber a neighbour.
Linux only (mmap, mprotect through libc).
"""

from __future__ import annotations

import ctypes
import mmap
from dataclasses import dataclass

import numpy as np

GUARD = 0xA5
"""Fill of the guard bytes around every buffer (host.cuh's `kGuard` is shared memory's)."""
GUARD_BYTES = 256
"""Guard fill before each buffer."""
ALIGN = 128
"""Alignment of a buffer's first byte (16-byte vector accesses and more)."""

_PAGE = mmap.PAGESIZE
_PROT_NONE = 0
_LIBC = ctypes.CDLL(None, use_errno=True)


@dataclass
class _Guarded:
    what: str
    mapping: mmap.mmap  # kept: the views below live on it
    bytes_: np.ndarray  # the whole mapping but the protected page
    start: int  # offset of the buffer in the mapping
    size: int

    @property
    def address(self) -> int:
        """Address of the buffer's first byte."""
        return int(self.bytes_.ctypes.data) + self.start

    @property
    def fence(self) -> int:
        """Address of the protected page after the buffer."""
        return int(self.bytes_.ctypes.data) + len(self.bytes_)


class GuardedBuffers:
    """The guarded global buffers of one emulated plan run."""

    def __init__(self) -> None:
        self._buffers: list[_Guarded] = []

    def alloc(self, what: str, nbytes: int, fill: int = 0xFF) -> np.ndarray:
        """A buffer of `nbytes` bytes filled with `fill` (0xFF: NaN in f16 / bf16 / f32), named
        `what` in errors ('input 0', 'the workspace').

        Raises:
            OSError: the mapping or its protection failed."""
        body = -(-max(nbytes, 1) // ALIGN) * ALIGN
        usable = -(-(GUARD_BYTES + body) // _PAGE) * _PAGE
        mapping = mmap.mmap(-1, usable + _PAGE)
        whole = np.frombuffer(mapping, dtype=np.uint8)
        base = int(whole.ctypes.data)
        if _LIBC.mprotect(ctypes.c_void_p(base + usable), ctypes.c_size_t(_PAGE), _PROT_NONE) != 0:
            raise OSError(ctypes.get_errno(), "mprotect of a guard page failed")
        bytes_ = whole[:usable]
        bytes_[:] = GUARD
        start = usable - body
        bytes_[start : start + nbytes] = fill
        self._buffers.append(_Guarded(what, mapping, bytes_, start, nbytes))
        return bytes_[start : start + nbytes]

    def violation(self, kernel: str) -> str | None:
        """The error message if `kernel` wrote a guard byte of a buffer (naming the buffer, the
        side and the distance from its edge), else None."""
        for b in self._buffers:
            before = b.bytes_[: b.start][::-1]
            after = b.bytes_[b.start + b.size :]
            for side, zone in (("before", before), ("after", after)):
                hit = np.flatnonzero(zone != GUARD)
                if hit.size:
                    return (
                        f"kernel {kernel} wrote {hit.size} guard byte(s) {side} {b.what}'s buffer, the nearest "
                        f"{int(hit[0]) + 1} byte(s) from it (an out-of-bounds global store: a layout or launch-plan bug)"
                    )
        return None

    def locate(self, address: int) -> str:
        """Where `address` (a faulting access) lies: past which buffer's end, or nowhere known."""
        for b in self._buffers:
            if b.fence <= address < b.fence + _PAGE:
                return f"{address - b.address - b.size + 1} byte(s) past the end of {b.what}'s buffer"
        return f"address {address:#x}, outside every buffer and shared memory"
