"""SM shares of the kernels of one dependency level that run side by side (a megakernel's
tasks: `kn-partition{share-sms}`), so each is planned for its share of the GPU."""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import kn
from mirage_xdsl.passes.conversion.plan_group import elem_bytes


def value_bytes(v: SSAValue) -> int:
    """Bytes of the DTensor `v`."""
    return math.prod(kn.shape_of(v)) * elem_bytes(kn.element_type_of(v))


def concurrent_sm_shares(groups: list[list[Operation]], num_sms: int) -> dict[int, int]:
    """SMs to plan group i for, where groups run concurrently (index -> SMs; absent: all).

    A group's level is the longest chain of groups it depends on (through ops outside every
    group, e.g. kn.reshape); a megakernel's workers run the tasks of one level side by side,
    each kernel's tiles on whichever workers are free.  Groups of one level that stream
    graph inputs (weights, a KV cache) share the SMs in proportion to those bytes: the Q, K and
    V projections of a decoder layer (32, 8 and 8 MB) are planned for 88, 22 and 22 of 132
    SMs, so the small projections get fewer, longer tiles instead of a GPU-filling grid of
    short ones that each pays a task's fixed latency (its wait, its grid sum) on workers the
    large projection already keeps busy."""
    owner = {op: i for i, g in enumerate(groups) for op in g}

    def sources(v: SSAValue, seen: set[Operation]) -> set[int]:
        op = v.owner
        if not isinstance(op, Operation) or op in seen:
            return set()
        if op in owner:
            return {owner[op]}
        seen.add(op)
        return set().union(*(sources(u, seen) for u in op.operands)) if op.operands else set()

    deps = [set().union(*(sources(v, set()) for op in g for v in op.operands)) - {i} for i, g in enumerate(groups)]
    level: dict[int, int] = {}

    def level_of(i: int, path: frozenset[int] = frozenset()) -> int:
        if i not in level:
            level[i] = 1 + max((level_of(d, path | {i}) for d in deps[i] if d not in path), default=-1)
        return level[i]

    def input_bytes(g: list[Operation]) -> int:
        args = {v for op in g for v in op.operands if not isinstance(v.owner, Operation)}
        return sum(map(value_bytes, args))

    by_level: dict[int, list[tuple[int, int]]] = {}
    for i, g in enumerate(groups):
        b = input_bytes(g)
        if b:
            by_level.setdefault(level_of(i), []).append((i, b))
    shares = {}
    for members in by_level.values():
        total = sum(b for _, b in members)
        if len(members) > 1:
            shares.update({i: max(1, round(num_sms * b / total)) for i, b in members})
    return shares
