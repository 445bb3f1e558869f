"""A contraction seen as a batched GEMM over strided operands, for the sm_90 TMA kernel.

    out[c][m][n] = sum_k A[c][m][k] * B[c][k][n]

`gemm_view(config)` fuses the same-type dimensions that are contiguous in every tensor
(`Optimizer.fuse_dims`, seed 004 Task 3b) until none are, then needs exactly one M, one N and
one K dimension and at most two C (batch) dimensions.  The TMA tensor maps of
`codegen/include/mirage_xdsl/hopper_gemm.cuh` read each operand as a 4-D box
`{inner, rows, batch_inner, batch_outer}` whose innermost dimension is contiguous, so:

- A must be K-contiguous (K stride 1 in A);
- B must be K- or N-contiguous (K-major: `trans_b = False`; N-major: `trans_b = True`);
- the output must be N-contiguous;
- every other stride of A and B must be a multiple of 16 bytes (TMA's global-stride rule,
  CUDA Driver API `cuTensorMapEncodeTiled`); the output's only for the 16-byte epilogues.

The view works on the unscheduled dimensions (dim types, sizes, strides): the sm_90 kernel
schedules the grid itself (a persistent grid over batch x m-tiles x n-tiles).
"""

from __future__ import annotations

from dataclasses import dataclass

from mirage_xdsl.dialects.contraction.config import Config, DimType, ExecType
from mirage_xdsl.passes.contraction.optimizer import Optimizer

A, B, OUT = 0, 1, 2


@dataclass(frozen=True)
class GemmView:
    """A batched GEMM over strided operands (sizes and strides in elements).

    Attributes:
        m, n, k: per-batch problem size.
        batch_inner, batch_outer: the two batch extents (1 when absent);
            batch index c = c_outer * batch_inner + c_inner.
        a_strides: A strides of (m, c_inner, c_outer); A's k stride is 1.
        b_strides: B strides of (k, n, c_inner, c_outer).
        out_strides: output strides of (m, c_inner, c_outer); the n stride is 1.
        trans_b: B is N-contiguous (b_strides' n stride is 1) rather than K-contiguous.
    """

    m: int
    n: int
    k: int
    batch_inner: int
    batch_outer: int
    a_strides: tuple[int, int, int]
    b_strides: tuple[int, int, int, int]
    out_strides: tuple[int, int, int]
    trans_b: bool

    @property
    def batch(self) -> int:
        """Number of batches (batch_inner * batch_outer)."""
        return self.batch_inner * self.batch_outer

    @property
    def flops(self) -> int:
        """2 * batch * m * n * k (one multiply and one add per term)."""
        return 2 * self.batch * self.m * self.n * self.k


def _fused(config: Config) -> Config:
    opt = Optimizer(Config(**{**config.__dict__, "exec_types": [ExecType.SEQ] * config.num_dims}))
    fused = True
    while fused:
        fused = False
        types = opt.config.dim_types
        for a in range(len(types)):
            for b in range(len(types)):
                if a != b and types[a] is types[b] and opt.fusion_problem(a, b) is None:
                    opt.fuse_dims(a, b)
                    fused = True
                    break
            if fused:
                break
    return opt.config


def gemm_view(config: Config, elem_bytes: int = 2) -> GemmView:
    """The batched-GEMM view of a contraction, or a ValueError saying why there is none.

    Args:
        config: the contraction (scheduled or not; exec types are ignored).
        elem_bytes: bytes per element (2 for FP16/BF16), for the 16-byte stride rule.

    Returns:
        The view; see `GemmView`.

    Raises:
        ValueError: after fusing contiguous dimensions there is not exactly one M, N and K
            dimension, more than two C dimensions, or an operand lacks the contiguous
            dimension or 16-byte strides TMA needs (message names the rule and a fix).
    """
    cfg = _fused(config)
    dims = {t: [i for i, d in enumerate(cfg.dim_types) if d is t] for t in DimType}
    for t in (DimType.M, DimType.N, DimType.K):
        if len(dims[t]) != 1:
            names = ", ".join(cfg.describe_dim(i) for i in dims[t]) or "none"
            raise ValueError(
                f"sm_90 GEMM: needs exactly one {t.value} dimension after fusing contiguous ones, found {names}; "
                "permute the operands so that these dimensions are adjacent in every tensor"
            )
    if len(dims[DimType.C]) > 2:
        raise ValueError("sm_90 GEMM: at most two batch (C) dimensions that do not fuse; found more")
    m, n, k = (dims[t][0] for t in (DimType.M, DimType.N, DimType.K))
    s = cfg.strides
    if s[A][k] != 1:
        raise ValueError(f"sm_90 GEMM: A must be contiguous along K (stride 1), its K stride is {s[A][k]}; transpose A")
    if s[OUT][n] != 1:
        raise ValueError(f"sm_90 GEMM: the output must be contiguous along N, its N stride is {s[OUT][n]}")
    if s[B][n] == 1:
        trans_b = True
    elif s[B][k] == 1:
        trans_b = False
    else:
        raise ValueError("sm_90 GEMM: B must be contiguous along K or N; transpose B")
    cs = dims[DimType.C]
    inner = cs[-1] if cs else None
    outer = cs[0] if len(cs) == 2 else None

    def st(t: int, d: int | None) -> int:
        return s[t][d] if d is not None else 0

    view = GemmView(
        m=cfg.dim_sizes[m],
        n=cfg.dim_sizes[n],
        k=cfg.dim_sizes[k],
        batch_inner=cfg.dim_sizes[inner] if inner is not None else 1,
        batch_outer=cfg.dim_sizes[outer] if outer is not None else 1,
        a_strides=(s[A][m], st(A, inner), st(A, outer)),
        b_strides=(s[B][k], s[B][n], st(B, inner), st(B, outer)),
        out_strides=(s[OUT][m], st(OUT, inner), st(OUT, outer)),
        trans_b=trans_b,
    )
    strides = [*view.a_strides, *view.b_strides]  # TMA-loaded; the output may be stored without TMA
    bad = [x for x in strides if x != 1 and (x * elem_bytes) % 16]
    if bad:
        raise ValueError(f"sm_90 GEMM: strides {bad} (elements) are not multiples of 16 bytes, as TMA requires; pad the tensors")
    return view
