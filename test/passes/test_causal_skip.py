"""Causal flash kernels walk only the key tiles up to their diagonal (`cute-causal-skip`,
issue #30): the bounds it writes cover exactly the key tiles with a kept element and mask
only the diagonal ones (checked by brute force over every block), ragged cases (q != k, a
diagonal off the tile grid, query blocks of another height than the key tiles, the
heavy-first block order) in the host emulator and on the GPU against the float64 reference
(seeded inputs, NaN-poisoned outputs; bench.fuzz_check)."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.bench.fuzz_check import Outcome, run_emulated
from mirage_xdsl.bench.fuzz_graphs import FuzzCase
from mirage_xdsl.bench.suite import graphs
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.causal_skip import CAUSAL_TRIPS, HEAVY_FIRST, MASK_FROM, heavy_first_block, read_bound
from mirage_xdsl.frontends.builder import new_kernel_graph
from mirage_xdsl.runtime.host_emulator import find_cxx

needs_cxx = pytest.mark.skipif(find_cxx() is None, reason="the host emulator needs a C++ compiler")
CHAIN = re.compile(r"mx::mma_chain_online_run<128, decltype\(f\d+\), decltype\(f\d+\), (\d+), (\d+), ")


def attention(dtype: str, q: int, k: int, d: int, heads: int = 1, offset: int | None = None) -> ModuleOp:
    """Causal attention with q queries and k keys per head (`offset` default k - q, bottom-right)."""
    g = new_kernel_graph("p")
    Q = g.new_input((heads, q, d), dtype=dtype, name="Q")
    K = g.new_input((heads, d, k), strides=(k * d, 1, d), dtype=dtype, name="K")
    V = g.new_input((heads, k, d), dtype=dtype, name="V")
    s = g.causal_mask(g.mul_scalar(g.matmul(Q, K), 1.0 / math.sqrt(d)), offset)
    m = g.reduction_max(s, 2)
    e = g.exp(g.sub(s, m))
    g.mark_output(g.div(g.matmul(e, V), g.reduction(e, 2)))
    return g.module


def lowered(module: ModuleOp, num_sms: int | None, candidate: int = 0, heavy_sms: int | None = None) -> ModuleOp:
    """`module` (a clone) through kn-fuse (planned for `num_sms` SMs; None = the default
    device) and mirage-transpile; `heavy_sms`: cute-causal-skip again for a device of that
    many SMs (small grids get the heavy-first block order too)."""
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.conversion.kn_fuse import KnFusePass
    from mirage_xdsl.passes.cute.causal_skip import CausalSkipPass
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    low = module.clone()
    # the generated (mma.sync) flash chain, not the sm_90a kernel (test_hopper_attention.py)
    sms = {} if num_sms is None else {"num_sms": num_sms}
    fuse = KnFusePass(candidate=candidate, hopper_attention=False, **sms)  # type: ignore[arg-type]
    fuse.apply(make_context(), low)
    MirageTranspilePass(fuse=False).apply(make_context(), low)
    if heavy_sms is not None:
        CausalSkipPass(num_sms=heavy_sms).apply(make_context(), low)
    return low


def _kernel(module: ModuleOp) -> cute.KernelOp:
    (kernel,) = [op for op in module.walk() if isinstance(op, cute.KernelOp)]
    return kernel


def check_bounds(module: ModuleOp, q: int, k: int, offset: int) -> int:
    """Brute force over every block of the one flash kernel of `module`: `cute.causal_trips`
    is one past the last key tile with a kept element, `cute.mask_from` the count of leading
    tiles whose elements are all kept (reading the rows each block owns from the mask's row
    origin, heavy-first order included).  Returns the key tiles walked over all blocks."""
    kernel = _kernel(module)
    (loop,) = [op for op in kernel.body.block.ops if isinstance(op, cute.ForOp)]
    (chain,) = [op for op in loop.walk() if isinstance(op, cute.MmaChainOp)]
    trips, start = read_bound(loop, CAUSAL_TRIPS), read_bound(chain, MASK_FROM)
    assert trips is not None and start is not None and chain.mask is not None
    _, rows, _ = chain.mask
    bm, bk = chain.sum.type.get_shape()  # type: ignore[attr-defined]
    heavy = kernel.attributes.get(HEAVY_FIRST)
    walked = 0
    cols = np.arange(k)
    for block in np.ndindex(*kernel.grid):
        b = list(block)
        if heavy is not None:
            a = heavy.value.data  # type: ignore[attr-defined]
            b[a] = heavy_first_block(b[a], kernel.grid[a])
        row0 = sum(c * x for c, x in zip(rows[:3], b)) % q  # rows of one head (heads ride on another axis)
        keep = cols[None, :] <= np.arange(row0, row0 + bm)[:, None] + offset
        tiles = keep.reshape(bm, k // bk, bk)
        any_kept, all_kept = tiles.any(axis=(0, 2)), tiles.all(axis=(0, 2))
        n = min(loop.trip_count, trips.ceil(b))
        assert n == int(np.nonzero(any_kept)[0].max()) + 1 and any_kept[:n].all(), (block, n)
        unmasked = min(n, start.floor(b))
        assert unmasked == int(all_kept.argmin()) if not all_kept.all() else unmasked == n, (block, unmasked)
        walked += n
    return walked


@pytest.mark.parametrize("seq", [1024, 4096])
def test_suite_bounds_skip_the_masked_half(seq: int) -> None:
    """The suite's causal prefills: every block walks exactly its tiles up to the diagonal,
    about half of all tiles; the 4096-token grid (256 blocks > 132 SMs) walks its query
    blocks heaviest first."""
    module = graphs.prefill_attention_causal("float16", "p", heads=8, seq=seq, head_dim=128)
    low = lowered(module, None)
    kernel = _kernel(low)
    walked = check_bounds(low, seq, seq, 0)
    total = math.prod(kernel.grid) * kernel.iterations
    assert walked < 0.6 * total
    assert (HEAVY_FIRST in kernel.attributes) == (math.prod(kernel.grid) > 132)


def test_non_causal_and_shared_tile_masks_are_left_alone() -> None:
    """No causal mask, or a mask on a shared tile (cute.causal_mask in a plan whose loop does
    more than the chain): no bound, every key tile walked."""
    plain = lowered(graphs.prefill_attention("float16", "p", heads=1, seq=256, head_dim=128), 2)
    shared = lowered(graphs.prefill_attention_causal("float16", "p", heads=1, seq=512, head_dim=128), None, candidate=1)
    for module in (plain, shared):
        assert not any(CAUSAL_TRIPS in op.attributes or MASK_FROM in op.attributes for op in module.walk())


# (q, k, head_dim, heads, offset, num_sms, candidate) -> the chain's (query rows, keys per tile)
RAGGED = {
    (128, 320, 64, 1, None, 2, 0): (64, 64),  # q < k: offset 192, the first block walks 4 of 5 tiles
    (192, 256, 64, 2, None, 2, 0): (64, 64),  # offset 64, three query blocks per head
    (256, 256, 128, 2, 5, 4, 4): (128, 32),  # a diagonal off the tile grid; 128-row blocks over 32-key tiles
    (256, 256, 128, 1, 37, 2, 0): (64, 64),  # a diagonal off the tile grid, square tiles
    (192, 192, 64, 2, 0, 2, 1): (64, 64),  # another plan rank
}


def _ids(key: tuple[Any, ...]) -> str:
    q, k, d, heads, offset, _, _ = key
    return f"q{q}_k{k}_d{d}_h{heads}_o{k - q if offset is None else offset}"


@pytest.mark.parametrize("heavy", [False, True])
@pytest.mark.parametrize("key", list(RAGGED), ids=_ids)
def test_ragged_bounds(key: tuple[Any, ...], heavy: bool) -> None:
    q, k, d, heads, offset, sms, cand = key
    low = lowered(attention("float16", q, k, d, heads, offset), sms, cand, heavy_sms=1 if heavy else None)
    assert (HEAVY_FIRST in _kernel(low).attributes) == heavy
    check_bounds(low, q, k, k - q if offset is None else offset)


@needs_cxx
@pytest.mark.parametrize(("key", "dtype", "heavy"), [(key, "float16", i % 2 == 1) for i, key in enumerate(RAGGED)]
                         + [(next(iter(RAGGED)), "bfloat16", True)], ids=lambda v: _ids(v) if isinstance(v, tuple) else str(v))
def test_ragged_in_the_emulator(key: tuple[Any, ...], dtype: str, heavy: bool) -> None:
    """The printed kernels (runtime trip count, guarded ring prologue, unmasked tiles below the
    diagonal, heavy-first block order) equal the reference in the host emulator."""
    from mirage_xdsl.codegen.cuda_target import emit_cuda

    q, k, d, heads, offset, sms, cand = key
    module = attention(dtype, q, k, d, heads, offset)
    prog = emit_cuda(lowered(module, sms, cand, heavy_sms=1 if heavy else None))
    assert [tuple(int(x) for x in f) for f in CHAIN.findall(prog.source)] == [RAGGED[key]] * 2
    assert "it < cs_trips" in prog.source and "if (it < cs_unmasked0)" in prog.source
    assert ("cute.heavy_first" in prog.source) == heavy
    out = run_emulated(Outcome("p", "ok", dtype=dtype, kind="kernel"), FuzzCase("p", "kernel", dtype, module), prog, 7, None)
    assert out.status == "ok", f"{out.reason}: {out.message}"


# GPU: (q, k, head_dim, heads, offset, dtype); the default plan is the flash chain at these sizes
GPU_CASES = [(1024, 1536, 128, 8, None, "float16"), (2048, 2048, 128, 8, 37, "float16"), (2048, 2048, 128, 8, 37, "bfloat16")]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: f"q{c[0]}_k{c[1]}_o{c[4]}_{c[5]}")
def test_ragged_on_the_gpu(case: tuple[Any, ...]) -> None:
    """q != k and a diagonal off the tile grid (with the heavy-first block order: 256 blocks)
    through the default pipeline on the GPU."""
    from mirage_xdsl.bench.fuzz_check import check_gpu

    q, k, d, heads, offset, dtype = case
    module = attention(dtype, q, k, d, heads, offset)
    check_bounds(lowered(module, None), q, k, k - q if offset is None else offset)
    out = check_gpu(FuzzCase("p", "kernel", dtype, module), seed=5)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@pytest.mark.parametrize("extent", [1, 2, 5, 16, 31, 32])
def test_heavy_first_order_is_a_permutation(extent: int) -> None:
    """The heavier half descending, then the lighter half ascending: every query block once."""
    order = [heavy_first_block(b, extent) for b in range(extent)]
    assert sorted(order) == list(range(extent)) and order[0] == extent - 1
    h = (extent + 1) // 2
    assert order[:h] == sorted(order[:h], reverse=True) and order[h:] == sorted(order[h:])
