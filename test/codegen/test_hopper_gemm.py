"""The sm_90a contraction path: gemm_view, convert-contraction-to-hopper, the printer, the
tensor maps, and (GPU) mx.einsum against the numpy reference executor on NaN-poisoned outputs."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from xdsl.dialects.builtin import BoolAttr, IntegerAttr, i64
from xdsl.utils.exceptions import PassFailedException, VerifyException

from mirage_xdsl.codegen.launch_plan import LaunchPlan
from mirage_xdsl.dialects.contraction.config import generate_config
from mirage_xdsl.dialects.cute.hopper_gemm import HopperGemmOp
from mirage_xdsl.driver.compile import make_context, prepare
from mirage_xdsl.frontends.einsum import einsum_module
from mirage_xdsl.passes.contraction.gemm_view import gemm_view
from mirage_xdsl.passes.contraction.to_hopper import ConvertContractionToHopperPass
from mirage_xdsl.reference.executor import run_function
from mirage_xdsl.runtime.tensor_map import TensorMapError, check_tiled

BMM = ("cmk,ckn->cmn", [(4, 4096, 4096), (4, 4096, 4096)])


def lowered(equation: str, shapes: list[tuple[int, ...]], dtype: str = "float16", **options: int) -> HopperGemmOp:
    module = einsum_module(equation, shapes, dtype)
    ConvertContractionToHopperPass(**options).apply(make_context(), module)
    module.verify()
    (op,) = [o for o in module.walk() if isinstance(o, HopperGemmOp)]
    return op


def test_gemm_view_of_the_issue_contractions() -> None:
    v = gemm_view(generate_config(*BMM))
    assert (v.m, v.n, v.k, v.batch, v.trans_b) == (4096, 4096, 4096, 4, True)
    v = gemm_view(generate_config("abcd,cde->abe", [(8, 256, 64, 64), (64, 64, 1024)]))
    assert (v.m, v.n, v.k, v.batch) == (2048, 1024, 4096, 1)  # a,b and c,d fuse
    v = gemm_view(generate_config("bhqd,bkhd->bhqk", [(8, 32, 1024, 128), (8, 1024, 32, 128)]))
    assert (v.batch_outer, v.batch_inner, v.trans_b) == (8, 32, False)  # b, h do not fuse in B
    assert v.b_strides == (1, 4096, 128, 4194304)


def test_gemm_view_rejects_unfusable_m_dims() -> None:
    with pytest.raises(ValueError, match="exactly one M dimension"):
        gemm_view(generate_config("aebf,dfce->abcd", [(64,) * 4, (64,) * 4]))
    with pytest.raises(ValueError, match="A must be contiguous along K"):
        gemm_view(generate_config("km,kn->mn", [(64, 64), (64, 64)]))


def test_pass_decides_the_schedule() -> None:
    op = lowered(*BMM)
    assert op.ints("tile") == [128, 256, 64] and not op.is_pingpong  # 64 k-tiles: cooperative
    assert op.epilogue.data == "tma_store"
    assert op.stages.value.data == 3  # 3 x 48 KiB stages + 64 KiB of staging fit 227 KiB, 4 do not
    assert op.grid.value.data == 132
    assert op.group_m.value.data == 16  # 16 A panels + 9 B panels: the fewest bytes per wave
    op = lowered(*BMM, group_m=1, stages=3, tile_n=128, epilogue="store16")
    assert (op.group_m.value.data, op.stages.value.data, op.ints("tile")) == (1, 3, [128, 128, 64])
    assert lowered(*BMM, epilogue="store16").stages.value.data == 4
    assert lowered("abcd,cde->abe", [(8, 256, 64, 64), (64, 64, 1024)]).ints("tile") == [128, 128, 64]  # fills 128 SMs
    assert lowered("mk,nk->mn", [(64, 96), (36, 96)]).epilogue.data == "store4"  # n not a multiple of 8
    small = lowered("mk,kn->mn", [(64, 96), (96, 72)])
    assert small.ints("tile") == [64, 64, 64] and small.consumers.value.data == 1
    # 192-wide tiles on request only; the 128-row MLP projection keeps 128 x 128 by default
    mlp = ("mk,kn->mn", [(128, 4096), (4096, 12288)])
    assert lowered(*mlp).ints("tile") == [128, 128, 64]
    assert lowered(*mlp, tile_n=192).ints("tile") == [128, 192, 64]
    # skinny GEMMs stream their weights through rings of up to SKINNY_MAX_STAGES (8) stages: the
    # down projection's 24 KiB stages take 8, the first projection's 32 KiB stages fill the
    # shared memory at 6 (beside its 32 KiB staging tile)
    down = lowered("mk,kn->mn", [(128, 12288), (12288, 4096)])
    assert down.ints("tile") == [128, 64, 64] and down.splits == 2 and down.stages.value.data == 8
    assert lowered(*mlp).stages.value.data == 6
    assert lowered(*mlp, pingpong=1).stages.value.data == 6  # not the skinny plan: MAX_STAGES


def test_cluster_pairs_share_b() -> None:
    op = lowered(*BMM, cluster=2)
    assert op.cluster.value.data == 2 and op.grid.value.data == 132 and op.group_m.value.data % 2 == 0
    module = einsum_module("mk,nk->mn", [(256, 128), (512, 128)])
    ConvertContractionToHopperPass(cluster=2, tile_n=256).apply(make_context(), module)
    prepared = prepare(module, arch="sm_90a")
    assert "__cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)" in prepared.program.source
    (step,) = prepared.plan.steps
    assert step.tensor_maps[1].box == (64, 128, 1, 1)  # K-major B: each CTA loads half of BN = 256 rows
    with pytest.raises(PassFailedException, match="cluster=2 needs an even m-tile count"):
        lowered("mk,kn->mn", [(384, 64), (64, 256)], cluster=2)


def test_cluster_pairs_share_a() -> None:
    """`share_a=1`: the pair takes neighbouring n-blocks of one m-block; each CTA loads half of
    the A rows (the A map's box) and multicasts them; B is loaded whole by each."""
    module = einsum_module("cmk,cnk->cmn", [(8, 1024, 1024), (8, 1024, 1024)])
    ConvertContractionToHopperPass(cluster=2, share_a=1, tile_m=256, tile_n=128).apply(make_context(), module)
    op = next(o for o in module.walk() if isinstance(o, HopperGemmOp))
    assert op.shares_a and "share_a = true" in str(op)
    prepared = prepare(module, arch="sm_90a")
    assert "mx::hopper::NoActivation, 1, 0, 0, 2, 1>(&a, &b, &cm, c," in prepared.program.source
    (step,) = prepared.plan.steps
    assert step.tensor_maps[0].box == (64, 128, 1, 1) and step.tensor_maps[1].box == (64, 128, 1, 1)
    with pytest.raises(PassFailedException, match="share-a=1 needs cluster=2 and an even n-tile count"):
        lowered("mk,kn->mn", [(512, 64), (64, 384)], cluster=2, share_a=1, tile_n=128)
    op.properties["cluster"] = IntegerAttr(1, i64)
    with pytest.raises(VerifyException, match="share_a needs cluster = 2 and an even n-block count"):
        op.verify()


def test_pingpong_schedule() -> None:
    """pingpong=1: 128 x 128 tiles (a wider BN choice becomes 128), a whole 128 x 128 staging
    tile per consumer (5 ring stages of 32 KiB fit beside 64 KiB of staging), the header's
    PINGPONG argument printed; the verifier and the pass name what the schedule needs."""

    from mirage_xdsl.codegen.hopper_gemm import smem_bytes

    op = lowered(*BMM, pingpong=1, epilogue="tma_store")
    assert op.is_pingpong and op.ints("tile") == [128, 128, 64] and op.stages.value.data == 5
    assert smem_bytes(op) == 5 * 256 * 64 * 2 + 2 * 128 * 128 * 2 + 2 * 5 * 8 + 16 + 16 + 16 + 1024
    # decided (`wants_pingpong`): more 128 x 128 tiles than SMs, each of 16-32 k-tiles; the
    # stores go straight from the registers (16 bytes), so a sixth ring stage fits
    bmm_nt = lowered("cmk,cnk->cmn", [(8, 1024, 1024), (8, 1024, 1024)])
    assert bmm_nt.is_pingpong and bmm_nt.epilogue.data == "store16" and bmm_nt.stages.value.data == 6
    assert lowered("mk,kn->mn", [(2048, 2048), (2048, 2048)]).is_pingpong  # 256 tiles of 32 k-tiles
    assert not lowered("cmk,cnk->cmn", [(8, 1024, 1024), (8, 1024, 1024)], pingpong=0).is_pingpong
    assert not lowered(*BMM).is_pingpong  # 64 k-tiles
    assert not lowered("abcd,cde->abe", [(8, 256, 64, 64), (64, 64, 1024)]).is_pingpong  # 128 tiles
    assert not lowered("mk,kn->mn", [(1024, 1024), (1024, 1024)]).is_pingpong  # 64 tiles
    assert not lowered("bhqd,bkhd->bhqk", [(8, 32, 1024, 128), (8, 1024, 32, 128)]).is_pingpong  # 2 k-tiles
    assert not lowered("mk,kn->mn", [(128, 4096), (4096, 12288)]).is_pingpong  # skinny: weight streaming
    module = einsum_module(*BMM)
    ConvertContractionToHopperPass(pingpong=1, epilogue="tma_store").apply(make_context(), module)
    src = prepare(module, arch="sm_90a").program.source
    assert "gemm_ws<half, 128, 5, 2, 1, 2, 1, 0, mx::hopper::NoActivation, 1, 1>(&a, &b, &cm, c," in src
    with pytest.raises(PassFailedException, match="pingpong=1 needs m > 64"):
        lowered("mk,kn->mn", [(64, 96), (96, 72)], pingpong=1)
    pair = lowered(*BMM, pingpong=1, cluster=2)  # ping-pong in CTA pairs sharing B
    assert pair.is_pingpong and pair.cluster.value.data == 2 and not pair.shares_a and pair.group_m.value.data % 2 == 0
    with pytest.raises(PassFailedException, match="tile-n <= 128"):
        lowered(*BMM, pingpong=1, tile_n=256)
    op = lowered(*BMM, tile_n=256)
    op.pingpong = BoolAttr.from_bool(True)
    with pytest.raises(VerifyException, match="pingpong needs consumers = 2, no split_k and a tile N of at most 128"):
        op.verify()


def test_tile_m_option() -> None:
    """`tile-m`: 256-row cooperative tiles (two m64 slabs per consumer, BN capped at 128) and
    64-row tiles of one consumer on request; the rules the header needs are checked by the
    pass and by the op's verifier."""
    tall = lowered("cmk,cnk->cmn", [(8, 1024, 1024), (8, 1024, 1024)], tile_m=256)
    assert tall.ints("tile") == [256, 128, 64] and tall.consumers.value.data == 2 and tall.m_slabs == 2
    assert not tall.is_pingpong and tall.stages.value.data == 3  # 48 KiB stages beside 64 KiB of staging
    source = prepare(tall.parent_op().parent_op(), arch="sm_90").program.source  # type: ignore[union-attr]
    assert "gemm_ws<half, 128, 3, 2, 0, 2, 1, 0, mx::hopper::NoActivation, 1, 0, 0, 2>" in source
    pair = lowered("mk,kn->mn", [(128, 4096), (4096, 12288)], tile_m=64, tile_n=192, cluster=2)
    assert pair.ints("tile") == [64, 192, 64] and pair.consumers.value.data == 1 and pair.grid.value.data == 128
    assert pair.m_slabs == 1
    with pytest.raises(PassFailedException, match="tile-m=256 needs tile-n <= 128"):
        lowered(*BMM, tile_m=256, tile_n=256)
    with pytest.raises(PassFailedException, match="tile-m=256 needs .* the cooperative schedule"):
        lowered(*BMM, tile_m=256, pingpong=1)
    with pytest.raises(PassFailedException, match="tile-m=96 must be 64, 128 or 256"):
        lowered(*BMM, tile_m=96)
    op = lowered(*BMM, tile_n=256)
    op.tile = tall.tile  # [256, 128, 64]
    op.split_k = IntegerAttr(2, i64)
    op.scratch_offset = IntegerAttr(0, i64)
    with pytest.raises(VerifyException, match="128 rows per consumer .* without split_k"):
        op.verify()


def test_stream_k_on_request() -> None:
    """`stream-k=1`: one equal range of the 96 x 64 k-iterations per SM (grid 132), 3 partial
    slabs per tile (a tile meets at most ceil(64 / 46) + 1 ranges), the workspace and counters
    claimed like split-K's; never by default (measured slower, to_hopper's docstring)."""
    from mirage_xdsl.dialects.cute.hopper_gemm import stream_slabs

    mlp_up = ("mk,kn->mn", [(128, 4096), (4096, 12288)])
    assert lowered(*mlp_up).stream_slots == 0
    op = lowered(*mlp_up, stream_k=1)
    assert (op.grid.value.data, op.stream_slots, op.splits, op.ints("tile")) == (132, 3, 1, [128, 128, 64])
    assert op.scratch_bytes() == 3 * 96 * 128 * 128 * 4 and op.counter_words() == 96 * 2
    assert stream_slabs(96, 64, 132) == 3 and stream_slabs(8, 16, 128) == 17 and stream_slabs(1, 4, 8) == 0
    module = einsum_module(*mlp_up)
    ConvertContractionToHopperPass(stream_k=1).apply(make_context(), module)
    program = prepare(module, arch="sm_90a").program
    assert "gemm_ws<half, 128, 6, 2, 1, 2, 1, 0, mx::hopper::NoActivation, 1, 0, 3>(&a, &b, &cm, c," in program.source
    (plan,) = program.plans.values()
    assert plan.workspace_bytes >= op.scratch_bytes() and plan.counters == 96 * 2
    op.stream_k = IntegerAttr(2, i64)
    with pytest.raises(VerifyException, match="stream_k = 2 partial slabs per tile, but 132 blocks over 96 tiles share a tile among up to 3"):
        op.verify()
    with pytest.raises(PassFailedException, match="stream-k=1 needs no ping-pong, cluster=1 and no split-k"):
        lowered(*mlp_up, stream_k=1, split_k=2)


def test_pass_errors_name_the_op_and_the_rule() -> None:
    with pytest.raises(PassFailedException, match="convert-contraction-to-hopper: contraction.contract: sm_90 GEMM"):
        lowered("aebf,dfce->abcd", [(64,) * 4, (64,) * 4])
    with pytest.raises(PassFailedException, match="stages=9 must be in 2..3"):
        lowered(*BMM, stages=9)
    with pytest.raises(PassFailedException, match="store16/tma_store need n"):
        lowered("mk,nk->mn", [(64, 96), (36, 96)], epilogue="tma_store")
    with pytest.raises(PassFailedException, match="not multiples of 16 bytes"):
        lowered("mk,kn->mn", [(64, 96), (96, 36)])


def test_printer_and_plan() -> None:
    module = einsum_module(*BMM)
    ConvertContractionToHopperPass().apply(make_context(), module)
    prepared = prepare(module, arch="sm_90a")
    src = prepared.program.source
    assert "mx::hopper::gemm_ws<half, 256, 3, 2, 1, 2, 1>(&a, &b, &cm, c," in src
    assert "GemmShape{4096, 4096, 4096, 4, 4, 4096LL, 16777216LL, 0LL, 16}" in src
    (step,) = prepared.plan.steps
    assert step.grid == (132, 1, 1) and step.block == (384, 1, 1)
    ta, tb, tc = step.tensor_maps
    assert ta.dims == (4096, 4096, 4, 1) and ta.box == (64, 128, 1, 1)
    assert tb.dims == (4096, 4096, 4, 1) and tb.box == (64, 64, 1, 1)
    assert tc.dims == (4096, 4096, 4, 1) and tc.box == (64, 64, 1, 1) and tc.ref.kind == "output"
    assert LaunchPlan.from_json(prepared.plan.to_json()) == prepared.plan


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_generated_kernel_compiles(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from mirage_xdsl.driver.nvcc import compile_cuda

    cases = (
        (*BMM, "float16", 0),
        ("bhqd,bkhd->bhqk", [(2, 4, 192, 64), (2, 320, 4, 64)], "bfloat16", 0),
        ("mk,kn->mn", [(128, 512), (512, 1536)], "float16", 192),  # wgmma m64n192k16
    )
    for eq, shapes, dtype, tile_n in cases:
        module = einsum_module(eq, shapes, dtype)
        ConvertContractionToHopperPass(tile_n=tile_n).apply(make_context(), module)
        src = prepare(module, arch="sm_90a").program.source
        assert not tile_n or f"gemm_ws<half, {tile_n}," in src
        assert compile_cuda(src, "sm_90a", cache_dir=tmp_path).is_file()


def test_tensor_map_rules() -> None:
    check_tiled("float16", [64, 64], [128], [64, 64], 128)
    with pytest.raises(TensorMapError, match="multiple of 16"):
        check_tiled("float16", [100, 64], [200], [64, 64], 128)
    with pytest.raises(TensorMapError, match="inner box extent"):
        check_tiled("float32", [64, 64], [256], [64, 64], 128)


def test_launches_reuse_encoded_tensor_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    """`launch_with_tensor_maps` encodes a map once per (address, layout): a second launch on the
    same buffers reuses it, a buffer at another address gets its own (no driver needed: the
    encoder and the launch are stubbed)."""
    from mirage_xdsl.codegen.launch_plan import KernelLaunch, TensorMapSpec, TensorRef
    from mirage_xdsl.runtime import tensor_map

    calls: list[int] = []

    def fake_encode(address: int, *rest: object) -> bytes:
        calls.append(address)
        return address.to_bytes(8, "little") * 16

    launched: list[bytes] = []
    monkeypatch.setattr(tensor_map, "encode_tiled", fake_encode)
    monkeypatch.setattr(tensor_map, "launch", lambda fn, grid, block, smem, stream, params: launched.append(bytes(params[0])))
    tensor_map.encoded_map.cache_clear()
    spec = TensorMapSpec(TensorRef("input", 0, 0), "float16", (64, 64, 1, 1), (128, 8192, 8192), (64, 64, 1, 1))
    step = KernelLaunch("k", (1, 1, 1), (128, 1, 1), 0, (), tensor_maps=(spec,))

    class Stream:
        ptr = 0

    class Cupy:
        class cuda:  # noqa: N801 - mimics the CuPy module layout
            @staticmethod
            def get_current_stream() -> Stream:
                return Stream()

    kernel = type("Kernel", (), {"ptr": 1})()
    for address in (4096, 4096, 8192):
        tensor_map.launch_with_tensor_maps(kernel, step, {"input": [address]}, [], 0, Cupy)
    assert calls == [4096, 8192]
    assert launched == [(4096).to_bytes(8, "little") * 16] * 2 + [(8192).to_bytes(8, "little") * 16]
    tensor_map.encoded_map.cache_clear()


def test_reference_runs_contractions() -> None:
    rng = np.random.default_rng(0)
    for eq, shapes in (("bhqd,bkhd->bhqk", [(2, 3, 5, 8), (2, 4, 3, 8)]), ("aebf,dfce->abcd", [(2, 3, 4, 5), (6, 5, 7, 3)])):
        module = einsum_module(eq, shapes)
        a, b = rng.random(shapes[0]), rng.random(shapes[1])
        (out,) = run_function(module.body.block.first_op, [a, b])
        np.testing.assert_allclose(out, np.einsum(eq, a, b), rtol=1e-12)


GPU_CASES = [
    ("cmk,ckn->cmn", [(2, 200, 104), (2, 104, 136)], "float16"),  # tails in m, n and k
    ("mk,nk->mn", [(136, 72), (100, 72)], "float16"),  # n = 100: store4 only
    ("cmk,ckn->cmn", [(3, 256, 512), (3, 512, 512)], "bfloat16"),
    ("mk,nk->mn", [(192, 320), (136, 320)], "float16"),  # K-major B
    ("bhqd,bkhd->bhqk", [(2, 4, 192, 64), (2, 320, 4, 64)], "float16"),  # two batch dims
    ("abcd,cde->abe", [(2, 64, 8, 16), (8, 16, 256)], "float16"),
    ("mk,kn->mn", [(48, 64), (64, 40)], "float16"),  # one consumer, BN 64
]


PINGPONG_CASES = [
    ("cmk,ckn->cmn", [(3, 1024, 256), (3, 256, 1000)], "float16"),  # 192 tiles: blocks of 1 and 2 tiles; n tail
    ("cmk,cnk->cmn", [(8, 512, 192), (8, 520, 192)], "bfloat16"),  # K-major B, 3 k-tiles, 160 tiles
    ("mk,kn->mn", [(4000, 136), (136, 1024)], "float16"),  # m and k tails, 256 tiles
]


STREAM_CASES = [
    ("mk,kn->mn", [(128, 1024), (1024, 1000)], "float16"),  # 8 tiles x 16 k-tiles on 128 blocks: a tile in 16 pieces; n tail
    ("cmk,ckn->cmn", [(2, 200, 1000), (2, 1000, 136)], "float16"),  # tails in m, n, k; 2 batches
    ("mk,nk->mn", [(192, 4096), (1000, 4096)], "bfloat16"),  # K-major B, 16 tiles x 64 k-tiles: 7-8 per block
    ("mk,kn->mn", [(128, 4096), (4096, 12288)], "float16"),  # an MLP's first projection: 96 tiles on 132 blocks
]


WIDE_CASES = [
    ("mk,kn->mn", [(200, 136), (136, 1000)], "float16"),  # tails in m, n and k; MN-major B: 3 boxes of 64
    ("mk,nk->mn", [(136, 320), (400, 320)], "bfloat16"),  # K-major B: one box of 192 rows
    ("cmk,ckn->cmn", [(2, 64, 256), (2, 256, 384)], "float16"),  # one consumer (m = 64), 2 batches
]


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", ["", "store16", "store4"])
@pytest.mark.parametrize(("equation", "shapes", "dtype"), WIDE_CASES)
def test_einsum_192_wide_tiles_match_reference(equation: str, shapes: list[tuple[int, ...]], dtype: str, epilogue: str) -> None:
    """`tile_n=192` (`wgmma m64n192k16`, on request only): tails, both B layouts (MN-major: three
    64-column boxes per stage), one and two consumers, every epilogue."""
    test_einsum_matches_reference(equation, shapes, dtype, epilogue, tile_n=192)


CLUSTER_CASES = [
    ("cmk,ckn->cmn", [(3, 200, 104), (3, 104, 264)], "float16"),  # tails in m, n, k; 3 batches
    ("mk,nk->mn", [(256, 192), (512, 192)], "bfloat16"),  # K-major B split between the pair
]


@pytest.mark.gpu
@pytest.mark.parametrize(("equation", "shapes", "dtype"), CLUSTER_CASES)
def test_einsum_cluster_matches_reference(equation: str, shapes: list[tuple[int, ...]], dtype: str) -> None:
    test_einsum_matches_reference(equation, shapes, dtype, "", cluster=2)


TALL_CASES = [
    ("cmk,ckn->cmn", [(3, 600, 200), (3, 200, 264)], "float16"),  # tails in m (a tile's second slab partly out), n, k
    ("cmk,cnk->cmn", [(8, 256, 192), (8, 136, 192)], "bfloat16"),  # K-major B, one m-block per batch
    ("mk,kn->mn", [(1100, 1024), (1024, 512)], "float16"),  # 20 tiles of 16 k-tiles, m tail in the first slab
]


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", ["", "store16", "store4"])
@pytest.mark.parametrize(("equation", "shapes", "dtype"), TALL_CASES)
def test_einsum_256_row_tiles_match_reference(equation: str, shapes: list[tuple[int, ...]], dtype: str, epilogue: str) -> None:
    """`tile_m=256`: cooperative 256 x 128 tiles, two m64 slabs per consumer; tails in m, n and
    k, both B layouts, every epilogue (the TMA store's four staging tiles)."""
    test_einsum_matches_reference(equation, shapes, dtype, epilogue, tile_m=256)


@pytest.mark.gpu
def test_einsum_256_row_tiles_in_cluster_pairs_match_reference() -> None:
    """`tile_m=256, cluster=2`: 256 x 128 tiles whose CTA pairs share the B tile; an m tail in
    the pair's second tile and an n tail."""
    test_einsum_matches_reference("cmk,ckn->cmn", [(2, 900, 200), (2, 200, 264)], "float16", "store16", cluster=2, tile_m=256)


PINGPONG_PAIR_CASES = [
    ("cmk,ckn->cmn", [(4, 1000, 200), (4, 200, 1064)], "float16", 0),  # pairs share B; tails in m, n, k; 288 tiles
    ("mk,nk->mn", [(3000, 320), (1000, 320)], "bfloat16", 1),  # pairs share A; K-major B, tails in m and n; 192 tiles
    ("cmk,cnk->cmn", [(2, 1024, 1024), (2, 1024, 1024)], "float16", 1),  # the suite's bmm_nt form, 128 tiles of 16 k-tiles
]


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", ["", "tma_store"])
@pytest.mark.parametrize(("equation", "shapes", "dtype", "share_a"), PINGPONG_PAIR_CASES)
def test_einsum_pingpong_cluster_pairs_match_reference(
    equation: str, shapes: list[tuple[int, ...]], dtype: str, share_a: int, epilogue: str
) -> None:
    """`pingpong=1, cluster=2`: ping-pong consumers in CTA pairs whose rings hold the same unit's
    k-tiles, sharing the B tile (neighbouring m-blocks) or the A tile (`share_a`, neighbouring
    n-blocks) by multicast."""
    test_einsum_matches_reference(equation, shapes, dtype, epilogue, cluster=2, pingpong=1, tile_n=128, share_a=share_a)


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", ["", "store16", "store4"])
def test_einsum_256_row_tiles_sharing_a_match_reference(epilogue: str) -> None:
    """`tile_m=256, cluster=2, share_a=1`: 256 x 128 tiles in pairs along n sharing the A tile
    (cuBLAS's 1 x 2 clusters), each CTA loading 128 of its rows; tails in m, n and k."""
    test_einsum_matches_reference("cmk,ckn->cmn", [(2, 900, 200), (2, 200, 504)], "float16", epilogue, cluster=2, tile_m=256, share_a=1)


PAIR_CASES = [
    ("mk,kn->mn", [(128, 512), (512, 1000)], "float16"),  # an MLP's 128 rows as a pair of 64-row tiles; n tail
    ("mk,kn->mn", [(100, 320), (320, 384)], "bfloat16"),  # m tail in the pair's second tile
    ("mk,nk->mn", [(128, 256), (200, 256)], "float16"),  # K-major B: the pair splits the BN rows
]


@pytest.mark.gpu
@pytest.mark.parametrize("tile_n", [64, 192])
@pytest.mark.parametrize(("equation", "shapes", "dtype"), PAIR_CASES)
def test_einsum_64_row_cluster_pairs_match_reference(equation: str, shapes: list[tuple[int, ...]], dtype: str, tile_n: int) -> None:
    """`tile_m=64, cluster=2`: CTA pairs of one consumer each (the two 64-row halves of a
    128-row GEMM) sharing each weight tile by TMA multicast."""
    test_einsum_matches_reference(equation, shapes, dtype, "", cluster=2, tile_n=tile_n, tile_m=64)


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", ["", "store16", "store4"])
@pytest.mark.parametrize(("equation", "shapes", "dtype"), PINGPONG_CASES)
def test_einsum_pingpong_matches_reference(equation: str, shapes: list[tuple[int, ...]], dtype: str, epilogue: str) -> None:
    """The ping-pong schedule: blocks whose tiles alternate between the two consumers (an odd
    count leaves consumer 1 a tile fewer), tails in m, n and k, both B layouts."""
    test_einsum_matches_reference(equation, shapes, dtype, epilogue, pingpong=1)


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", ["", "store16"])
@pytest.mark.parametrize(("equation", "shapes", "dtype"), STREAM_CASES)
def test_einsum_stream_k_matches_reference(equation: str, shapes: list[tuple[int, ...]], dtype: str, epilogue: str) -> None:
    """The stream-K sweep: every block's equal range of the tiles x k-tiles iterations, tiles
    finished by the last of the blocks sharing them (1 to 16 pieces), tails in m, n and k."""
    test_einsum_matches_reference(equation, shapes, dtype, epilogue, stream_k=1)


@pytest.mark.gpu
def test_einsum_stream_k_elwise_mul_matches_reference() -> None:
    """ELWISE_MUL under stream-K: the block finishing a shared tile multiplies the summed
    pieces by D's elements, each element once."""
    import torch

    from mirage_xdsl.driver.einsum import compile_einsum

    shapes = ((256, 2048), (2048, 1536), (256, 1536))
    gen = torch.Generator(device="cuda").manual_seed(5)
    a, b, d = (torch.randn(s, device="cuda", dtype=torch.float16, generator=gen) for s in shapes)
    graph = compile_einsum("mk,kn,mn->mn", shapes, "float16", stream_k=1, poison_outputs=True)
    (out,) = graph(a, b, d)
    (out2,) = graph(a, b, d)  # the counters were re-armed: a second launch is right too
    module = einsum_module("mk,kn,mn->mn", [list(s) for s in shapes], "float16")
    (ref,) = run_function(module.body.block.first_op, [t.float().cpu().numpy() for t in (a, b, d)])
    for got in (out.float().cpu().numpy(), out2.float().cpu().numpy()):
        assert not np.isnan(got).any()
        np.testing.assert_allclose(got, ref, atol=4e-3 * np.abs(ref).max(), rtol=4e-3)


def test_elwise_mul_by_tma_only_for_one_tile_per_block() -> None:
    """The ELWISE_MUL factor comes by TMA (MUL = 2, D's tensor map after C's) where every
    block holds one tile and the epilogue is `tma_store`; a persistent sweep keeps the
    L2-prefetched global loads (MUL = 1, no D map)."""
    from mirage_xdsl.codegen.hopper_gemm import hopper_launch
    from mirage_xdsl.codegen.launch_plan import TensorRef

    one = lowered("mk,kn,mn->mn", [(256, 128), (128, 512), (256, 512)])
    assert one.tiles() <= one.grid.value.data and one.mul_by_tma
    launch = hopper_launch(one, lambda v, op: TensorRef("input", 0, 0))
    assert len(launch.tensor_maps) == 4 and launch.tensor_maps[3].box == (64, 64, 1, 1)
    source = prepare(one.parent_op().parent_op(), arch="sm_90").program.source  # type: ignore[union-attr]
    assert "CUtensorMap dm, half* __restrict__ c" in source and ", 1, 2, 1, 2>(" in source
    sweep = lowered("bshd,hdn,bsn->bsn", [(4, 4096, 32, 128), (32, 128, 4096), (4, 4096, 4096)])
    assert sweep.tiles() > sweep.grid.value.data and not sweep.mul_by_tma
    assert len(hopper_launch(sweep, lambda v, op: TensorRef("input", 0, 0)).tensor_maps) == 3
    assert not lowered("mk,kn,mn->mn", [(256, 128), (128, 512), (256, 512)], epilogue="store16").mul_by_tma
    wrong = lowered("mk,kn,mn->mn", [(256, 128), (128, 512), (256, 512)], epilogue="store16")
    wrong.properties["mul_tma"] = BoolAttr.from_bool(True)
    with pytest.raises(VerifyException, match="mul_tma needs an ELWISE_MUL factor, the tma_store epilogue"):
        wrong.verify()


MUL_BY_TMA_CASES = [
    ("mk,kn,mn->mn", [(300, 256), (256, 520), (300, 520)], "float16", {}),  # m and n tails
    ("cmk,ckn,cmn->cmn", [(3, 200, 512), (3, 512, 328), (3, 200, 328)], "bfloat16", {}),
    ("mk,kn,mn->mn", [(512, 256), (256, 1024), (512, 1024)], "float16", {"pingpong": 1, "epilogue": "tma_store"}),
    ("mk,kn,mn->mn", [(512, 256), (256, 1024), (512, 1024)], "float16", {"tile_m": 256, "tile_n": 128}),
    ("mk,kn,mn->mn", [(256, 256), (256, 1024), (256, 1024)], "bfloat16", {"cluster": 2}),
    ("mk,kn,mn->mn", [(512, 256), (256, 1024), (512, 1024)], "float16", {"pingpong": 1, "epilogue": "tma_store", "cluster": 2, "share_a": 1}),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("equation", "shapes", "dtype", "options"), MUL_BY_TMA_CASES)
def test_einsum_elwise_mul_by_tma_matches_reference(
    equation: str, shapes: list[tuple[int, ...]], dtype: str, options: dict[str, object]
) -> None:
    """ELWISE_MUL with the factor loaded by TMA into the staging tiles (one tile per block):
    tails in m and n (zero-filled, not stored), batches, bf16, ping-pong (two slabs per
    consumer), 256-row tiles and CTA pairs; NaN-poisoned outputs, run twice."""
    import torch

    from mirage_xdsl.driver.einsum import compile_einsum

    torch_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(11)
    a, b, d = (torch.randn(s, device="cuda", dtype=torch_dtype, generator=gen) for s in shapes)
    graph = compile_einsum(equation, tuple(tuple(s) for s in shapes), dtype, poison_outputs=True, **options)  # type: ignore[arg-type]
    assert "CUtensorMap dm" in (graph.source or "")
    module = einsum_module(equation, [list(s) for s in shapes], dtype)
    (ref,) = run_function(module.body.block.first_op, [t.float().cpu().numpy() for t in (a, b, d)])
    tol = 4e-3 if dtype == "float16" else 2e-2
    for _ in range(2):
        (out,) = graph(a, b, d)
        got = out.float().cpu().numpy()
        assert not np.isnan(got).any()
        np.testing.assert_allclose(got, ref, atol=tol * np.abs(ref).max(), rtol=tol)


@pytest.mark.gpu
def test_einsum_pingpong_elwise_mul_matches_reference() -> None:
    """ELWISE_MUL under ping-pong: each consumer multiplies its whole tile by D's elements."""
    import torch

    from mirage_xdsl.driver.einsum import compile_einsum

    shapes = ((2, 640, 128), (2, 128, 1024), (2, 640, 1024))
    gen = torch.Generator(device="cuda").manual_seed(3)
    a, b, d = (torch.randn(s, device="cuda", dtype=torch.float16, generator=gen) for s in shapes)
    graph = compile_einsum("cmk,ckn,cmn->cmn", shapes, "float16", pingpong=1, poison_outputs=True)
    (out,) = graph(a, b, d)
    module = einsum_module("cmk,ckn,cmn->cmn", [list(s) for s in shapes], "float16")
    (ref,) = run_function(module.body.block.first_op, [t.float().cpu().numpy() for t in (a, b, d)])
    got = out.float().cpu().numpy()
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, ref, atol=4e-3 * np.abs(ref).max(), rtol=4e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", ["", "store16", "store4"])
@pytest.mark.parametrize(("equation", "shapes", "dtype"), GPU_CASES)
def test_einsum_matches_reference(
    equation: str,
    shapes: list[tuple[int, ...]],
    dtype: str,
    epilogue: str,
    cluster: int = 1,
    pingpong: int = -1,
    stream_k: int = -1,
    tile_n: int = 0,
    tile_m: int = 0,
    share_a: int = 0,
) -> None:
    import torch

    from mirage_xdsl.driver.einsum import compile_einsum

    torch_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(7)
    a, b = (torch.randn(s, device="cuda", dtype=torch_dtype, generator=gen) for s in shapes)
    lhs, rest = equation.split(",")
    rhs, out_ix = rest.split("->")
    n = dict(zip(lhs + rhs, (*shapes[0], *shapes[1])))[out_ix[-1]]
    if epilogue and n % 8:
        pytest.skip("16-byte epilogues need n % 8 == 0")
    graph = compile_einsum(
        equation,
        tuple(tuple(s) for s in shapes),
        dtype,
        epilogue=epilogue,
        cluster=cluster,
        pingpong=pingpong,
        stream_k=stream_k,
        tile_n=tile_n,
        tile_m=tile_m,
        share_a=share_a,
        poison_outputs=True,
    )
    (out,) = graph(a, b)
    (ref,) = run_function(einsum_module(equation, shapes, dtype).body.block.first_op, [a.float().cpu().numpy(), b.float().cpu().numpy()])
    got = out.float().cpu().numpy()
    assert not np.isnan(got).any()
    tol = 2e-2 if dtype == "bfloat16" else 4e-3
    np.testing.assert_allclose(got, ref, atol=tol * np.abs(ref).max(), rtol=tol)


@pytest.mark.gpu
def test_einsum_is_compiled_once() -> None:
    import torch

    import mirage_xdsl as mx
    from mirage_xdsl.driver.einsum import compile_einsum

    a = torch.randn(2, 128, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(2, 64, 128, device="cuda", dtype=torch.float16)
    first = mx.einsum("cmk,ckn->cmn", a, b)
    graph = compile_einsum("cmk,ckn->cmn", ((2, 128, 64), (2, 64, 128)), "float16")
    assert compile_einsum("cmk,ckn->cmn", ((2, 128, 64), (2, 64, 128)), "float16") is graph
    torch.testing.assert_close(first, mx.einsum("cmk,ckn->cmn", a, b))
