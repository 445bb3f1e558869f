"""Pure swizzle arithmetic shared by `tb-plan-swizzle`, its tests and the CUDA printer.

Two ways to keep threads of a warp off the same shared-memory bank when they walk a tile
along a non-innermost ("swizzled") dim (mirage-notes 3.6):

* **XOR**, CuTe's `Swizzle<B, M, S>`: in an offset, the B bits starting at bit `M + S`
  (the "row" bits) are XOR-ed into the B bits starting at bit `M` (the "chunk" bits):
  `phys = x ^ ((x & (((1 << B) - 1) << (M + S))) >> S)`. The units of `x` are those of the
  layout it composes with: elements for the Ampere plan (M = log2 of the chunk in elements),
  bytes for Hopper's GMMA atoms (`Swizzle<3,4,3>` = 16-B chunks, 128-B rows).
* **shift**: pad the swizzled dim's stride to `n` chunks, the smallest `n >= chunks` with
  `gcd(n, chunks per 128 B) = 1`, so consecutive rows start in different bank groups.

Shared memory has 32 banks of 4 bytes; one 128-byte line covers every bank once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import gcd

SMEM_BANKS = 32
BANK_BYTES = 4
LINE_BYTES = SMEM_BANKS * BANK_BYTES  # 128
CHUNK_BYTES = 16  # one uint128 / cp.async / ldmatrix row


@dataclass(frozen=True)
class XorSwizzle:
    """CuTe `Swizzle<B, M, S>`: B bits at `M + S` XOR-ed into the B bits at `M`."""

    b: int
    m: int
    s: int

    def __str__(self) -> str:
        return f"xor<{self.b},{self.m},{self.s}>"

    def apply(self, offset: int) -> int:
        """The swizzled image of `offset` (in the units of the layout it composes with).

        Raises:
            ValueError: the swizzle's parameters are invalid (`swizzle_offset`).
        """
        return swizzle_offset(offset, self.b, self.m, self.s)


def swizzle_offset(offset: int, b: int, m: int, s: int) -> int:
    """Map `offset` through CuTe's `Swizzle<b, m, s>` (a bijection on non-negative ints)."""
    if b < 0 or m < 0 or s < b:
        raise ValueError(f"Swizzle<{b},{m},{s}> needs b >= 0, m >= 0 and s >= b")
    yyy_mask = ((1 << b) - 1) << (m + s)
    return offset ^ ((offset & yyy_mask) >> s)


def logical_offset(coord: Sequence[int], strides: Sequence[int]) -> int:
    """Unswizzled offset (in elements) of a coordinate under element `strides`."""
    return sum(c * st for c, st in zip(coord, strides))


def swizzled_offset(row: int, col: int, row_stride: int, swizzle: XorSwizzle | None) -> int:
    """Physical element offset of logical element (row, col) of a row-major tile whose rows
    are `row_stride` elements apart (the stride of the swizzled dim), after `swizzle`."""
    off = row * row_stride + col
    return off if swizzle is None else swizzle.apply(off)


def parse_swizzle(text: str) -> XorSwizzle | None:
    """`"xor<3,3,4>"` -> XorSwizzle(3, 3, 4); `"none"` / `"shift"` -> None (no XOR)."""
    if not text.startswith("xor<"):
        return None
    b, m, s = (int(v) for v in text[4:-1].split(","))
    return XorSwizzle(b, m, s)


def is_pow2(n: int) -> bool:
    """Whether `n` is a positive power of two."""
    return n > 0 and n & (n - 1) == 0


def log2(n: int) -> int:
    """log2 of a power of two `n` (asserts that `n` is one)."""
    assert is_pow2(n), n
    return n.bit_length() - 1


def next_pow2(n: int) -> int:
    """The smallest power of two >= `n` (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def chunk_bytes_for(min_chunk_elems: int, elem_bytes: int) -> int:
    """The swizzle unit: the contiguous run the consumers need, rounded up to a power of two,
    at least one 4-B bank word, at most one 16-B chunk."""
    return min(CHUNK_BYTES, max(BANK_BYTES, next_pow2(min_chunk_elems * elem_bytes)))


def ampere_xor(num_chunks: int, chunk_elems: int, chunk_bytes: int) -> XorSwizzle:
    """Mirage's Ampere XOR parameters for rows of `num_chunks` (a power of two) chunks.

    Rows longer than 128 B: the row bits start at log2(row length) and B covers one 128-B
    line of chunks; shorter rows: B covers the chunks of one row and the row bits start at
    the 128-B line (several rows share a line). fp16, 16-B chunks: 64-elem rows ->
    `Swizzle<3,3,3>`, 128-elem rows -> `Swizzle<3,3,4>`.
    """
    per_line = LINE_BYTES // chunk_bytes
    m = log2(chunk_elems)
    if num_chunks > per_line:
        return XorSwizzle(log2(per_line), m, log2(num_chunks))
    return XorSwizzle(log2(num_chunks), m, log2(per_line))


def hopper_gmma_xor(row_bytes: int) -> XorSwizzle | None:
    """Hopper GMMA canonical atoms, a swizzle over BYTE offsets with 16-B units (M = 4) and
    S = 3: 128/64/32-B swizzle (B = 3/2/1) or interleave (B = 0) for rows that are a
    multiple of 128/64/32/16 bytes (64/32/16/8 fp16 elements); None when the row is not a
    multiple of 16 B."""
    for b, unit in ((3, 128), (2, 64), (1, 32), (0, 16)):
        if row_bytes % unit == 0:
            return XorSwizzle(b, 4, 3)
    return None


def shift_chunks(num_chunks: int, chunk_bytes: int) -> int:
    """Smallest `n >= num_chunks` coprime with the chunks in 128 B (the shift method)."""
    per_line = LINE_BYTES // chunk_bytes
    n = max(num_chunks, 1)
    while gcd(n, per_line) != 1:
        n += 1
    return n


def repack_strides(
    dims: Sequence[int], strides: Sequence[int], innermost: int, swizzled: int, new_swizzled_stride: int
) -> tuple[list[int], int]:
    """Give the swizzled dim `new_swizzled_stride` and re-pack every dim laid out outside it
    (original stride >= the swizzled dim's), innermost-first order kept; returns
    (strides, num_phy_elems). Dims inside the swizzled one keep their strides."""
    old = strides[swizzled]
    new = list(strides)
    new[swizzled] = new_swizzled_stride
    outer = sorted(
        (d for d in range(len(dims)) if d not in (innermost, swizzled) and strides[d] >= old),
        key=lambda d: (strides[d], -d),
    )
    cur = new_swizzled_stride * dims[swizzled]
    for d in outer:
        new[d] = cur
        cur *= dims[d]
    num_phy = max([new[d] * dims[d] for d in range(len(dims)) if dims[d] > 1] or [1])
    # spanning the largest stride*dim covers the whole tensor (strides are a permutation order)
    return new, num_phy


def bank_of(byte_offset: int) -> int:
    """The shared-memory bank of a byte offset: 32 banks of 4 bytes, successive words in successive
    banks (CUDA C++ Programming Guide, "Shared Memory" of compute capabilities 5.x and later).
    """
    return (byte_offset // BANK_BYTES) % SMEM_BANKS


def chunk_bank_conflicts(byte_offsets: Sequence[int]) -> int:
    """Extra shared-memory wavefronts when one phase of 8 threads each reads the 16-B chunk
    at `byte_offsets` (ldmatrix / uint128 loads are served 8 lanes x 16 B = 128 B per
    wavefront): 0 iff the 8 chunks cover all 32 banks exactly once."""
    seen: dict[int, int] = {}
    for off in byte_offsets:
        for w in range(CHUNK_BYTES // BANK_BYTES):
            bank = bank_of(off + w * BANK_BYTES)
            seen[bank] = seen.get(bank, 0) + 1
    return max(seen.values()) - 1 if seen else 0
