"""The second kernel of a split-K plan: the group that combines kernel 1's partials.

Kernel 1 of a split-K plan (`default_tb_graph`, module docstring item 2) accumulates its
frontier -- the ops reducing the loop axis -- over one of S chunks of that axis and stores the
S partials of each side by side along one dim.  Summed accumulators combine by a sum over the
S partials, maxima by a max.  A running max (an online softmax, `plan_analysis.online_softmax`) and the sums it
rescales combine as flash decoding does (Dao et al., "Flash-Decoding for long-context
inference", 2023): the global max M is the max of the partial maxima m_s, and each partial sum
is weighted by exp(m_s - M) before the sum over the partials, which gives exactly the sums
rescaled to M that the unsplit loop ends with.

Partials are stored in the graph's dtype, as every split-K plan's are: an fp16 P @ V partial
sums up to one chunk of keys (L / S) of values weighted by at most 1, so its magnitude is
bounded by the chunk length times max |V|.
"""

from __future__ import annotations

from collections.abc import Sequence

from mirage_xdsl.passes.conversion.plan_analysis import AxisInfo, online_softmax
from mirage_xdsl.passes.conversion.plan_group import Group


def holds_maxima(group: Group, frontier: Sequence[int]) -> bool:
    """Whether some node of a split's `frontier` is a max (`kn.reduction_max`): its partials
    cannot be summed, `max_partial_dim` says where they go and `combine_group` takes their max."""
    return any(group.nodes[n].kind == "reduction_max" for n in frontier)


def max_partial_dim(group: Group, ax: AxisInfo, loop_axis: int, ph: dict[int, str], frontier: Sequence[int]) -> int | None:
    """Where kernel 1 of a split of `loop_axis` whose `frontier` holds maxima stores its S
    partials, counted from the end of each frontier node's shape (-1: the last dim, -2: the
    one before), or None if such a split cannot be combined (`combine_group`):

    - maxima the loop itself reads (a running max) with the sums and matmuls they rescale:
      every frontier node must be one row (dim -2 of extent 1, e.g. decode attention with one
      query per KV head), stored as the rows of `[.., S, n]` partials that plain reductions
      over dim -2 combine -- the maxima of several rows would need a strided max;
    - maxima alone (a max pass over long rows): partials side by side along a dim of extent 1
      (the reduced last dim, else dim -2), combined by a max."""
    online = online_softmax(group, ax, loop_axis)
    nodes = [group.nodes[n] for n in frontier]
    if not nodes or any(len(n.shape) < 2 for n in nodes):
        return None
    if all(n.kind == "reduction_max" for n in nodes) and all(ph.get(n.idx) == "post" for n in nodes):
        for offset in (-1, -2):
            if all(n.shape[offset] == 1 for n in nodes):
                return offset
        return None
    if online is None or not all(ph.get(m) == "loop" for m in online.maxima):
        return None
    if set(frontier) != set(online.maxima) | set(online.rescaled) or any(n.shape[-2] != 1 for n in nodes):
        return None
    return -2


def combine_group(group: Group, ph: dict[int, str], frontier: Sequence[int], dims: Sequence[int], split: int) -> Group:
    """The combine kernel's group: combine the partials of every frontier node (summed: a
    strided `kn.reduction` over the dim they were concatenated along; with maxima among them,
    `_rescaling_combine`: their max, and the sums a running max rescales), then run the
    post-loop ops (and the loop-invariant ops they need, recomputed from the original inputs).
    Partial j is the input with `ext = ("partial", j)`; `dims[j]` the dim kernel 1
    concatenated it along."""
    g2 = Group(records=group.records)
    partials: dict[int, int] = {}
    for j, (f, d) in enumerate(zip(frontier, dims)):
        node = group.nodes[f]
        pshape = list(node.shape)
        pshape[d] *= split
        partials[f] = g2.add("input", pshape, node.dtype, ext=("partial", j), name=f"partial{j}")
    if holds_maxima(group, frontier):
        mapping = _rescaling_combine(g2, group, partials, dims)
    else:
        mapping = {
            f: g2.add("reduction", group.nodes[f].shape, group.nodes[f].dtype, (p,), {"dim": d, "size": group.nodes[f].shape[d]})
            for (f, p), d in zip(partials.items(), dims)
        }

    def need(n: int) -> int:
        if n in mapping:
            return mapping[n]
        node = group.nodes[n]
        if node.kind == "input":
            mapping[n] = g2.add("input", node.shape, node.dtype, ext=node.ext, name=node.name)
        else:
            args = tuple(need(a) for a in node.args)
            mapping[n] = g2.add(node.kind, node.shape, node.dtype, args, node.props)
        return mapping[n]

    for node in group.nodes:
        if ph[node.idx] == "post":
            need(node.idx)
    g2.outputs = [need(o) for o in group.outputs]
    return g2


def _rescaling_combine(g2: Group, group: Group, partials: dict[int, int], dims: Sequence[int]) -> dict[int, int]:
    """The maxima's combine in `g2` (module docstring): per frontier node of `group`, the node
    of `g2` holding its combined value.  Every partial was concatenated along the same dim
    (`max_partial_dim`): M = the max of the partial maxima over it, w = exp(m - M) per
    partial, and each rescaled sum is the sum over that dim of w times its partial (every
    rescaled node belongs to the one max of the frontier)."""
    maxima = [f for f in partials if group.nodes[f].kind == "reduction_max"]
    d = dims[0]
    assert all(dim == d for dim in dims), dims
    mapping = {
        f: g2.add("reduction_max", group.nodes[f].shape, group.nodes[f].dtype, (partials[f],), {"dim": d, "size": 1}) for f in maxima
    }
    rescaled = [f for f in partials if f not in mapping]
    if not rescaled:
        return mapping
    (max_node,) = maxima
    dtype = group.nodes[max_node].dtype
    parts = g2.nodes[partials[max_node]]
    shifted = g2.add("sub", parts.shape, dtype, (partials[max_node], mapping[max_node]))
    weight = g2.add("exp", parts.shape, dtype, (shifted,))
    for f in rescaled:
        node = group.nodes[f]
        weighted = g2.add("mul", g2.nodes[partials[f]].shape, node.dtype, (partials[f], weight))
        mapping[f] = g2.add("reduction", node.shape, node.dtype, (weighted,), {"dim": d, "size": 1})
    return mapping
