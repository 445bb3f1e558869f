"""Attention groups -> `cute.hopper_attention` (kn-partition `hopper-attention`,
passes/conversion/flash_attention.py): the match, the estimate's routing of the suite's
prefills, the op's verifier, the printed kernel and its launch, the reference semantics, the
opt-outs (`flash_attention=false`, sm_80, megakernels), nvcc on the printed source, and (GPU)
ragged, causal and head-dim-64 cases against the float64 reference of the kn graph on
NaN-poisoned outputs."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import transpiled
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.bench.suite import graphs
from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.hopper_attention import HopperAttentionOp
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.frontends.builder import new_kernel_graph
from mirage_xdsl.passes.conversion.flash_attention import fits_kernel, lower_attention, match_attention
from mirage_xdsl.passes.pipeline import MirageTranspilePass
from mirage_xdsl.reference.executor import run_reference
from mirage_xdsl.target.cost_model import DeviceModel


def attention(
    dtype: str,
    q: int,
    k: int,
    d: int,
    heads: int | None = 1,
    causal: bool = False,
    offset: int | None = None,
    dv: int | None = None,
    max_out: bool = False,
    scale: float | None = None,
) -> ModuleOp:
    """`softmax(scale Q K) V` (scale 1 / sqrt(d) unless given) with q queries and k keys per
    head (heads None: rank 2), K stored key-major; `causal` masks with `offset` (default
    k - q, bottom-right); `dv`: V's head dim (default d); `max_out`: the row max is a graph
    output too."""
    g = new_kernel_graph("p")
    lead = () if heads is None else (heads,)
    Q = g.new_input((*lead, q, d), dtype=dtype, name="Q")
    key_strides = (1, d) if heads is None else (k * d, 1, d)
    K = g.new_input((*lead, d, k), strides=key_strides, dtype=dtype, name="K")
    V = g.new_input((*lead, k, dv or d), dtype=dtype, name="V")
    s = g.mul_scalar(g.matmul(Q, K), 1.0 / math.sqrt(d) if scale is None else scale)
    if causal:
        s = g.causal_mask(s, offset)
    last = len(lead) + 1
    m = g.reduction_max(s, last)
    e = g.exp(g.sub(s, m))
    g.mark_output(g.div(g.matmul(e, V), g.reduction(e, last)))
    if max_out:
        g.mark_output(m)
    return g.module


def ops_of(module: ModuleOp) -> list:
    fn = module.body.block.first_op
    return [op for op in fn.body.block.ops if op.name != "func.return"]  # type: ignore[union-attr]


def forced(module: ModuleOp, consumers: int = 1, key_tile: int = 64) -> ModuleOp:
    """`module` (a clone) with its attention group lowered to `cute.hopper_attention` (with
    `consumers` warpgroups and `key_tile` keys per tile) whatever the estimate says, then
    mirage-transpile."""
    low = module.clone()
    group = match_attention(ops_of(low))
    assert group is not None and fits_kernel(group)
    lower_attention(group, DeviceModel(), (consumers, key_tile))
    MirageTranspilePass(fuse=False).apply(make_context(), low)
    low.verify()
    return low


def flash_ops(module: ModuleOp) -> list[HopperAttentionOp]:
    return [op for op in module.walk() if isinstance(op, HopperAttentionOp)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [1024, 4096])
def test_suite_prefill_becomes_one_flash_kernel(seq: int, causal: bool) -> None:
    """The default pipeline routes the suite's prefills (8 heads, d = 128) to one kernel with
    two-stage rings: at 1024 tokens a producer and one 64-row consumer warpgroup per block with
    64-key tiles (64 blocks of 128 rows would leave half the SMs idle), at 4096 two consumers
    sharing 128-key tiles (256 blocks of 128 rows)."""
    consumers, key_tile = (2, 128) if seq == 4096 else (1, 64)
    build = graphs.prefill_attention_causal if causal else graphs.prefill_attention
    low = transpiled(build("float16", "prefill", heads=8, seq=seq, head_dim=128))
    (op,) = flash_ops(low)
    assert op.consumers.value.data == consumers and op.key_tile.value.data == key_tile and op.stages.value.data == 2
    assert op.causal == causal and (not causal or op.causal_offset.value.data == 0)  # type: ignore[union-attr]
    assert not [o for o in low.walk() if isinstance(o, cute.KernelOp)]
    program = emit_cuda(low, "sm_90")
    assert program.arch == "sm_90a"
    call = (
        f"mx::hopper::flash_attention<half, 128, {consumers}, {key_tile}, 2, {str(causal).lower()}>"
        f"(mx::hopper::AttnMaps{{&tq, &tk, &tv}}, o, mx::hopper::AttnShape{{{seq}, {seq}"
    )
    assert call in program.source and f"__launch_bounds__({128 * (consumers + 1)}, {3 - consumers})" in program.source
    (step,) = program.plans["prefill"].steps
    assert isinstance(step, KernelLaunch) and step.sm90a and not step.pdl
    assert step.grid == (8, seq // (64 * consumers), 1) and step.block == (128 * (consumers + 1), 1, 1)
    assert step.smem_bytes == (64 * consumers * 128 + 4 * key_tile * 128) * 2 + 9 * 8 + 1024
    assert [a.kind for a in step.args] == ["output", "input", "input", "input"]
    # the producer's TMA loads: Q, K and V as {head dim, rows, heads, 1}, boxes of 64 x the tile's rows
    assert [m.ref.index for m in step.tensor_maps] == [0, 1, 2]
    assert [m.dims for m in step.tensor_maps] == [(128, seq, 8, 1)] * 3
    assert [m.box for m in step.tensor_maps] == [(64, 64 * consumers, 1, 1), (64, key_tile, 1, 1), (64, key_tile, 1, 1)]
    assert step.tensor_maps[0].strides == (256, seq * 256, 8 * seq * 256)
    assert LaunchPlan.from_json(program.plans["prefill"].to_json()) == program.plans["prefill"]


def test_printed_strides_and_scale() -> None:
    """The kernel reads the recorded strides (K key-major: its key stride is d) and the
    scale times log2(e)."""
    program = emit_cuda(forced(attention("bfloat16", 192, 256, 64, heads=2, causal=True, offset=64)), "sm_90")
    shape = "AttnShape{192, 256, 3, 12288LL, 64LL, 16384LL, 64LL, 16384LL, 64LL, 12288LL, 64LL, "
    assert shape in program.source and "0.18033688011112042f, 64}" in program.source
    assert "flash_attention<__nv_bfloat16, 64, 1, 64, 2, true>" in program.source


def test_reference_of_the_op_matches_the_kn_graph() -> None:
    """The reference executor runs `cute.hopper_attention` as the kn graph it replaced."""
    module = attention("float16", 80, 128, 64, heads=2, causal=True)
    fused = module.clone()
    group = match_attention(ops_of(fused))
    assert group is not None
    lower_attention(group, DeviceModel())
    rng = np.random.default_rng(1)
    fn = module.body.block.first_op
    xs = [rng.uniform(-2, 2, tuple(a.type.get_shape())) for a in fn.args]  # type: ignore[union-attr]
    (want,) = run_reference(module, xs)
    (got,) = run_reference(fused, xs)
    assert np.abs(got - want).max() < 1e-12


def test_opt_outs_keep_the_generated_kernels() -> None:
    """`flash_attention=false`, an sm_80 target and a megakernel's kn-fuse keep the
    generated attention kernels."""
    module = graphs.prefill_attention("float16", "prefill", heads=8, seq=1024, head_dim=128)
    for options in ({"flash_attention": False}, {"arch": "sm_80"}):
        low = transpiled(module, **options)
        assert not flash_ops(low) and [o for o in low.walk() if isinstance(o, cute.KernelOp)]
    from mirage_xdsl.passes.pipeline import fuse_plain_graphs

    mk = module.clone()
    fuse_plain_graphs(make_context(), mk, per_op=False, hopper_attention=False)
    assert not flash_ops(mk)


@pytest.mark.parametrize(
    ("q", "k", "d", "why"),
    [(32, 256, 128, "fewer than 64 query rows"), (128, 256, 96, "head dim 96"), (128, 200, 64, "keys not a multiple of 64")],
)
def test_shapes_the_kernel_does_not_take(q: int, k: int, d: int, why: str) -> None:
    """Groups outside the kernel's rules stay generated kernels (here: {why})."""
    module = attention("float16", q, k, d, heads=4)
    group = match_attention(ops_of(module))
    assert group is not None and not fits_kernel(group)
    assert not flash_ops(transpiled(module))


def test_negative_scale_stays_generated() -> None:
    """A negative scale turns the row maximum of the raw scores into their minimum, which the
    kernel does not take: such a group stays a generated kernel."""
    module = attention("float16", 128, 256, 64, heads=2, scale=-0.125)
    group = match_attention(ops_of(module))
    assert group is not None and not fits_kernel(group)
    assert not flash_ops(transpiled(module))


def test_kernel_shape_follows_the_block_count() -> None:
    """Two consumers with 128-key tiles once 128-row blocks give half the SMs one (8 heads x
    2048 tokens: 128 blocks), 64-key tiles where seq_k is no multiple of 128, one consumer
    below that (8 heads x 1024 tokens: 64 blocks of 128 rows on 132 SMs)."""
    from mirage_xdsl.passes.conversion.flash_attention import kernel_shape

    def shape(q: int, k: int, heads: int) -> tuple[int, int]:
        group = match_attention(ops_of(attention("float16", q, k, 128, heads=heads)))
        assert group is not None
        return kernel_shape(group, DeviceModel())

    assert shape(2048, 2048, 8) == (2, 128)
    assert shape(2048, 2048 + 64, 8) == (2, 64)
    assert shape(1024, 1024, 8) == (1, 64)


def test_value_head_dim_other_than_the_query_s() -> None:
    """V with another head dim than Q and K (64 against 128) stays a generated kernel."""
    module = attention("float16", 128, 256, 128, heads=2, dv=64)
    group = match_attention(ops_of(module))
    assert group is not None and not fits_kernel(group)
    assert not flash_ops(transpiled(module))


def test_no_match_when_an_intermediate_leaves_the_group() -> None:
    """A row max that is also a graph output is not an attention group's private value."""
    assert match_attention(ops_of(attention("float16", 128, 128, 64, heads=2, max_out=True))) is None


def test_verifier_rules() -> None:
    """Bad tile options and shapes are rejected with the rule."""
    module = forced(attention("float16", 128, 256, 128, heads=2))
    (op,) = flash_ops(module)

    def rejects(match: str, **props: object) -> None:
        bad = HopperAttentionOp(
            op.q,
            op.k,
            op.v,
            op.result.type,
            kernel_name="x",
            scale=props.get("scale", 0.1),  # type: ignore[arg-type]
            causal_offset=props.get("offset"),  # type: ignore[arg-type]
            consumers=props.get("consumers", 1),  # type: ignore[arg-type]
            key_tile=props.get("key_tile", 64),  # type: ignore[arg-type]
            stages=props.get("stages", 2),  # type: ignore[arg-type]
        )
        with pytest.raises(VerifyException, match=match):
            bad.verify_()

    rejects("key_tile 96 must be one of", key_tile=96)
    rejects("consumers must be one of", consumers=3)
    rejects("causal_offset must be >= 0", offset=-1)
    rejects("stages must be in 2..4", stages=5)
    rejects("key_tile 128 needs consumers = 2", key_tile=128)
    rejects("bytes of shared memory exceed the block limit", consumers=2, key_tile=128, stages=4)
    rejects("scale -0.1 must be positive", scale=-0.1)
    q_d64 = ops_of(attention("float16", 128, 256, 64, heads=2))[0].lhs  # Q [2, 128, 64] beside K [2, 128, 256]
    mismatched = HopperAttentionOp(
        q_d64, op.k, op.v, op.result.type, kernel_name="x", scale=0.1, causal_offset=None, consumers=1, key_tile=64, stages=2
    )
    with pytest.raises(VerifyException, match="are not Q"):
        mismatched.verify_()


def test_host_emulator_refuses_the_kernel() -> None:
    from mirage_xdsl.runtime.host_emulator import HostEmulationError, HostEmulator

    program = emit_cuda(forced(attention("float16", 128, 128, 64)), "sm_90")
    with pytest.raises(HostEmulationError, match=r"sm_90a kernel .*cannot run; lower the graph for a target without it"):
        HostEmulator(program)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_accepts_the_printed_kernels(tmp_path: Path) -> None:
    """Both element types, both head dims, one and two consumers, causal and not compile for
    sm_90a without register spills or a serialised wgmma pipeline (ptxas C7513 / C7514)."""
    from mirage_xdsl.codegen.device_library import DEVICE_LIBRARY_INCLUDE

    sources = [
        emit_cuda(forced(attention("float16", 256, 256, 128, heads=None, causal=True), consumers=2), "sm_90").source,
        emit_cuda(transpiled(graphs.prefill_attention("bfloat16", "p2", heads=8, seq=4096, head_dim=128)), "sm_90").source,
        emit_cuda(forced(attention("bfloat16", 128, 192, 64, heads=3)), "sm_90").source,
        emit_cuda(forced(attention("float16", 192, 256, 64, heads=2, causal=True), consumers=2, key_tile=128), "sm_90").source,
    ]
    for i, source in enumerate(sources):
        src = tmp_path / f"k{i}.cu"
        src.write_text(source)
        cmd = [
            "nvcc",
            "-arch=sm_90a",
            "-cubin",
            "-std=c++17",
            "-Xptxas",
            "-v",
            f"-I{DEVICE_LIBRARY_INCLUDE}",
            "-o",
            str(tmp_path / f"k{i}.cubin"),
            str(src),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[:2000]
        assert "0 bytes spill stores" in proc.stderr and "C751" not in proc.stderr, proc.stderr[-2000:]


def _run_gpu(module_kn: ModuleOp, low: ModuleOp, dtype: str) -> None:
    from mirage_xdsl.bench.fuzz_check import check_gpu_lowered
    from mirage_xdsl.bench.fuzz_graphs import FuzzCase

    assert flash_ops(low)
    name = module_kn.body.block.first_op.sym_name.data  # type: ignore[union-attr]
    out = check_gpu_lowered(FuzzCase(name, "kernel", dtype, module_kn), low, seed=5)  # the reference runs the kn graph
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


GPU_CASES = [
    ("float16", 200, 256, 128, 2, False, None, (1, 64)),  # ragged query rows (zero-filled, not stored)
    ("bfloat16", 192, 256, 64, 3, True, None, (1, 64)),  # causal, bottom-right: offset 64
    ("float16", 256, 256, 128, None, True, 0, (2, 64)),  # rank 2, causal from the top-left, two consumers
    ("bfloat16", 128, 320, 128, 1, True, 192, (1, 64)),  # keys past the last row's diagonal skipped
    ("float16", 320, 512, 64, 2, False, None, (2, 64)),  # two consumers, a ragged last block
    ("float16", 320, 512, 128, 2, False, None, (2, 128)),  # 128-key tiles, a ragged last block
    ("bfloat16", 256, 384, 128, 1, True, 128, (2, 128)),  # 128-key tiles, causal bottom-right
    ("float16", 200, 256, 64, None, True, 0, (2, 128)),  # 128-key tiles, top-left causal, ragged rows
]


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "q", "k", "d", "heads", "causal", "offset", "shape"), GPU_CASES)
def test_forced_flash_attention_matches_reference(
    dtype: str, q: int, k: int, d: int, heads: int | None, causal: bool, offset: int | None, shape: tuple[int, int]
) -> None:
    module = attention(dtype, q, k, d, heads, causal, offset)
    _run_gpu(module, forced(module, *shape), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_suite_prefill_4096_matches_reference(dtype: str, causal: bool) -> None:
    """The suite's 4096-token prefills through the default pipeline."""
    build = graphs.prefill_attention_causal if causal else graphs.prefill_attention
    module = build(dtype, "prefill", heads=8, seq=4096, head_dim=128)
    _run_gpu(module, transpiled(module), dtype)
