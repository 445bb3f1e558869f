"""Weight prefetch of the persistent megakernel: which bytes of `kn.weight` inputs each task
reads, as rectangles of rows the worker asks L2 to fetch before the task runs.

Issue #32 ("prefetch of the next task's weights while waiting"): at the top of each queue
step a worker issues `prefetch.global.L2` for the weight tiles of the task
`megakernel.PREFETCH_AHEAD` steps later in its queue (at its first step, of all tasks up to
there), then waits for its own event and runs.  Weights
are never written while the kernel runs (`kn.weight`), so the prefetch needs no ordering and
a DRAM round trip leaves the next task's critical path.

A rectangle is `(input, first byte, row bytes, row stride bytes, rows)`: a read box of a
weight split along its unit-stride dim into rows (other dims enumerated, at most
`MAX_RECTS_PER_TASK` rectangles and `lines_budget` 128-byte lines per task; past that a
task's prefetch is cut short, which only loses overlap).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

from mirage_xdsl.dialects.mpk import TaskOp

LINE_BYTES = 128
"""L2 cache line (bytes) the prefetch walks in."""
MAX_RECTS_PER_TASK = 16


def lines_budget(workers: int, l2_bytes: int) -> int:
    """128-byte lines one task's prefetch may ask for: all workers together keep at most half
    of L2 in flight (`l2_bytes / 2 / workers`), so prefetched lines are not evicted before
    their task reads them.  decoder_mlp on an H200 with 256 KiB per task and 396 workers
    (2026-11-26): 110 us against 87 us for the same bytes as separate kernels."""
    return max(1, l2_bytes // 2 // max(workers, 1) // LINE_BYTES)

Rect = tuple[int, int, int, int, int]
"""(input index, first byte, row bytes, row stride bytes, rows)"""


def box_rects(box: Sequence[tuple[int, int]], strides: Sequence[int], elem_bytes: int) -> list[tuple[int, int, int, int]]:
    """(first byte, row bytes, row stride bytes, rows) of the rectangles covering one box of
    a tensor with element `strides` (at most MAX_RECTS_PER_TASK; [] for an empty box)."""
    if any(hi <= lo for lo, hi in box):
        return []
    dims = [d for d, (lo, hi) in enumerate(box) if hi - lo > 1]
    base = sum(lo * s for (lo, _), s in zip(box, strides))
    inner = min(dims, key=lambda d: strides[d]) if dims else None
    if inner is not None and strides[inner] != 1:
        inner = None  # no contiguous row: one element per row
    row = (box[inner][1] - box[inner][0] if inner is not None else 1) * elem_bytes
    outer = [d for d in dims if d != inner]
    if not outer:
        return [(base * elem_bytes, row, 0, 1)]
    step = max(outer, key=lambda d: box[d][1] - box[d][0])
    rest = [d for d in outer if d != step]
    rects = []
    for combo in itertools.product(*[range(box[d][0], box[d][1]) for d in rest]):
        off = base + sum((c - box[d][0]) * strides[d] for c, d in zip(combo, rest))
        rects.append((off * elem_bytes, row, strides[step] * elem_bytes, box[step][1] - box[step][0]))
        if len(rects) >= MAX_RECTS_PER_TASK:
            break
    return rects


def task_rects(
    task: TaskOp, weight_buffers: Mapping[int, tuple[int, Sequence[int], int]], max_lines: int
) -> list[Rect]:
    """The prefetch rectangles of `task`: its read boxes of weight buffers, cut to `max_lines`
    lines in all (the last rectangle loses rows).  `weight_buffers` maps a graph buffer index
    to (input index, element strides, element bytes)."""
    out: list[Rect] = []
    lines = 0
    for buf, box in task.footprint(False):
        if buf not in weight_buffers:
            continue
        j, strides, eb = weight_buffers[buf]
        for first, row, stride, rows in box_rects(box, strides, eb):
            per_row = math.ceil(row / LINE_BYTES)
            rows = min(rows, (max_lines - lines) // per_row)
            if len(out) >= MAX_RECTS_PER_TASK or rows <= 0:
                return out
            lines += rows * per_row
            out.append((j, first, row, stride, rows))
    return out
