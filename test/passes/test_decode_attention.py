"""`cute.decode_attention`: split-key decode attention (flash decoding) as one kernel.

kn-partition lowers an attention group over at most 16 query rows per head (no causal mask) to
it on sm_90 when its estimate beats the group's generated flash-decoding plan
(passes/conversion/decode_attention.py); the printer calls mx::hopper::decode_attention
(codegen/include/mirage_xdsl/decode_attention.cuh).
"""

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
from mirage_xdsl.dialects.cute.decode_attention import DecodeAttentionOp
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.frontends.builder import new_kernel_graph
from mirage_xdsl.passes.conversion.decode_attention import decode_options, fits_decode, lower_decode
from mirage_xdsl.passes.conversion.flash_attention import match_attention
from mirage_xdsl.passes.pipeline import MirageTranspilePass
from mirage_xdsl.reference.executor import run_reference
from mirage_xdsl.target.cost_model import DeviceModel


def decode(dtype: str, heads: int, rows: int, keys: int, d: int, causal: bool = False, scale: float | None = None) -> ModuleOp:
    """`softmax(scale Q K) V` with `rows` query rows per head over `keys` keys (K stored
    key-major), scale 1 / sqrt(d) unless given."""
    g = new_kernel_graph("dec")
    Q = g.new_input((heads, rows, d), dtype=dtype, name="Q")
    K = g.new_input((heads, d, keys), strides=(keys * d, 1, d), dtype=dtype, name="K")
    V = g.new_input((heads, keys, d), dtype=dtype, name="V")
    s = g.mul_scalar(g.matmul(Q, K), 1.0 / math.sqrt(d) if scale is None else scale)
    if causal:
        s = g.causal_mask(s, keys - rows)
    m = g.reduction_max(s, 2)
    e = g.exp(g.sub(s, m))
    g.mark_output(g.div(g.matmul(e, V), g.reduction(e, 2)))
    return g.module


def ops_of(module: ModuleOp) -> list:
    fn = module.body.block.first_op
    return [op for op in fn.body.block.ops if op.name != "func.return"]  # type: ignore[union-attr]


def decode_ops(module: ModuleOp) -> list[DecodeAttentionOp]:
    return [op for op in module.walk() if isinstance(op, DecodeAttentionOp)]


def forced(module: ModuleOp, options: tuple[int, int, int] | None = None) -> ModuleOp:
    """`module` (a clone) with its attention group lowered to `cute.decode_attention` (with
    `options` = (splits, warps, stages) or the chosen ones) whatever the estimate says, then
    mirage-transpile."""
    low = module.clone()
    group = match_attention(ops_of(low))
    assert group is not None and fits_decode(group, DeviceModel())
    lower_decode(group, DeviceModel(), options)
    MirageTranspilePass(fuse=False).apply(make_context(), low)
    low.verify()
    return low


def test_long_single_row_decode_becomes_one_kernel() -> None:
    """The suite's decode over 32 heads x 32768 keys with one query row per head: one kernel of
    8 splits per head (256 blocks of 4 warps, 4-stage rings), the splits' partials in the
    workspace and one arrival counter per head."""
    low = transpiled(graphs.decode_attention("float16", "dec", kv_heads=32, group=1, kv_len=32768, head_dim=128))
    (op,) = decode_ops(low)
    assert (op.splits.value.data, op.warps.value.data, op.stages.value.data) == (8, 4, 4)
    assert op.scratch_offset is not None and op.scratch_bytes() == 32 * 8 * 1 * 130 * 4
    program = emit_cuda(low, "sm_90")
    assert program.arch == "sm_90a"
    assert "mx::hopper::decode_attention<half, 128, 1, 4, 4>(q, k, v, o, ws, counters, mx::hopper::DecodeShape{32768, 4096," in (
        program.source
    )
    plan = program.plans["dec"]
    (step,) = plan.steps
    assert isinstance(step, KernelLaunch) and step.grid == (32, 8, 1) and step.block == (128, 1, 1)
    assert step.smem_bytes == 4 * 4 * 2 * 16 * 128 * 2 + 128
    assert [a.kind for a in step.args] == ["output", "input", "input", "input", "workspace", "counters"]
    assert plan.counters == 32 and plan.workspace_bytes >= op.scratch_bytes()
    assert LaunchPlan.from_json(plan.to_json()) == plan


@pytest.mark.parametrize(("rows", "keys"), [(1, 1024), (8, 1024), (8, 8192), (8, 32768)])
def test_groups_the_generated_plans_do_better_stay_generated(rows: int, keys: int) -> None:
    """Short caches (one launch dominates) and grouped queries (the eight-warp form streams
    slower, `MANY_ROWS_EFFICIENCY`) keep the generated flash-decoding kernels."""
    heads = 32 if rows == 1 else 4
    low = transpiled(graphs.decode_attention("float16", "dec", kv_heads=heads, group=rows, kv_len=keys, head_dim=128))
    assert not decode_ops(low)


def test_what_the_kernel_does_not_take() -> None:
    """A causal mask, more than 16 query rows, a negative scale or keys that are not a multiple
    of one step of every warp stay generated kernels."""
    dev = DeviceModel()
    for module in (
        decode("float16", 4, 4, 1024, 128, causal=True),
        decode("float16", 4, 32, 1024, 128),
        decode("float16", 4, 1, 1024, 128, scale=-0.1),
        decode("float16", 4, 1, 1000, 128),
    ):
        group = match_attention(ops_of(module))
        assert group is not None and not fits_decode(group, dev)


def test_options_follow_the_rows_and_heads() -> None:
    """Four warps with 4-stage rings for one or two rows per head, eight with 3 stages beyond;
    splits fill two blocks per SM with at least four steps per warp."""
    dev = DeviceModel()

    def options(heads: int, rows: int, keys: int) -> tuple[int, int, int] | None:
        group = match_attention(ops_of(decode("float16", heads, rows, keys, 128)))
        assert group is not None
        return decode_options(group, dev)

    assert options(32, 1, 32768) == (8, 4, 4)
    assert options(4, 8, 32768) == (64, 8, 3)
    assert options(32, 2, 256) == (1, 4, 4)  # 256 keys: four steps of each of 4 warps
    assert options(32, 1, 1000) is None


def test_verifier_rules() -> None:
    """Bad options are rejected with the rule."""
    (op,) = decode_ops(forced(decode("float16", 2, 4, 1024, 128)))

    def rejects(match: str, **props: int) -> None:
        bad = DecodeAttentionOp(
            op.q,
            op.k,
            op.v,
            op.result.type,
            kernel_name="x",
            scale=0.1,
            splits=props.get("splits", 1),
            warps=props.get("warps", 4),
            stages=props.get("stages", 2),
        )
        with pytest.raises(VerifyException, match=match):
            bad.verify_()

    rejects("warps must be one of", warps=3)
    rejects("stages must be in 2..4", stages=5)
    rejects("must be a multiple of 16 keys x 4 warps x 32 splits", splits=32)
    rejects("bytes of shared memory exceed the block limit", warps=8, stages=4)
    many = ops_of(decode("float16", 2, 32, 1024, 128))
    big = DecodeAttentionOp(
        many[0].lhs, many[0].rhs, op.v, many[-1].result.type, kernel_name="x", scale=0.1, splits=1, warps=4, stages=2
    )
    with pytest.raises(VerifyException, match="32 query rows per head, at most 16"):
        big.verify_()


def test_reference_of_the_op_matches_the_kn_graph() -> None:
    """The reference executor runs `cute.decode_attention` as the kn graph it replaced."""
    module = decode("float16", 2, 3, 256, 64)
    fused = module.clone()
    group = match_attention(ops_of(fused))
    assert group is not None
    lower_decode(group, DeviceModel())
    rng = np.random.default_rng(1)
    fn = module.body.block.first_op
    xs = [rng.uniform(-2, 2, tuple(a.type.get_shape())) for a in fn.args]  # type: ignore[union-attr]
    (want,) = run_reference(module, xs)
    (got,) = run_reference(fused, xs)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_host_emulator_refuses_the_kernel() -> None:
    from mirage_xdsl.runtime.host_emulator import HostEmulationError, HostEmulator

    program = emit_cuda(forced(decode("float16", 2, 1, 1024, 64)), "sm_90")
    with pytest.raises(HostEmulationError, match=r"cute.decode_attention\), which the host emulator cannot run"):
        HostEmulator(program)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_accepts_the_printed_kernels(tmp_path: Path) -> None:
    """One and eight query rows, both element types and head dims compile for sm_90a without
    register spills."""
    from mirage_xdsl.codegen.device_library import DEVICE_LIBRARY_INCLUDE

    sources = [
        emit_cuda(forced(decode("float16", 32, 1, 32768, 128)), "sm_90").source,
        emit_cuda(forced(decode("bfloat16", 4, 8, 4096, 128)), "sm_90").source,
        emit_cuda(forced(decode("bfloat16", 8, 16, 2048, 64)), "sm_90").source,
    ]
    for i, source in enumerate(sources):
        src = tmp_path / f"k{i}.cu"
        src.write_text(source)
        cmd = ["nvcc", "-arch=sm_90a", "-cubin", "-std=c++17", "-Xptxas", "-v", f"-I{DEVICE_LIBRARY_INCLUDE}", "-o", str(tmp_path / f"k{i}.cubin"), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[:2000]
        assert "0 bytes spill stores" in proc.stderr, proc.stderr[-2000:]


GPU_CASES = [
    ("float16", 32, 1, 4096, 128, None),  # the chosen splits (8)
    ("bfloat16", 4, 3, 2048, 64, None),  # three rows, eight warps
    ("float16", 2, 16, 1024, 128, (1, 4, 2)),  # sixteen rows, one split: the block writes O itself
    ("bfloat16", 3, 8, 8192, 128, (16, 8, 3)),  # 16 splits combined by the last block
    ("float16", 5, 2, 1024, 64, (4, 2, 3)),  # two warps
]


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "heads", "rows", "keys", "d", "options"), GPU_CASES)
def test_forced_decode_matches_reference(dtype: str, heads: int, rows: int, keys: int, d: int, options: tuple[int, int, int] | None) -> None:
    """Against the float64 reference on fresh random inputs, NaN-poisoned outputs, twice on
    one loaded graph with other inputs (the arrival counters are reset after each launch)."""
    import cupy  # type: ignore[import-not-found]

    from mirage_xdsl.bench.check import to_device
    from mirage_xdsl.bench.fuzz_check import compare, reference_of
    from mirage_xdsl.bench.fuzz_graphs import FuzzCase
    from mirage_xdsl.driver.nvcc import compile_cuda
    from mirage_xdsl.runtime.executable import CompiledGraph
    from mirage_xdsl.runtime.interop import detect_arch
    from mirage_xdsl.runtime.random_inputs import numpy_values

    module = decode(dtype, heads, rows, keys, d)
    program = emit_cuda(forced(module, options), detect_arch())
    plan = program.plans["dec"]
    graph = CompiledGraph(plan, str(compile_cuda(program.source, program.arch)), source=program.source, poison_outputs=True).load()
    case = FuzzCase("dec", "kernel", dtype, module)
    for seed in (3, 4):
        inputs, refs = reference_of(case, plan, seed)
        outs = graph(*[to_device(cupy, x) for x in inputs])
        cupy.cuda.get_current_stream().synchronize()
        host = [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, plan.outputs)]
        ok, err, msg = compare(host, refs.values, dtype, refs.noise, refs.rounded)
        assert ok, f"seed {seed}: {msg} (error {err})"
