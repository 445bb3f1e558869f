"""Axis and phase analysis of a planner group: which dims are one axis, which for-loop is legal.

The planner (`default_tb_graph.Planner`) asks this module three questions about a `Group`
(`plan_group`) before it enumerates grids and tiles; mirage-notes 1.4-1.7 define the
block-graph semantics used here.

1. **Axes** (`analyse_axes`).  Every dim of every value of the group gets an axis by
   unification (einsum-like): elementwise ops (and the causal mask) keep their operand's axes (broadcast size-1
   dims have none), a matmul ties `lhs[-1]` to `rhs[-2]` (the contracted axis), batch dims to
   batch dims.  An axis is *reduced* if a matmul contracts it or a `kn.reduction` sums it;
   *whole* if it must stay entire in every tile (normalised by `kn.rms_norm`, the target dim
   of a strided reduction, two dims of one tensor); *parallel* otherwise.  Parallel axes
   present in every output can be partitioned by the grid; reduced, non-whole axes can be
   walked by the for-loop.
2. **Phases** for a loop axis L (`compute_phases`, mirage-notes 1.4): an input with L is
   iterated (`forloop_dim`), others are loaded once (`pre`).  An op reducing L (matmul
   contracting L, reduction over L) runs in the loop and its result is accumulated (`nored`,
   `red_ld_sum`, `redtox_ld_sum`, or `red_ld_rms` for `sqrt(sum(x^2/n))`, `rms_shortcuts`),
   which puts it *after* the loop (`post`).  Elementwise ops inherit their operands' phase;
   mixing an in-loop value with an accumulated one is illegal (that is why `kn-simplify`
   moves divisions across matmuls); loop-invariant values used after the loop are carried
   over by a `nored` (one iteration) or `max` accumulator (the max of equal values is the
   value).  Without a loop axis (`forloop_range` 1) every op runs in the loop body and the
   outputs pass through `nored`.
3. **Online softmax** (`online_softmax`, option `online-softmax`): a max over the loop axis
   that the loop itself reads runs as a running max with rescaled accumulators.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mirage_xdsl.passes.conversion.plan_group import BINARY_KINDS, UNARY_KINDS, Group, Node


@dataclass
class AxisInfo:
    """The axes of a group (`analyse_axes`): axis ids are ints from 0, one per set of unified
    dims of size > 1; `extent[a]` is the size of axis `a` (elements)."""

    axes: dict[int, tuple[int | None, ...]]  # node -> axis per dim (None: a size-1 dim)
    extent: dict[int, int]
    whole: set[int]  # axes every tile must hold entire
    reduced: set[int]  # axes a matmul contracts or a reduction sums
    reduce_axis: dict[int, int]  # node -> the axis it sums over (matmul contraction, reduction dim)
    roles: dict[int, set[str]]  # axis -> {"m", "n", "batch"}

    def parallel(self) -> list[int]:
        """Axes neither reduced nor whole (the grid may partition them), ascending."""
        return sorted(a for a in self.extent if a not in self.reduced and a not in self.whole)

    def loopable(self) -> list[int]:
        """Reduced axes that need not stay whole (a for-loop may walk them), ascending."""
        return sorted(a for a in self.reduced if a not in self.whole)

    def dim_of(self, node: int, axis: int) -> int | None:
        """The first dim of `node` on `axis`, or None if it has none."""
        for d, a in enumerate(self.axes[node]):
            if a == axis:
                return d
        return None


def analyse_axes(group: Group) -> AxisInfo | None:
    """Unify the dims of the group's values into axes (None if the shapes are inconsistent)."""
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(k: tuple[int, int]) -> tuple[int, int]:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    def union(a: tuple[int, int], b: tuple[int, int]) -> None:
        if a in parent and b in parent:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)

    for n in group.nodes:
        for d, s in enumerate(n.shape):
            if s > 1:
                parent[(n.idx, d)] = (n.idx, d)
    whole_keys: set[tuple[int, int]] = set()
    reduce_keys: dict[int, tuple[int, int]] = {}
    role_keys: list[tuple[tuple[int, int], str]] = []
    for n in group.nodes:
        k = n.kind
        if k == "input":
            continue
        args = [group.nodes[a] for a in n.args]
        rank = len(n.shape)
        if k in UNARY_KINDS or k in ("rms_norm", "causal_mask"):
            for d in range(rank):
                union((n.idx, d), (args[0].idx, d))
            if k == "rms_norm":
                for d in range(rank - n.props["normalized"], rank):
                    whole_keys.add((n.idx, d))
        elif k in BINARY_KINDS:
            for a in args:
                if len(a.shape) != rank:
                    return None
                for d in range(rank):
                    if a.shape[d] == n.shape[d]:
                        union((n.idx, d), (a.idx, d))
        elif k == "matmul":
            a, b = args
            for d in range(rank - 2):
                union((n.idx, d), (a.idx, d))
                union((n.idx, d), (b.idx, d))
                role_keys.append(((n.idx, d), "batch"))
            union((n.idx, rank - 2), (a.idx, rank - 2))
            union((n.idx, rank - 1), (b.idx, rank - 1))
            union((a.idx, rank - 1), (b.idx, rank - 2))
            role_keys += [((n.idx, rank - 2), "m"), ((n.idx, rank - 1), "n")]
            if a.shape[-1] > 1:
                reduce_keys[n.idx] = (a.idx, rank - 1)
        elif k in ("reduction", "reduction_max"):
            (a,) = args
            dim, size = n.props["dim"], n.props["size"]
            for d in range(rank):
                if d != dim:
                    union((n.idx, d), (a.idx, d))
            if a.shape[dim] > 1:
                reduce_keys[n.idx] = (a.idx, dim)
            if size > 1:
                whole_keys.add((n.idx, dim))
        else:
            return None
    for p, q in group.aligned:  # concat operands, chunks of one tensor (plan_group.Group)
        sp, sq = group.nodes[p].shape, group.nodes[q].shape
        if len(sp) == len(sq):
            for d in range(len(sp)):
                if sp[d] == sq[d]:
                    union((p, d), (q, d))
    extent: dict[int, int] = {}
    axes: dict[int, tuple[int | None, ...]] = {}
    ids: dict[tuple[int, int], int] = {}
    whole: set[int] = set()
    for n in group.nodes:
        row: list[int | None] = []
        for d, s in enumerate(n.shape):
            if s <= 1:
                row.append(None)
                continue
            root = find((n.idx, d))
            axis_id = ids.setdefault(root, len(ids))
            if extent.setdefault(axis_id, s) != s:
                return None
            row.append(axis_id)
        if len(set(x for x in row if x is not None)) != sum(x is not None for x in row):
            whole.update(x for x in row if x is not None and row.count(x) > 1)
        axes[n.idx] = tuple(row)
    for key in whole_keys:
        if key in parent:
            whole.add(ids[find(key)])
    reduce_axis = {n: ids[find(key)] for n, key in reduce_keys.items()}
    roles: dict[int, set[str]] = {}
    for key, role in role_keys:
        if key in parent:
            roles.setdefault(ids[find(key)], set()).add(role)
    return AxisInfo(axes, extent, whole, set(reduce_axis.values()), reduce_axis, roles)


@dataclass(frozen=True)
class OnlineSoftmax:
    """Maxima over the loop axis computed while the loop runs (the online softmax of
    Milakov & Gimelshein 2018, FlashAttention's running max): `maxima` are the
    `reduction_max` nodes kept in the loop as a running `tb.reduction_max`; `rescaled` maps
    every accumulated node (a sum or a matmul contracting the loop axis) whose input is
    scaled by `exp(-max)` to its max node -- its for-loop accumulator is rescaled by
    `exp(old max - new max)` each iteration, so after the loop it holds exactly the sum
    with the final max."""

    maxima: frozenset[int]
    rescaled: dict[int, int]


def online_softmax(group: Group, ax: AxisInfo, loop_axis: int) -> OnlineSoftmax | None:
    """The online softmax of `group` for a loop over `loop_axis`, or None if the group has
    no max over that axis or uses one in a way rescaled accumulators cannot express.

    Accepted, per max `m = reduction_max(s)` over the loop axis (its last dim, `s` free of
    any max): `x - m` only under `exp` (`e = exp(x - m)` is scaled by `exp(-m)`); a scaled
    value times / divided by an unscaled one, `mul_scalar`, sums of two values scaled by the
    same max, a sum over another dim, a matmul with the scaled value on the left: scaled;
    a sum over the loop axis or a matmul contracting it: accumulated with rescaling.  Values
    after the loop (accumulator results, the max itself) are used freely."""
    maxima = {
        n.idx
        for n in group.nodes
        if n.kind == "reduction_max" and ax.reduce_axis.get(n.idx) == loop_axis and n.props["dim"] == len(n.shape) - 1
    }
    if not maxima:
        return None
    state: dict[int, tuple[str, int]] = {}  # node -> ("max" | "shifted" | "scaled" | "post", max node)
    rescaled: dict[int, int] = {}
    for n in group.nodes:
        if n.kind == "input":
            continue
        marks = [state.get(a) for a in n.args]
        kinds = [mk[0] if mk is not None else None for mk in marks]
        in_loop = [mk for mk in marks if mk is not None and mk[0] != "post"]
        reduces_loop = ax.reduce_axis.get(n.idx) == loop_axis
        if n.idx in maxima:
            if any(kinds):
                return None
            state[n.idx] = ("max", n.idx)
            continue
        if "post" in kinds:
            # after the loop: accumulator results and the final maxima (lifted) only
            if "shifted" in kinds or "scaled" in kinds:
                return None
            state[n.idx] = ("post", -1)
            continue
        if not in_loop:
            if reduces_loop:
                state[n.idx] = ("post", -1)
            continue
        owners = {mk[1] for mk in in_loop}
        if len(owners) != 1:
            return None
        (m,) = owners
        mark = _online_rule(n, kinds, reduces_loop)
        if mark is None:
            return None
        if mark == "rescaled":
            rescaled[n.idx] = m
            state[n.idx] = ("post", -1)
        else:
            state[n.idx] = (mark, m)
    if any(state.get(o, ("post", -1))[0] in ("shifted", "scaled") for o in group.outputs):
        return None  # a loop value as an output: the final max is not known in the loop
    return OnlineSoftmax(frozenset(maxima), rescaled)


def _online_rule(n: Node, kinds: Sequence[str | None], reduces_loop: bool) -> str | None:
    """What node `n` is in an online softmax given its operands' marks (None: independent
    of the max): "shifted" (`x - m`), "scaled" (by `exp(-m)`), "rescaled" (accumulated over
    the loop axis with rescaling), or None if the rescaling cannot express it."""
    k, kinds = n.kind, list(kinds)
    if k == "sub" and kinds == [None, "max"]:
        return "shifted"
    if k == "exp" and kinds == ["shifted"]:
        return "scaled"
    if "max" in kinds or "shifted" in kinds:
        return None
    if reduces_loop:
        ok = (k == "reduction" and n.props["size"] == 1) or (k == "matmul" and kinds == ["scaled", None])
        return "rescaled" if ok else None
    if k == "mul_scalar" or (k == "reduction" and n.props["size"] == 1):
        return "scaled"
    if (k == "mul" and kinds in (["scaled", None], [None, "scaled"])) or (k == "div" and kinds == ["scaled", None]):
        return "scaled"
    if (k in ("add", "sub") and kinds == ["scaled", "scaled"]) or (k == "matmul" and kinds == ["scaled", None]):
        return "scaled"
    return None


def compute_phases(
    group: Group, ax: AxisInfo, loop_axis: int | None, online: OnlineSoftmax | None = None
) -> dict[int, str] | None:
    """`pre` / `loop` / `post` per node for `loop_axis` (None: no loop), or None if illegal.
    With `online`, its maxima run in the loop (a running max) instead of after it."""
    ph: dict[int, str] = {}
    running = online.maxima if online is not None else frozenset()
    for n in group.nodes:
        if n.kind == "input":
            ph[n.idx] = "loop" if loop_axis is not None and loop_axis in ax.axes[n.idx] else "pre"
            continue
        ps = {ph[a] for a in n.args if a not in running}
        if any(a in running for a in n.args) and "post" not in ps:
            ps.add("loop")  # after the loop a running max is read as its final value (lifted)
        if n.idx in running:
            ph[n.idx] = "loop"
        elif loop_axis is not None and ax.reduce_axis.get(n.idx) == loop_axis:
            if "post" in ps:
                return None
            ph[n.idx] = "post"
        elif "post" in ps and "loop" in ps:
            return None
        elif "post" in ps:
            ph[n.idx] = "post"
        elif "loop" in ps:
            ph[n.idx] = "loop"
        else:
            ph[n.idx] = "pre"
    if loop_axis is not None and any(ph[o] == "loop" for o in group.outputs):
        return None
    return ph


def phases_for(group: Group, ax: AxisInfo, loop_axis: int | None, online: bool = False) -> dict[int, str] | None:
    """`compute_phases`, or -- with `online`, where a max over the loop axis is read inside
    the loop (the softmax's `exp(x - max)`) -- the phases with that max running in the loop
    (`online_softmax`); None if neither is legal."""
    ph = compute_phases(group, ax, loop_axis)
    if ph is not None or loop_axis is None or not online:
        return ph
    running = online_softmax(group, ax, loop_axis)
    return compute_phases(group, ax, loop_axis, running) if running is not None else None


def rms_shortcuts(group: Group, ax: AxisInfo, ph: dict[int, str], loop_axis: int) -> dict[int, int]:
    """sqrt nodes computing `sqrt(sum_L(x^2 * 1/ext(L)))` over the last dim -> x (red_ld_rms)."""
    users = group.users()
    out: dict[int, int] = {}
    for n in group.nodes:
        if n.kind != "sqrt":
            continue
        r = group.nodes[n.args[0]]
        if r.kind != "reduction" or r.props["size"] != 1 or ax.reduce_axis.get(r.idx) != loop_axis:
            continue
        ms = group.nodes[r.args[0]]
        if ms.kind != "mul_scalar" or r.props["dim"] != len(ms.shape) - 1:
            continue
        sq = group.nodes[ms.args[0]]
        if sq.kind != "square":
            continue
        if abs(ms.props["scalar"] * ax.extent[loop_axis] - 1.0) > 1e-9:
            continue
        if any(len(users[v]) != 1 or v in group.outputs for v in (r.idx, ms.idx, sq.idx)):
            continue
        out[n.idx] = sq.args[0]
    return out


def tile_of(ax: AxisInfo, node: int, factor: dict[int, int]) -> tuple[int, ...]:
    """The tile shape of `node` when each axis `a` is cut into `factor[a]` parts (default 1);
    size-1 dims stay 1."""
    return tuple(1 if a is None else ax.extent[a] // factor.get(a, 1) for a in ax.axes[node])
