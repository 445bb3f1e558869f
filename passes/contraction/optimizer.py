"""`Optimizer`: transformations of a contraction `Config` (seed 004 Task 3, Task 4b).

`split_dim`, `fuse_dims` and `permute_dims` rewrite the dimension lists; `make_executable`
chooses exec types, PRIM tile sizes and an L2 blocking from a `TargetModel`, splits and
permutes to the seed's layout

    [C..., other M/N..., m_outer, n_outer, m_l2, n_l2, other K..., k_outer, m_prim, n_prim, k_prim]
     PAR ......................................... | SEQ ................ | PRIM ..............

and ends with `verify()`.  Every method raises a descriptive `ValueError` and leaves the
config unchanged when it does.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mirage_xdsl.dialects.contraction.config import (
    TENSOR_NAMES,
    Config,
    DimType,
    ExecType,
    check_structure,
    total_size,
    verify,
)

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class TargetModel:
    """The few machine numbers `make_executable` plans with (defaults: NVIDIA H100 SXM5).

    Attributes:
        smem_per_block: bytes of shared memory one block may use.  227 KiB: the opt-in
            maximum per block of compute capability 9.0 (CUDA C++ Programming Guide,
            "Technical Specifications per Compute Capability").
        l2_bytes: bytes of L2 cache.  50 MiB: NVIDIA H100 Tensor Core GPU datasheet /
            Hopper architecture whitepaper (H100 SXM5).
        num_sms: streaming multiprocessors.  132: same datasheet (H100 SXM5).
        in_bytes: bytes per input element; None takes it from the config's data type
            (2 for FP16/BF16, 4 for FP32).
        acc_bytes: bytes per accumulator element; 4 since the seed accumulates in FP32.
        power_of_two_tiles: PRIM tiles must be powers of two, as cuTile requires of every
            tile dimension (cuTile Python docs, `cuda.tile.Tile`).
    """

    smem_per_block: int = 227 * KIB
    l2_bytes: int = 50 * MIB
    num_sms: int = 132
    in_bytes: int | None = None
    acc_bytes: int = 4
    power_of_two_tiles: bool = True


H100 = TargetModel()


@dataclass(frozen=True)
class Blocking:
    """The sizes `make_executable` chose (all counts of elements or of PRIM tiles).

    Attributes:
        m_prim, n_prim, k_prim: PRIM tile extents (elements) along M, N, K.
        m_l2, n_l2: PRIM tiles per L2 group along M and N (an L2 group is m_l2 x n_l2 blocks).
    """

    m_prim: int
    n_prim: int
    k_prim: int
    m_l2: int
    n_l2: int


def _divisors(n: int) -> list[int]:
    """All divisors of n, ascending (trial division up to sqrt(n))."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def tile_candidates(size: int, power_of_two: bool) -> list[int]:
    """Tile extents (elements) that divide `size` exactly (no padding or masking), ascending;
    only powers of two when `power_of_two` (1 always qualifies).

    Raises:
        ValueError: `size` < 1 (math.isqrt of a negative number).
    """
    divisors = _divisors(size)
    return [d for d in divisors if d & (d - 1) == 0] if power_of_two else divisors


def prim_tile_bytes(m: int, n: int, k: int, in_bytes: int, acc_bytes: int) -> int:
    """Shared memory of one PRIM tile (seed Task 4b): an m x k tile of A and a k x n tile of
    B in the input type, plus the m x n accumulator: `in*(m*k + k*n) + acc*m*n` bytes.

    Raises:
        Nothing.
    """
    return in_bytes * (m * k + k * n) + acc_bytes * m * n


class Optimizer:
    """Wraps a `Config` (a deep copy; read it as `optimizer.config`) and transforms it.

    After `make_executable`, `blocking` holds the chosen sizes and `explanation` the
    reasons, one line each.

    Raises:
        ValueError: the config is malformed (`check_structure`).
    """

    def __init__(self, config: Config):
        check_structure(config)
        self.config = copy.deepcopy(config)
        self.blocking: Blocking | None = None
        self.explanation: list[str] = []

    # -- seed Task 3a ---------------------------------------------------------------------

    def _check_dim_id(self, dim_id: int, what: str = "dim_id") -> None:
        n = self.config.num_dims
        if isinstance(dim_id, bool) or not isinstance(dim_id, int) or not 0 <= dim_id < n:
            raise ValueError(f"{what} must be a dimension index in 0..{n - 1}, got {dim_id!r}")

    def split_dim(self, dim_id: int, outer_size: int, inner_size: int) -> None:
        """Split dimension `dim_id` of size `outer_size * inner_size` into an outer (left)
        and an inner (right) dimension, both inheriting its dim and exec type.  The inner
        keeps the stride s, the outer gets `s * inner_size` (0 stays 0: still absent).

        Raises:
            ValueError: bad `dim_id`, a size < 1, or `outer_size * inner_size` differing
                from the dimension's size.
        """
        self._check_dim_id(dim_id)
        for name, value in (("outer_size", outer_size), ("inner_size", inner_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"split_dim: {name} must be a positive integer, got {value!r}")
        config = self.config
        size = config.dim_sizes[dim_id]
        if outer_size * inner_size != size:
            raise ValueError(
                f"split_dim: cannot split {config.describe_dim(dim_id)} into {outer_size} x {inner_size} = "
                f"{outer_size * inner_size}; outer_size * inner_size must equal {size}"
            )
        config.dim_types.insert(dim_id, config.dim_types[dim_id])
        config.exec_types.insert(dim_id, config.exec_types[dim_id])
        config.dim_sizes[dim_id : dim_id + 1] = [outer_size, inner_size]
        for strides in config.strides:
            strides.insert(dim_id, strides[dim_id] * inner_size)

    # -- seed Task 3b ---------------------------------------------------------------------

    def fusion_problem(self, dim_id_a: int, dim_id_b: int) -> str | None:
        """Why dimensions a and b cannot be fused, or None when they can.

        The seed's rule: in every tensor indexing both, they are adjacent in memory
        (`stride[a] == stride[b] * size[b]` or `stride[a] * size[a] == stride[b]`).  Also
        refused: a dimension present (stride != 0) in a tensor where the other is absent
        (the fused index could not address that tensor), and a nesting that differs
        between tensors (a outer in one tensor, b outer in another: one fused index would
        then name different (a, b) pairs in different tensors).

        Raises:
            ValueError: a bad dimension index, or a == b.
        """
        self._check_dim_id(dim_id_a, "dim_id_a")
        self._check_dim_id(dim_id_b, "dim_id_b")
        if dim_id_a == dim_id_b:
            raise ValueError(f"fuse_dims: cannot fuse dimension {dim_id_a} with itself; give two different dimensions")
        orientations = {"a_outer", "b_outer"}
        for tensor in range(len(TENSOR_NAMES)):
            problem, allowed = self._tensor_orientations(tensor, dim_id_a, dim_id_b)
            if problem:
                return problem
            orientations &= allowed
        if not orientations:
            return "dimensions a and b are nested in opposite orders in different tensors"
        return None

    def _tensor_orientations(self, tensor: int, a: int, b: int) -> tuple[str | None, set[str]]:
        """(problem, nestings of a and b that are contiguous in tensor `tensor`)."""
        sa, sb = self.config.strides[tensor][a], self.config.strides[tensor][b]
        na, nb = self.config.dim_sizes[a], self.config.dim_sizes[b]
        name = TENSOR_NAMES[tensor]
        if sa == 0 and sb == 0:
            return None, {"a_outer", "b_outer"}
        if sa == 0 or sb == 0:
            present = a if sa else b
            return f"only dimension {present} indexes tensor {name} (the other has stride 0 there)", set()
        allowed = {o for o, ok in (("a_outer", sa == sb * nb), ("b_outer", sa * na == sb)) if ok}
        if not allowed:
            return (
                f"they are not adjacent in tensor {name}: strides {sa} (size {na}) and {sb} (size {nb}) satisfy "
                f"neither stride[a] == stride[b] * size[b] nor stride[a] * size[a] == stride[b]"
            ), set()
        return None, allowed

    def fuse_dims(self, dim_id_a: int, dim_id_b: int) -> None:
        """Fuse dimensions a and b into one of size `size[a] * size[b]` at a's position,
        inheriting a's dim and exec type; b is removed.  Its stride in each tensor is that
        of the inner of the two (0 where both are absent).

        Raises:
            ValueError: bad indices, a == b, or the dimensions are not fusible (see
                `fusion_problem`), naming the tensor and strides at fault.
        """
        problem = self.fusion_problem(dim_id_a, dim_id_b)
        config = self.config
        if problem:
            raise ValueError(
                f"fuse_dims: cannot fuse {config.describe_dim(dim_id_a)} with {config.describe_dim(dim_id_b)}: "
                f"{problem}; only dimensions contiguous in every tensor they index can be fused "
                "(permute or split the tensors' layouts instead)"
            )
        a, b = dim_id_a, dim_id_b
        for strides in config.strides:
            strides[a] = min(strides[a], strides[b])  # the inner one's stride (both 0: absent)
        config.dim_sizes[a] *= config.dim_sizes[b]
        per_dim: tuple[list[Any], ...] = (config.dim_types, config.exec_types, config.dim_sizes, *config.strides)
        for values in per_dim:
            del values[b]

    # -- seed Task 3c ---------------------------------------------------------------------

    def permute_dims(self, permutation: Sequence[int]) -> None:
        """Reorder every per-dimension list like `torch.permute`: new dimension i is old
        dimension `permutation[i]` (negative entries count from the end, as in torch).

        Raises:
            ValueError: `permutation` has the wrong length, a non-integer or out-of-range
                entry, or a repeated dimension.
        """
        n = self.config.num_dims
        order = list(permutation)
        if len(order) != n:
            raise ValueError(f"permute_dims: permutation {order} has {len(order)} entries; the config has {n} dimensions")
        if any(isinstance(p, bool) or not isinstance(p, int) or not -n <= p < n for p in order):
            raise ValueError(f"permute_dims: permutation {order} must hold dimension indices in {-n}..{n - 1}")
        order = [p % n for p in order]
        if sorted(order) != list(range(n)):
            repeated = sorted({p for p in order if order.count(p) > 1})
            raise ValueError(
                f"permute_dims: permutation {list(permutation)} repeats dimension(s) {repeated}; "
                f"it must name each of 0..{n - 1} exactly once"
            )
        config = self.config
        for name in ("dim_types", "exec_types", "dim_sizes"):
            values = getattr(config, name)
            setattr(config, name, [values[p] for p in order])
        config.strides = [[s[p] for p in order] for s in config.strides]

    # -- seed Task 3e ---------------------------------------------------------------------

    def verify(self) -> None:
        """Check the current config against the four rules of seed Task 3e.

        Raises:
            ValueError: see `mirage_xdsl.dialects.contraction.config.verify`.
        """
        verify(self.config)

    # -- seed Task 3d / 4b ----------------------------------------------------------------

    def make_executable(self, target: TargetModel | None = None) -> list[str]:
        """Make the config executable and L2-blocked for `target` (default `H100`).

        Steps: fuse same-type dimensions contiguous in every tensor; pick one M, N and K
        dimension for the PRIM tile (the one with the smallest stride); choose the PRIM tile
        (`choose_prim_tile`) and the L2 group (`choose_l2_group`); split the chosen
        dimensions into outer/l2/prim parts; permute to the module docstring's layout; set
        C and outer M/N to PAR, outer K to SEQ, the tiles to PRIM; run `verify()`.
        On failure the config is left unchanged.

        Returns:
            The explanation of the chosen sizes, one line each (also `self.explanation`);
            the sizes are in `self.blocking`.

        Raises:
            ValueError: the contraction has no M, N or K dimension (the GEMM primitive needs
                one of each, rule 4), or a malformed config.
        """
        target = target or H100
        saved = copy.deepcopy(self.config)
        try:
            return self._make_executable(target)
        except Exception:
            self.config = saved
            raise

    def _make_executable(self, target: TargetModel) -> list[str]:
        self._require_gemm_types()
        lines = self._fuse_contiguous()
        prim = {t: self._prim_dim(t) for t in (DimType.M, DimType.N, DimType.K)}
        in_bytes = target.in_bytes or self.config.data_type.bytes
        sizes = {t: self.config.dim_sizes[d] for t, d in prim.items()}
        m_prim, n_prim, k_prim, tile_lines = choose_prim_tile(sizes, target, in_bytes)
        k_total = total_size(self.config, DimType.K)
        m_l2, n_l2, l2_lines = choose_l2_group(
            sizes[DimType.M] // m_prim, sizes[DimType.N] // n_prim, m_prim, n_prim, k_total, target, in_bytes
        )
        self.blocking = Blocking(m_prim, n_prim, k_prim, m_l2, n_l2)
        self._split_and_permute(prim, self.blocking)
        lines += tile_lines + l2_lines + self._grid_lines(target)
        self.verify()
        self.explanation = lines
        return lines

    def _require_gemm_types(self) -> None:
        present = set(self.config.dim_types)
        missing = [t.value for t in (DimType.M, DimType.N, DimType.K) if t not in present]
        if missing:
            raise ValueError(
                f"make_executable: the contraction has no {' and no '.join(missing)} dimension, but the GEMM "
                "primitive needs at least one M, one N and one K dimension (rule 4); express it as a GEMM "
                "(e.g. add a size-1 index) or use another kernel"
            )

    def _fuse_contiguous(self) -> list[str]:
        """Fuse same-type dimensions that are contiguous in every tensor, until none are."""
        lines: list[str] = []
        fused = True
        while fused:
            fused = False
            for a, b in self._same_type_pairs():
                if self.fusion_problem(a, b) is None:
                    before = self.config.describe_dim(a), self.config.describe_dim(b)
                    self.fuse_dims(a, b)
                    lines.append(f"fused {before[0]} with {before[1]}: contiguous in every tensor, so one larger tile")
                    fused = True
                    break
        return lines

    def _same_type_pairs(self) -> list[tuple[int, int]]:
        types = self.config.dim_types
        n = len(types)
        return [(a, b) for a in range(n) for b in range(n) if a != b and types[a] is types[b]]

    def _prim_dim(self, dim_type: DimType) -> int:
        """The dimension of `dim_type` innermost in memory: smallest stride, summed over the
        tensors it indexes (ties: the rightmost in the config)."""
        dims = [i for i, t in enumerate(self.config.dim_types) if t is dim_type]
        return min(reversed(dims), key=lambda i: sum(s[i] for s in self.config.strides))

    def _split_and_permute(self, prim: dict[DimType, int], blocking: Blocking) -> None:
        """Split the PRIM dimensions into outer/l2/prim parts and permute to the layout."""
        size = self.config.dim_sizes
        m, n, k = (prim[t] for t in (DimType.M, DimType.N, DimType.K))
        pieces = {
            "m": [size[m] // (blocking.m_prim * blocking.m_l2), blocking.m_l2, blocking.m_prim],
            "n": [size[n] // (blocking.n_prim * blocking.n_l2), blocking.n_l2, blocking.n_prim],
            "k": [size[k] // blocking.k_prim, blocking.k_prim],
        }
        # One label per dimension, kept in step with the splits: the layout is built by name.
        labels: list[str | None] = [None] * self.config.num_dims
        labels[m], labels[n], labels[k] = "m", "n", "k"
        for name, sizes in pieces.items():
            dim = labels.index(name)
            self._split_into(dim, sizes)
            parts = ("outer", "l2", "prim") if len(sizes) == 3 else ("outer", "prim")
            labels[dim : dim + 1] = [f"{name}_{part}" for part in parts]
        self._permute_to_layout(labels)

    def _split_into(self, dim: int, sizes: list[int]) -> None:
        """Split `dim` into len(sizes) dimensions of the given sizes, outermost first."""
        for i in range(len(sizes) - 1):
            self.split_dim(dim + i, sizes[i], math.prod(sizes[i + 1 :]))

    def _permute_to_layout(self, labels: list[str | None]) -> None:
        """Permute to the module docstring's layout and set the exec types (PAR | SEQ | PRIM)."""
        types = self.config.dim_types
        others = [d for d, label in enumerate(labels) if label is None]
        par = [d for t in (DimType.C, DimType.M, DimType.N) for d in others if types[d] is t]
        par += [labels.index(r) for r in ("m_outer", "n_outer", "m_l2", "n_l2")]
        seq = [d for d in others if types[d] is DimType.K] + [labels.index("k_outer")]
        prim = [labels.index(r) for r in ("m_prim", "n_prim", "k_prim")]
        self.permute_dims(par + seq + prim)
        self.config.exec_types = [ExecType.PAR] * len(par) + [ExecType.SEQ] * len(seq) + [ExecType.PRIM] * len(prim)

    def _grid_lines(self, target: TargetModel) -> list[str]:
        par = [s for s, e in zip(self.config.dim_sizes, self.config.exec_types) if e is ExecType.PAR]
        blocks = math.prod(par)
        line = f"grid: {blocks} blocks (product of the PAR sizes) on {target.num_sms} SMs = {blocks / target.num_sms:.2f} waves"
        if blocks < target.num_sms:
            line += "; fewer blocks than SMs, so part of the GPU idles (the problem is too small for these tiles)"
        return [line]


def choose_prim_tile(sizes: dict[DimType, int], target: TargetModel, in_bytes: int) -> tuple[int, int, int, list[str]]:
    """The PRIM tile (m_prim, n_prim, k_prim) and its explanation (seed Task 4b, "prim sizes").

    Maximises the tile's multiply-adds `m*n*k` subject to `prim_tile_bytes <= smem_per_block`,
    over tile extents that divide the dimension sizes (powers of two if the target says so);
    ties go to the squarer m x n tile, then to the larger k.  The seed's continuous optimum
    with m = n, `m = sqrt(smem / (3 * acc_bytes))` (= sqrt(smem/12) for FP32 accumulators),
    is reported for comparison.

    Args:
        sizes: the extent of the chosen M, N and K dimension (elements).
        target: the machine model; in_bytes: bytes per input element.

    Raises:
        ValueError: not even a 1 x 1 x 1 tile fits in `smem_per_block`.
    """
    smem, acc = target.smem_per_block, target.acc_bytes
    best: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None
    ks = tile_candidates(sizes[DimType.K], target.power_of_two_tiles)
    for m in tile_candidates(sizes[DimType.M], target.power_of_two_tiles):
        for n in tile_candidates(sizes[DimType.N], target.power_of_two_tiles):
            k = _largest_fitting_k(m, n, ks, smem, in_bytes, acc)
            if k is None:
                continue
            score = (m * n * k, -abs(m - n), k)
            if best is None or score > best[0]:
                best = (score, (m, n, k))
    if best is None:
        raise ValueError(f"make_executable: shared memory per block ({smem} bytes) cannot hold even a 1x1x1 PRIM tile")
    m, n, k = best[1]
    return m, n, k, _prim_lines(m, n, k, sizes, target, in_bytes)


def _largest_fitting_k(m: int, n: int, ks: list[int], smem: int, in_bytes: int, acc: int) -> int | None:
    fitting = [k for k in ks if prim_tile_bytes(m, n, k, in_bytes, acc) <= smem]
    return fitting[-1] if fitting else None


def _prim_lines(m: int, n: int, k: int, sizes: dict[DimType, int], target: TargetModel, in_bytes: int) -> list[str]:
    smem, acc = target.smem_per_block, target.acc_bytes
    m_star = math.sqrt(smem / (3 * acc))
    k_star = (smem - acc * m_star**2) / (2 * in_bytes * m_star)
    used = prim_tile_bytes(m, n, k, in_bytes, acc)
    lines = [
        f"PRIM tile: maximise m*n*k subject to {in_bytes}*(m*k + k*n) + {acc}*m*n <= {smem} bytes of shared memory "
        f"per block ({in_bytes}-byte inputs, {acc}-byte accumulators; seed 004 Task 4b)",
        f"  continuous optimum with m = n: m = sqrt(smem/(3*{acc})) = {m_star:.1f}, "
        f"k = (smem - {acc}*m^2)/(2*{in_bytes}*m) = {k_star:.1f}",
        f"  chosen m_prim = {m}, n_prim = {n}, k_prim = {k}: {used} bytes ({100 * used / smem:.0f}% of shared memory), "
        f"extents that divide M = {sizes[DimType.M]}, N = {sizes[DimType.N]}, K = {sizes[DimType.K]}"
        + (" and are powers of two (cuTile tiles must be)" if target.power_of_two_tiles else ""),
    ]
    for name, tile in (("M", m), ("N", n), ("K", k)):
        if tile < 16 and tile < sizes[DimType[name]]:
            lines.append(
                f"  warning: the {name} tile is only {tile} because no larger fitting divisor of "
                f"{sizes[DimType[name]]} exists; pad that dimension for a faster kernel"
            )
    return lines


def choose_l2_group(
    m_tiles: int, n_tiles: int, m_prim: int, n_prim: int, k_total: int, target: TargetModel, in_bytes: int
) -> tuple[int, int, list[str]]:
    """The L2 group (m_l2, n_l2): PRIM tiles per group along M and N, and its explanation
    (seed Task 4b, "L2 sizes").

    The blocks of one group share A panels (`m_prim x k_total`) along n and B panels
    (`k_total x n_prim`) along m; the group's panels must fit in L2:
    `m_l2 * m_prim * k_total * in + n_l2 * k_total * n_prim * in <= l2_bytes`.  Among the
    divisors of the tile counts that fit, the group with the most reuse
    `m_l2 * n_l2 / (m_l2 + n_l2)` (blocks per panel loaded) wins; ties: more blocks, then
    the larger m_l2.

    Args:
        m_tiles, n_tiles: PRIM tiles along M and N (sizes / prim extents).
        m_prim, n_prim: PRIM extents (elements); k_total: product of all K sizes.
        target: the machine model; in_bytes: bytes per input element.

    Raises:
        Nothing: when even one panel pair exceeds L2, the group is 1 x 1 (no L2 blocking).
    """
    a_panel, b_panel = m_prim * k_total * in_bytes, n_prim * k_total * in_bytes
    best = (1, 1)
    for m_l2 in _divisors(m_tiles):
        for n_l2 in _divisors(n_tiles):
            if m_l2 * a_panel + n_l2 * b_panel <= target.l2_bytes and _reuse_key(m_l2, n_l2) > _reuse_key(*best):
                best = (m_l2, n_l2)
    m_l2, n_l2 = best
    return m_l2, n_l2, _l2_lines(m_l2, n_l2, m_tiles, n_tiles, a_panel, b_panel, target)


def _reuse_key(m_l2: int, n_l2: int) -> tuple[float, int, int]:
    return (m_l2 * n_l2 / (m_l2 + n_l2), m_l2 * n_l2, m_l2)


def _l2_lines(
    m_l2: int, n_l2: int, m_tiles: int, n_tiles: int, a_panel: int, b_panel: int, target: TargetModel
) -> list[str]:
    used = m_l2 * a_panel + n_l2 * b_panel
    group = m_l2 * n_l2
    lines = [
        f"L2 group: one block per PRIM tile reads an A panel of {a_panel} bytes and a B panel of {b_panel} bytes "
        f"(all of K); a group of m_l2 x n_l2 blocks reads m_l2 A panels and n_l2 B panels (seed 004 Task 4b)",
        f"  chosen m_l2 = {m_l2}, n_l2 = {n_l2} (of {m_tiles} x {n_tiles} tiles): {m_l2} + {n_l2} panels = "
        f"{used / MIB:.1f} MiB <= L2 {target.l2_bytes / MIB:.0f} MiB; each panel serves {group / (m_l2 + n_l2):.1f} "
        f"blocks on average (1x1 grouping: 0.5)",
        f"  the group's {group} blocks run in consecutive block order (m_l2, n_l2 are the innermost PAR dims): "
        f"{group / target.num_sms:.2f} waves of {target.num_sms} SMs",
    ]
    if (m_l2, n_l2) == (1, 1) and a_panel + b_panel > target.l2_bytes:
        lines.append("  warning: a single A and B panel pair exceeds L2, so no L2 blocking is possible")
    return lines
