"""Dynamic storage allocation (DSA) for shared-memory tiles: pure functions, no IR.

An item is `(size, start, end)`: `size` bytes live during the half-open time interval
`[start, end)`. A plan gives every item an offset so that items whose intervals intersect
never intersect in memory; its cost is the peak `max(offset + size)`. DSA is NP-hard
(mirage-notes 3.7); we run

* three online heuristics (Mirage's): events sorted by time, frees before allocations at
  equal times, each allocation takes a free range of the free list (`sbrk`-style: when no
  range fits, the top of the heap grows, merging with a free block that ends at the top):
  **first-fit** (lowest address), **best-fit** (smallest sufficient range), **worst-fit**
  (largest range); each in two allocation orders at equal times (input order and largest
  first), and
* an exact **CP-SAT** model (OR-tools): an offset variable per item, a fixed time interval
  and a memory interval per item, `add_no_overlap_2d`, minimise the peak; warm-started with
  `add_hint` from the best heuristic plan and bounded by it, under a time limit. CP-SAT is
  skipped when a heuristic already reaches the trivial lower bound
  `max over time of the live bytes` (then it is optimal).

All sizes and offsets are multiples of `align` bytes (sizes are rounded up); the solver
works in `align` units.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

Item = tuple[int, int, int]  # (size bytes, start, end)


@dataclass(frozen=True)
class DsaPlan:
    """A DSA solution: byte `offsets` per item (input order), the `peak` (bytes), the planner that
    found it ("first-fit", "best-fit", "worst-fit", "cp-sat" or "empty", with "-largest-first"
    for that allocation order), whether it is proven `optimal`, and the live-bytes `lower_bound`.
    """
    offsets: tuple[int, ...]
    peak: int
    planner: str  # "first-fit" | "best-fit" | "worst-fit" | "cp-sat" | "empty" (+ "-largest-first")
    optimal: bool  # proven optimal (heuristic at the lower bound, or CP-SAT OPTIMAL)
    lower_bound: int


def round_up(x: int, a: int) -> int:
    """`x` rounded up to a multiple of `a` (both positive integers)."""
    return (x + a - 1) // a * a


def lower_bound(items: Sequence[Item]) -> int:
    """max over time of the bytes alive at that time (no plan can do better)."""
    events: list[tuple[int, int]] = []
    for size, start, end in items:
        if end > start and size > 0:
            events.append((start, size))
            events.append((end, -size))
    events.sort(key=lambda e: (e[0], e[1]))  # frees (negative) first at equal times
    live = best = 0
    for _, delta in events:
        live += delta
        best = max(best, live)
    return best


def check_plan(items: Sequence[Item], offsets: Sequence[int]) -> None:
    """Raise AssertionError if two items overlap in both time and memory."""
    for i, (si, ai, bi) in enumerate(items):
        if offsets[i] < 0:
            raise AssertionError(f"item {i} has negative offset {offsets[i]}")
        for j in range(i + 1, len(items)):
            sj, aj, bj = items[j]
            if ai < bj and aj < bi and si > 0 and sj > 0:
                if offsets[i] < offsets[j] + sj and offsets[j] < offsets[i] + si:
                    raise AssertionError(f"items {i} and {j} overlap in time and memory")


def peak_of(items: Sequence[Item], offsets: Sequence[int]) -> int:
    """The peak of a plan: max(offset + size) over the items of non-zero size (0 if none)."""
    return max((o + s for (s, _, _), o in zip(items, offsets) if s > 0), default=0)


# ---------------------------------------------------------------------------------------
# Online heuristics


class _FreeList:
    """Free ranges below the heap top (sorted, coalesced) plus the top itself."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.top = 0

    def alloc(self, size: int, fit: str, align: int = 1) -> int:
        """The offset (a multiple of `align`) of a new `size`-byte block: in the first (lowest),
        smallest (`best`) or largest (`worst`) free range that holds it aligned, as `fit` says, the
        rest of the range staying free; without one the top grows, absorbing a free range that ends
        at it."""
        best = -1
        for k, (s, e) in enumerate(zip(self.starts, self.ends)):
            if round_up(s, align) + size > e:
                continue
            if fit == "first":
                best = k
                break
            if best < 0:
                best = k
            elif fit == "best" and e - s < self.ends[best] - self.starts[best]:
                best = k
            elif fit == "worst" and e - s > self.ends[best] - self.starts[best]:
                best = k
        if best >= 0:
            s, e = self.starts[best], self.ends[best]
            off = round_up(s, align)
            del self.starts[best], self.ends[best]
            if off + size < e:  # keep the tail, then the aligned-away head
                self.starts.insert(best, off + size)
                self.ends.insert(best, e)
            if off > s:
                self.starts.insert(best, s)
                self.ends.insert(best, off)
            return off
        # grow the top; a free block ending at the top is absorbed (sbrk with coalescing)
        if self.ends and self.ends[-1] == self.top:
            base = self.starts.pop()
            self.ends.pop()
        else:
            base = self.top
        off = round_up(base, align)
        if off > base:  # the alignment gap stays free
            self.starts.append(base)
            self.ends.append(off)
        self.top = off + size
        return off

    def free(self, off: int, size: int) -> None:
        """Give back the block `[off, off + size)`, coalesced with free neighbours; a free range that
        then ends at the top lowers the top."""
        end = off + size
        k = bisect.bisect_left(self.starts, off)
        self.starts.insert(k, off)
        self.ends.insert(k, end)
        if k + 1 < len(self.starts) and self.starts[k + 1] == end:
            self.ends[k] = self.ends[k + 1]
            del self.starts[k + 1], self.ends[k + 1]
        if k > 0 and self.ends[k - 1] == off:
            self.ends[k - 1] = self.ends[k]
            del self.starts[k], self.ends[k]
        if self.ends and self.ends[-1] == self.top:  # give the trailing block back to the top
            self.top = self.starts.pop()
            self.ends.pop()


def online_fit(
    items: Sequence[Item], fit: str, largest_first: bool = False, aligns: Sequence[int] | None = None
) -> list[int]:
    """Mirage-style online allocator: `fit` in {"first", "best", "worst"}; item i's offset is a
    multiple of `aligns[i]` (default 1)."""
    order = sorted(
        range(len(items)),
        key=(lambda i: (items[i][1], -items[i][0], i)) if largest_first else (lambda i: (items[i][1], i)),
    )
    frees = sorted(range(len(items)), key=lambda i: (items[i][2], i))
    offsets = [0] * len(items)
    fl = _FreeList()
    f = 0
    for i in order:
        size, start, _ = items[i]
        while f < len(frees) and items[frees[f]][2] <= start:
            j = frees[f]
            if items[j][0] > 0 and items[j][1] < items[j][2]:
                fl.free(offsets[j], items[j][0])
            f += 1
        if size <= 0 or items[i][2] <= start:
            offsets[i] = 0
            continue
        offsets[i] = fl.alloc(size, fit, aligns[i] if aligns else 1)
    return offsets


HEURISTICS: dict[str, tuple[str, bool]] = {
    "first-fit": ("first", False),
    "best-fit": ("best", False),
    "worst-fit": ("worst", False),
    "first-fit-largest-first": ("first", True),
    "best-fit-largest-first": ("best", True),
    "worst-fit-largest-first": ("worst", True),
}
"""name -> (fit, largest first among allocations at the same time)."""


def best_heuristic(items: Sequence[Item], aligns: Sequence[int] | None = None) -> tuple[str, list[int], int]:
    """(name, offsets, peak) of the heuristic with the lowest peak (first such in HEURISTICS)."""
    best: tuple[str, list[int], int] | None = None
    for name, (fit, largest) in HEURISTICS.items():
        offs = online_fit(items, fit, largest, aligns)
        peak = peak_of(items, offs)
        if best is None or peak < best[2]:
            best = (name, offs, peak)
    assert best is not None
    return best


# ---------------------------------------------------------------------------------------
# CP-SAT


def cpsat_plan(
    items: Sequence[Item],
    upper_bound: int,
    hint: Sequence[int] | None = None,
    time_limit_ms: int = 200,
    align: int = 1,
    workers: int = 1,
    aligns: Sequence[int] | None = None,
) -> tuple[list[int], int, bool] | None:
    """Exact model: minimise the peak with `add_no_overlap_2d(time intervals, memory intervals)`.

    Sizes/offsets in bytes (multiples of `align`); `upper_bound` bounds the peak (the best
    heuristic's). Returns (offsets, peak, proven_optimal) or None when no solution was found
    within `time_limit_ms`. `aligns[i]` (a multiple of `align`): item i's offset alignment.
    """
    from ortools.sat.python import cp_model

    live = [i for i, (s, a, b) in enumerate(items) if s > 0 and b > a]
    if not live:
        return [0] * len(items), 0, True
    ub = upper_bound // align
    m = cp_model.CpModel()
    offs: dict[int, cp_model.IntVar] = {}
    xs, ys = [], []
    peak = m.new_int_var(lower_bound(items) // align, ub, "peak")
    for i in live:
        size, start, end = items[i]
        u = size // align
        step = (aligns[i] // align) if aligns else 1
        if step > 1:
            k = m.new_int_var(0, max(ub - u, 0) // step, f"k{i}")
            o = m.new_int_var(0, max(ub - u, 0), f"o{i}")
            m.add(o == step * k)
        else:
            o = m.new_int_var(0, max(ub - u, 0), f"o{i}")
        offs[i] = o
        xs.append(m.new_fixed_size_interval_var(start, end - start, f"t{i}"))
        ys.append(m.new_fixed_size_interval_var(o, u, f"m{i}"))
        m.add(peak >= o + u)
    m.add_no_overlap_2d(xs, ys)
    m.minimize(peak)
    if hint is not None:
        for i in live:
            m.add_hint(offs[i], hint[i] // align)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit_ms, 1) / 1000.0
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 0
    status = solver.solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    out = [0] * len(items)
    for i in live:
        out[i] = solver.value(offs[i]) * align
    return out, solver.value(peak) * align, status == cp_model.OPTIMAL


def plan(
    items: Sequence[Item],
    *,
    align: int = 16,
    time_limit_ms: int = 200,
    use_cpsat: bool = True,
    aligns: Sequence[int] | None = None,
) -> DsaPlan:
    """Best of the heuristics and (when they miss the lower bound) CP-SAT.

    Sizes are rounded up to `align`; offsets are multiples of `align`, and of `aligns[i]`
    (rounded up to a multiple of `align`) for item i when given.
    """
    if aligns is not None:
        aligns = [round_up(max(a, align), align) for a in aligns]
    norm = [(round_up(s, align), a, b) for s, a, b in items]
    lb = lower_bound(norm)
    if not any(s > 0 and b > a for s, a, b in norm):
        return DsaPlan(tuple(0 for _ in norm), 0, "empty", True, 0)
    name, offs, peak = best_heuristic(norm, aligns)
    if peak <= lb or not use_cpsat or time_limit_ms <= 0 or not have_cpsat():
        return DsaPlan(tuple(offs), peak, name, peak <= lb, lb)
    res = cpsat_plan(norm, peak, offs, time_limit_ms, align, aligns=aligns)
    if res is not None and res[1] < peak:
        return DsaPlan(tuple(res[0]), res[1], "cp-sat", res[2], lb)
    return DsaPlan(tuple(offs), peak, name, res is not None and res[2], lb)


def have_cpsat() -> bool:
    """Whether OR-tools' CP-SAT can be imported. It is a dependency of the package, but a
    machine that only runs compiled graphs (a GPU box fed with wheels) may lack it: plans
    there come from the heuristics alone, still valid, sometimes larger."""
    import importlib.util

    return importlib.util.find_spec("ortools") is not None


def brute_force_peak(items: Sequence[Item]) -> int:
    """Optimal peak by trying every placement order with lowest-feasible-offset placement.

    Exact: placing the items of an optimal plan in increasing offset order, each at its
    lowest offset compatible with the items already placed, never raises an offset (each
    earlier time-overlapping item ends at or below the later item's optimal offset).
    Exponential; for tests with <= 7 items.
    """
    from itertools import permutations

    live = [i for i, (s, a, b) in enumerate(items) if s > 0 and b > a]
    best = None
    for perm in permutations(live):
        placed: list[tuple[int, int, int, int]] = []  # (off, size, start, end)
        top = 0
        for i in perm:
            size, start, end = items[i]
            blockers = sorted((o, o + s) for o, s, a, b in placed if a < end and start < b)
            off = 0
            for lo, hi in blockers:
                if off + size <= lo:
                    break
                off = max(off, hi)
            placed.append((off, size, start, end))
            top = max(top, off + size)
            if best is not None and top >= best:
                break
        if best is None or top < best:
            best = top
    return best or 0
