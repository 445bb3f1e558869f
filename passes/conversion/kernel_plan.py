"""The planner's records of a chosen threadblock graph: `KernelPlan` (one kernel) and
`FusionPlan` (the one or two kernels of a group).

`default_tb_graph.Planner` fills a `KernelPlan` with the tiling and mapping it enumerates,
`plan_cost.CostModel.estimate` adds its estimates (shared memory in bytes, time in µs), and
`build_tb_graph.emit_kernel` turns it into a `kn.customized` op.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from mirage_xdsl.passes.conversion.plan_analysis import AxisInfo, OnlineSoftmax, online_softmax
from mirage_xdsl.passes.conversion.plan_group import Group


@dataclass
class KernelPlan:
    """One block graph: the chosen tiling/mapping of (part of) a group, and its estimates."""

    group: Group
    ax: AxisInfo
    phase: dict[int, str]
    loop_axis: int | None
    forloop_range: int
    split: int
    grid: tuple[int, int, int]
    grid_axes: tuple[int | None, int | None, int | None]
    tiles: dict[int, tuple[int, ...]]
    needed: list[int]
    outputs: list[tuple[int, tuple[int, int, int]]]  # (node, omap)
    rms: dict[int, int]  # sqrt node -> x node, emitted as red_ld_rms(x)
    skipped: set[int]
    dimx: int
    smem: int = 0
    cost_us: float = 0.0
    blocks: int = 0
    loaded_bytes: int = 0
    unique_bytes: int = 0
    flops: int = 0
    balance: float = 0.0
    redundancy: float = 1.0  # matmul FLOPs of all blocks / FLOPs of the group computed once
    tiebreak: tuple = ()
    template: str = ""
    threads: int = 128  # block_dim.x
    grid_sum: bool = False  # split-K combined in this kernel (tb.grid_sum) instead of a second one

    @property
    def store_grid(self) -> tuple[int, int, int]:
        """The grid as the outputs see it: with a grid sum, the split axis stores once."""
        if not self.grid_sum:
            return self.grid
        return tuple(1 if a == self.loop_axis and self.split > 1 else g for g, a in zip(self.grid, self.grid_axes))  # type: ignore[return-value]

    @functools.cached_property
    def online(self) -> OnlineSoftmax | None:
        """The online softmax of this plan: set when a max over the loop axis runs in the
        loop (phase `loop` for a node reducing the loop axis)."""
        L = self.loop_axis
        if L is None or not any(self.phase[n] == "loop" and self.ax.reduce_axis.get(n) == L for n in self.phase):
            return None
        return online_softmax(self.group, self.ax, L)

    def imap_fdim(self, node: int) -> tuple[tuple[int, int, int], int]:
        """The `tb.input` maps of group input `node`: the dim each grid axis (x, y, z)
        partitions (-1: replicated) and the dim the for-loop walks (-1: none)."""
        axes = self.ax.axes[node]
        imap = []
        for g, a in zip(self.grid, self.grid_axes):
            d = self.ax.dim_of(node, a) if (g > 1 and a is not None) else None
            imap.append(-1 if d is None else d)
        fdim = -1
        if self.loop_axis is not None and self.loop_axis in axes:
            fdim = axes.index(self.loop_axis)
        return tuple(imap), fdim  # type: ignore[return-value]

    def describe(self) -> str:
        """One line: template, grid, for-loop trips, blocks, shared memory and estimate."""
        return (
            f"{self.template}: grid {self.grid}, forloop {self.forloop_range}, blocks {self.blocks}, "
            f"smem {self.smem} B, est {self.cost_us:.2f} us"
        )


@dataclass
class FusionPlan:
    """One or two kernels (split-K) computing a group; `partials` are kernel 1's outputs."""

    kernels: list[KernelPlan]
    cost_us: float
    tiebreak: tuple = ()
