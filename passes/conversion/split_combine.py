"""The second kernel of a split-K plan: the group that combines kernel 1's partials.

Kernel 1 of a split-K plan (`default_tb_graph`, module docstring item 2) accumulates its
frontier -- the ops reducing the loop axis -- over one of S chunks of that axis and stores the
S partials of each side by side along one dim.  Summed accumulators combine by a sum over the
S partials, maxima by a max.  A running max (an online softmax, `plan_analysis.online_softmax`) and the sums it
rescales combine as flash decoding does (Dao et al., "Flash-Decoding for long-context
inference", 2023): the global max M is the max of the partial maxima m_s, and each partial sum
is weighted by exp(m_s - M) before the sum over the partials, which gives exactly the sums
rescaled to M that the unsplit loop ends with.

Several query rows per KV head (grouped-query decode attention, frontier nodes [.., g, x] with
g > 1) store their partials side by side along the last dim ([.., g, S * x], each row's S
chunks in turn), and the combine reads them as [L * g, S, x] (L = the product of the leading
dims, a no-copy `kn.reshape`): one row per (head, query) and the S partials along dim 1, where
the max of the maxima and the weights exp(m_s - M) broadcast like the one-row case.  Its
results [L * g, 1, x] become the group's outputs through a second reshape (`folded_shape`);
when that output is a graph output, kn-alias-reshape lets the combine write straight into its
buffer (`kn.output_view`).

Partials are stored in the graph's dtype, as every split-K plan's are: an fp16 P @ V partial
sums up to one chunk of keys (L / S) of values weighted by at most 1, so its magnitude is
bounded by the chunk length times max |V|.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from mirage_xdsl.passes.conversion.plan_analysis import AxisInfo, online_softmax
from mirage_xdsl.passes.conversion.plan_group import BINARY_KINDS, UNARY_KINDS, Group


def holds_maxima(group: Group, frontier: Sequence[int]) -> bool:
    """Whether some node of a split's `frontier` is a max (`kn.reduction_max`): its partials
    cannot be summed, `max_partial_dim` says where they go and `combine_group` takes their max."""
    return any(group.nodes[n].kind == "reduction_max" for n in frontier)


def max_partial_dim(group: Group, ax: AxisInfo, loop_axis: int, ph: dict[int, str], frontier: Sequence[int]) -> int | None:
    """Where kernel 1 of a split of `loop_axis` whose `frontier` holds maxima stores its S
    partials, counted from the end of each frontier node's shape (-1: the last dim, -2: the
    one before), or None if such a split cannot be combined (`combine_group`):

    - maxima the loop itself reads (a running max) with the sums and matmuls they rescale:
      one row per frontier node (dim -2 of extent 1, decode attention with one query per KV
      head) is stored as the rows of `[.., S, n]` partials that plain reductions over dim -2
      combine; g > 1 rows (the same [.., g] for every node) go
      side by side along the last dim (-1), folded by the combine (module docstring);
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
    if set(frontier) != set(online.maxima) | set(online.rescaled):
        return None
    if all(n.shape[-2] == 1 for n in nodes):
        return -2
    if len({n.shape[:-1] for n in nodes}) == 1 and is_decode_like(group, nodes[0].shape[-2]) and foldable_post_ops(group, ph, frontier):
        return -1
    return None


MAX_FOLDED_ROWS = 64
"""Query rows per head a folded split may have: decode (one new token per query head, a KV
head's g rows in one block's row tile).  Prefill rows fill the grid by themselves: folded, the
suite's 8 x 1024 x 1024 x 128 prefill took 196 µs where its one online kernel takes 28 (H200,
2026-11-26)."""


def is_decode_like(group: Group, rows: int) -> bool:
    """Whether a split of the keys with `rows` query rows per head may be folded: at most
    `MAX_FOLDED_ROWS` rows and no causal mask (a chunk of keys wholly past a row's diagonal
    would leave that row's partial max at -inf and its weight exp(-inf + inf) undefined)."""
    return rows <= MAX_FOLDED_ROWS and not any(n.kind == "causal_mask" for n in group.nodes)


def foldable_post_ops(group: Group, ph: dict[int, str], frontier: Sequence[int]) -> bool:
    """Whether the post-loop ops of `group` can run on folded rows (`folded_shape`): elementwise
    ops reading only the frontier and each other (the combine has only the partials), every
    value of the frontier's [.., g] rows."""
    rows = group.nodes[frontier[0]].shape[:-1]
    for node in group.nodes:
        if ph.get(node.idx) != "post" or node.idx in frontier:
            continue
        if node.kind not in UNARY_KINDS and node.kind not in BINARY_KINDS or node.shape[:-1] != rows:
            return False
        if any(a not in frontier and ph.get(a) != "post" for a in node.args):
            return False
    return True


def folded_shape(shape: Sequence[int], rows: int) -> tuple[int, int, int]:
    """`shape` = [*lead, g, x] of a frontier or post-loop node as one row per (lead, g):
    [prod(lead) * g, `rows`, x] (`rows` = S for the partials, 1 for the combined values)."""
    return (math.prod(shape[:-1]), rows, shape[-1])


def is_folded(group: Group, frontier: Sequence[int], dims: Sequence[int]) -> bool:
    """Whether kernel 1 stored the partials of several rows per node along the last dim
    (`max_partial_dim` -1 for a running max), which the combine folds."""
    nodes = [group.nodes[f] for f in frontier]
    return (
        holds_maxima(group, frontier)
        and any(n.kind != "reduction_max" for n in nodes)
        and all(d == len(n.shape) - 1 for n, d in zip(nodes, dims))
        and all(n.shape[-2] > 1 for n in nodes)
    )


def combine_group(group: Group, ph: dict[int, str], frontier: Sequence[int], dims: Sequence[int], split: int) -> Group:
    """The combine kernel's group: combine the partials of every frontier node (summed: a
    strided `kn.reduction` over the dim they were concatenated along; with maxima among them,
    `_rescaling_combine`: their max, and the sums a running max rescales), then run the
    post-loop ops (and the loop-invariant ops they need, recomputed from the original inputs).
    Partial j is the input with `ext = ("partial", j)`; `dims[j]` the dim kernel 1
    concatenated it along."""
    g2 = Group(records=group.records)
    partials: dict[int, int] = {}
    folded = is_folded(group, frontier, dims)
    for j, (f, d) in enumerate(zip(frontier, dims)):
        node = group.nodes[f]
        if folded:  # kernel 1's [.., g, S * x] read as [L * g, S, x]
            view = folded_shape(node.shape, split)
            partials[f] = g2.add("input", view, node.dtype, ext=("partial", j, view), name=f"partial{j}")
            continue
        pshape = list(node.shape)
        pshape[d] *= split
        partials[f] = g2.add("input", pshape, node.dtype, ext=("partial", j), name=f"partial{j}")
    if folded:
        mapping = _rescaling_combine(g2, group, partials, [1] * len(dims), lambda s: folded_shape(s, 1))
    elif holds_maxima(group, frontier):
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
            shape = folded_shape(node.shape, 1) if folded else node.shape
            mapping[n] = g2.add(node.kind, shape, node.dtype, args, node.props)
        return mapping[n]

    for node in group.nodes:
        if ph[node.idx] == "post":
            need(node.idx)
    g2.outputs = [need(o) for o in group.outputs]
    return g2


def _rescaling_combine(
    g2: Group,
    group: Group,
    partials: dict[int, int],
    dims: Sequence[int],
    shape_of: Callable[[tuple[int, ...]], tuple[int, ...]] = lambda s: s,
) -> dict[int, int]:
    """The maxima's combine in `g2` (module docstring): per frontier node of `group`, the node
    of `g2` holding its combined value (of shape `shape_of(node shape)`: folded rows or as
    is).  Every partial was concatenated along the same dim (`max_partial_dim`): M = the max
    of the partial maxima over it, w = exp(m - M) per partial, and each rescaled sum is the
    sum over that dim of w times its partial (every rescaled node belongs to the one max of
    the frontier)."""
    maxima = [f for f in partials if group.nodes[f].kind == "reduction_max"]
    d = dims[0]
    assert all(dim == d for dim in dims), dims
    mapping = {
        f: g2.add("reduction_max", shape_of(group.nodes[f].shape), group.nodes[f].dtype, (partials[f],), {"dim": d, "size": 1})
        for f in maxima
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
        mapping[f] = g2.add("reduction", shape_of(node.shape), node.dtype, (weighted,), {"dim": d, "size": 1})
    return mapping
