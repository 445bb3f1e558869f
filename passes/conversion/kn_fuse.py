"""`kn-fuse`: the graph-kernel fusion pipeline of seed 001 on kernel graphs.

    kn-expand-composites  ->  kn-simplify  ->  kn-recognize-composites  ->  kn-widen-sums  ->  kn-partition  ->  kn-fold-views

Composite expansion opens `kn.rms_norm`; simplification (CSE + algebra) moves row factors
across matmuls; recognition folds row-local rms norms back and records softmax / attention /
rms-matmul patterns; the row sums of fp16 / bf16 graphs get f32 (`kn-widen-sums`: a softmax
over a 128k vocabulary sums past fp16's 65504); partition aggregates the ops into fused `kn.customized` kernels with
default block graphs (`default_tb_graph`); the kernels then read `kn.chunk` results as views
of the chunked tensors and write `kn.concat` results through views (`kn-fold-views`).  The output is accepted by `mirage-transpile`.
Options are forwarded to `kn-partition`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mirage_xdsl.passes.conversion.kn_partition import KnPartitionPass, PartitionOptions
from mirage_xdsl.passes.kn.expand_composites import KnExpandCompositesPass, KnRecognizeCompositesPass
from mirage_xdsl.passes.kn.fold_views import KnFoldViewsPass
from mirage_xdsl.passes.kn.simplify import KnSimplifyPass
from mirage_xdsl.passes.kn.widen_sums import KnWidenSumsPass


@dataclass(frozen=True)
class KnFusePass(ModulePass, PartitionOptions):
    """Expand composites, simplify, recognise patterns, partition into fused kernels, fold views."""

    name = "kn-fuse"

    def passes(self) -> list[ModulePass]:
        """The six passes run by `apply`, in order; the partition gets this pass's options.

        Raises:
            Nothing.
        """
        return [
            KnExpandCompositesPass(),
            KnSimplifyPass(),
            KnRecognizeCompositesPass(),
            KnWidenSumsPass(),
            KnPartitionPass(**self.partition_options()),  # type: ignore[arg-type]
            KnFoldViewsPass(),
        ]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Run `passes()` on `op` in order, in place.

        Raises:
            PassFailedException: from any of the six passes.
        """
        for p in self.passes():
            p.apply(ctx, op)
