"""The CuTe lowering, the CUDA printer and the `cuda` target.

* every candidate of every shared muGraph file goes through `mirage-transpile` (including
  `convert-tb-to-cute`) and `emit_cuda`; each file's module is one translation unit that
  nvcc compiles for sm_90 without warnings (skipped without nvcc; compile results are cached
  by content under `$MIRAGE_XDSL_CACHE_DIR/codegen-test`, default `~/.cache/mirage_xdsl`);
* launch plans round-trip through JSON and through the `-t cuda` text;
* the MMA choice of rmsnorm graph 0 (mirage-notes 2.3), thread-layout scores, swizzles;
* numerics WITHOUT a GPU: the generated kernels run on the CPU through the host emulation
  (`runtime/host_emulator.py`) and are compared with the numpy reference executor
  (a few candidates by default, every candidate with `MIRAGE_XDSL_EMULATE_ALL=1`);
* numerics WITH a GPU (`@pytest.mark.gpu`): the same comparison through CuPy.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, bf16, f16, f32, f64, i64
from xdsl.dialects.func import FuncOp
from xdsl.utils.exceptions import DiagnosticException

from mirage_xdsl.codegen import cuda_printer, kernel_resources
from mirage_xdsl.codegen.cuda_target import CudaProgram, CudaTarget, emit_cuda, parse_plans
from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.row_chains import ROW_CHAIN_SMEM
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.passes.conversion.tb_to_cute import ConvertTbToCutePass
from mirage_xdsl.passes.conversion.tb_to_cute_base import parse_swizzle, reduce_threads
from mirage_xdsl.passes.conversion.tiled_mma import choose_thr_layout, choose_tiled_mma
from mirage_xdsl.passes.cute.register_accumulators import register_accumulators
from mirage_xdsl.passes.pipeline import CuteDecisionsPass
from mirage_xdsl.target.errors import SharedMemoryExceeded

SHARED = os.environ.get("MIRAGE_SHARED")
MUGRAPHS = Path(SHARED) / "mugraphs" if SHARED else Path(__file__).resolve().parents[1] / "examples" / "mugraphs"
MUGRAPH_FILES = sorted(MUGRAPHS.glob("*.json"))
FILE_IDS = [p.stem for p in MUGRAPH_FILES]

OVERSIZED = "tb-plan-smem"
"""Candidates whose tiles exceed sm_90's 227 KiB of shared memory fail in tb-plan-smem (e.g.
rmsnorm_bs1 graph 14 holds the whole K = 4096 per block); they cannot run and are skipped."""


make_ctx = make_context


def find_nvcc() -> str | None:
    try:
        from mirage_xdsl.driver.nvcc import find_nvcc as runtime_find

        found = runtime_find()
    except ImportError:  # pragma: no cover - runtime helper absent
        found = None
    return found or shutil.which("nvcc")


def nvcc_command(nvcc: str, src: Path, out: Path, arch: str = "sm_90") -> list[str]:
    include = Path(cuda_printer.__file__).resolve().parent / "include"
    return [
        nvcc,
        "-cubin",
        "-std=c++17",
        "-O3",
        "--expt-relaxed-constexpr",
        f"-arch={arch}",
        f"-I{include}",
        "-o",
        str(out),
        str(src),
    ]


def headers_digest() -> str:
    include = Path(cuda_printer.__file__).resolve().parent / "include"
    h = hashlib.sha256()
    for p in sorted(include.rglob("*")):
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def cache_dir() -> Path:
    base = os.environ.get("MIRAGE_XDSL_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "mirage_xdsl") / "codegen-test"


@dataclass
class FileResult:
    """One shared muGraph file through the pipeline, the printer and nvcc."""

    path: Path
    program: CudaProgram | None = None
    module: ModuleOp | None = None
    num_funcs: int = 0
    num_customized: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    emit_s: float = 0.0
    nvcc: dict | None = None


def transpile_file(path: Path) -> FileResult:
    """Import a file and lower every candidate on its own (one failing candidate must not
    hide the others), then print all lowered candidates as ONE translation unit.  The saved
    threadblock graphs are kept (`lift=False`): these tests are about their code; the lifted
    path is test_lift_customized.py's."""
    from mirage_xdsl.frontends.mugraph_import import load_mugraph_file
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    res = FileResult(path)
    t0 = time.perf_counter()
    module = load_mugraph_file(path)
    ctx = make_ctx()
    lowered: list[FuncOp] = []
    for fn in [op for op in module.body.block.ops if isinstance(op, FuncOp)]:
        res.num_funcs += 1
        res.num_customized += sum(1 for op in fn.walk() if op.name == "kn.customized")
        name = fn.sym_name.data
        single = ModuleOp([fn.clone()])
        try:
            MirageTranspilePass(lift=False).apply(ctx, single)
            single.verify()
        except DiagnosticException as err:
            msg = str(err).strip().splitlines()[0]
            (res.skipped if isinstance(err, SharedMemoryExceeded) else res.errors)[name] = msg
            if isinstance(err, SharedMemoryExceeded):
                assert msg.startswith(OVERSIZED) and err.needed > err.limit == cute.MAX_SMEM_BYTES
            continue
        f = single.body.block.first_op
        assert isinstance(f, FuncOp)
        f.detach()
        lowered.append(f)
    res.module = ModuleOp(lowered)
    res.program = emit_cuda(res.module)
    res.emit_s = time.perf_counter() - t0
    return res


def nvcc_compile(source: str, nvcc: str) -> dict:
    """{rc, stderr, seconds} of `nvcc -cubin` for sm_90, cached by content."""
    key = hashlib.sha256((source + headers_digest() + nvcc + "sm_90").encode()).hexdigest()[:32]
    cdir = cache_dir()
    cached = cdir / f"{key}.json"
    if cached.is_file():
        return json.loads(cached.read_text()) | {"cached": True}
    cdir.mkdir(parents=True, exist_ok=True)
    tmp = cdir / f"tmp-{key}-{os.getpid()}"
    tmp.mkdir(exist_ok=True)
    try:
        src = tmp / "module.cu"
        src.write_text(source)
        t0 = time.perf_counter()
        proc = subprocess.run(nvcc_command(nvcc, src, tmp / "module.cubin"), capture_output=True, text=True)
        out = {"rc": proc.returncode, "stderr": proc.stderr + proc.stdout, "seconds": time.perf_counter() - t0}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if out["rc"] == 0:
        cached.write_text(json.dumps(out))
    return out | {"cached": False}


@pytest.fixture(scope="session")
def shared_results() -> dict[str, FileResult]:
    if not MUGRAPH_FILES:
        pytest.skip(f"no saved muGraph files under {MUGRAPHS} (check MIRAGE_SHARED)")
    results = {p.stem: transpile_file(p) for p in MUGRAPH_FILES}
    nvcc = find_nvcc()
    if nvcc is not None:
        workers = max(2, os.cpu_count() or 2)
        with ThreadPoolExecutor(workers) as pool:
            futures = {k: pool.submit(nvcc_compile, r.program.source, nvcc) for k, r in results.items() if r.program}
            for k, fut in futures.items():
                results[k].nvcc = fut.result()
    return results


# ---------------------------------------------------------------------------------------
# Every shared candidate: pipeline + printer + nvcc


@pytest.mark.parametrize("stem", FILE_IDS)
def test_every_candidate_lowers(shared_results: dict[str, FileResult], stem: str) -> None:
    res = shared_results[stem]
    assert not res.errors, f"{stem}: candidates failed to lower: {res.errors}"
    assert res.program is not None and res.module is not None
    lowered = res.num_funcs - len(res.skipped)
    assert len(res.program.plans) == lowered
    kernels = [op for op in res.module.walk() if isinstance(op, cute.KernelOp)]
    assert len(res.program.kernel_names) == len(kernels)
    assert not any(op.name == "kn.customized" for op in res.module.walk())
    for name in res.program.kernel_names:  # saved graphs use 128 threads; generated ones (loose ops) may differ
        assert re.search(rf'extern "C" __global__ void __launch_bounds__\(\d+(?:, \d+)?\) {name}\(', res.program.source), name
    # every launch refers to a printed kernel, with its own grid/block/smem
    printed = set(res.program.kernel_names)
    for plan in res.program.plans.values():
        for step in plan.steps:
            if isinstance(step, KernelLaunch):
                assert step.kernel in printed
                assert step.smem_bytes <= cute.MAX_SMEM_BYTES


def test_only_oversized_candidates_are_skipped(shared_results: dict[str, FileResult]) -> None:
    skipped = {f"{k}:{n}": msg for k, r in shared_results.items() for n, msg in r.skipped.items()}
    for msg in skipped.values():
        assert "shared memory" in msg
    total = sum(r.num_funcs for r in shared_results.values())
    assert total - len(skipped) >= total - 2, skipped


@pytest.mark.parametrize("stem", FILE_IDS)
def test_nvcc_compiles_without_warnings(shared_results: dict[str, FileResult], stem: str) -> None:
    res = shared_results[stem]
    if res.nvcc is None:
        pytest.skip("nvcc not found")
    out = res.nvcc
    assert out["rc"] == 0, out["stderr"][:4000]
    assert "warning" not in out["stderr"].lower(), out["stderr"][:4000]
    print(f"{stem}: {len(res.program.kernel_names)} kernels, nvcc {out['seconds']:.1f} s"  # type: ignore[union-attr]
          f"{' (cached)' if out.get('cached') else ''}, pipeline+emit {res.emit_s:.1f} s")


@pytest.mark.parametrize("stem", FILE_IDS)
def test_launch_plans_round_trip(shared_results: dict[str, FileResult], stem: str) -> None:
    program = shared_results[stem].program
    assert program is not None
    for plan in program.plans.values():
        assert LaunchPlan.from_json(plan.to_json()) == plan
    assert parse_plans(program.text()) == program.plans


# ---------------------------------------------------------------------------------------
# Decisions


def test_rmsnorm_graph0_mma_choice() -> None:
    """mirage-notes 2.3: SM80_16x8x16 atom, thr_layout (1,3) (score 0.75/9216)."""
    mma = choose_tiled_mma(2, 24, 128, 128, f16, f16)
    assert mma.atom_name == "SM80_16x8x16_F32F16F16F32_TN"
    assert mma.tg == (1, 3)


@pytest.mark.parametrize(
    ("mnk", "threads", "expected"),
    [
        ((2, 24, 128), 128, (1, 3)),
        ((8, 32, 64), 128, (1, 4)),
        ((64, 64, 64), 128, (2, 2)),
        ((16, 16, 256), 128, (1, 2)),
        ((24, 24, 16), 128, (2, 2)),  # M = 24 tiles no 16*tg_m evenly: the filter is relaxed
        ((16, 8, 16), 32, (1, 1)),
    ],
)
def test_thr_layout_score(mnk: tuple[int, int, int], threads: int, expected: tuple[int, int]) -> None:
    assert choose_thr_layout(*mnk, threads) == expected


def test_atoms_by_dtype() -> None:
    assert choose_tiled_mma(16, 16, 8, 128, f16, f16).atom_name == "SM80_16x8x8_F32F16F16F32_TN"
    assert choose_tiled_mma(16, 16, 64, 128, bf16, bf16).atom_name == "SM80_16x8x16_F32BF16BF16F32_TN"
    assert choose_tiled_mma(16, 16, 64, 128, f32, f16).atom_name == "UniversalFMA"
    assert choose_tiled_mma(16, 16, 64, 128, f16, f16, tensor_cores=False).atom_name == "UniversalFMA"


def test_reduce_threads() -> None:
    assert reduce_threads(2, 128, 128) == 32  # rmsnorm: 2 rows of 128
    assert reduce_threads(16, 1024, 128) == 8
    assert reduce_threads(1024, 8, 128) == 1
    assert reduce_threads(2, 128, 100) == 1  # partial warps cannot shuffle


def test_swizzles() -> None:
    assert parse_swizzle("xor<3,3,4>", 2).bms == (3, 3, 4)
    assert parse_swizzle("xor<0,3,3>", 2).kind.data == "none"
    assert parse_swizzle("shift", 2).kind.data == "shift"
    # Hopper GMMA swizzles are over bytes: Swizzle<3,4,3> on fp16 = Swizzle<3,3,3> on elements
    gmma = parse_swizzle("xor<3,4,3>", 2)
    assert gmma.bms == (3, 3, 3)
    for byte_off in range(0, 4096, 2):
        b = byte_off ^ ((byte_off >> 3) & (7 << 4))
        assert gmma.apply(byte_off // 2) * 2 == b


# ---------------------------------------------------------------------------------------
# Diagnostics and the target


RMSNORM_G0 = Path(__file__).parent / "filecheck" / "codegen" / "rmsnorm-graph0.mlir"


def parse(text: str) -> ModuleOp:
    from xdsl.parser import Parser

    return Parser(make_ctx(), text).parse_module()


def test_missing_attributes_name_the_pass() -> None:
    module = parse(RMSNORM_G0.read_text())
    with pytest.raises(DiagnosticException, match=r"convert-tb-to-cute: kn.customized has no 'tb.smem_size' attribute; run tb-plan-smem"):
        ConvertTbToCutePass().apply(make_ctx(), module)


def test_emit_cuda_refuses_unlowered_ir() -> None:
    """The printer only prints: planned but unlowered threadblock graphs are an error that
    names the missing conversion, and the module is untouched."""
    from mirage_xdsl.codegen.cuda_syntax import CudaEmitError
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = parse(RMSNORM_G0.read_text())
    MirageTranspilePass(lift=False, to_cute=False).apply(make_ctx(), module)
    before = str(module)
    with pytest.raises(CudaEmitError, match="convert-tb-to-cute"):
        emit_cuda(module)
    assert str(module) == before


def test_emit_cuda_prints_lowered_ir() -> None:
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = parse(RMSNORM_G0.read_text())
    MirageTranspilePass(lift=False).apply(make_ctx(), module)
    program = emit_cuda(module)
    assert program.kernel_names == ["graph_0_k0"]
    (step,) = program.plans["graph_0"].steps
    assert isinstance(step, KernelLaunch)
    assert (step.grid, step.block) == ((256, 1, 1), (128, 1, 1))
    assert [(r.kind, r.index) for r in step.args] == [("output", 0), ("input", 0), ("input", 1)]


def test_cuda_target_prints_source_and_plans() -> None:
    import io

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = parse(RMSNORM_G0.read_text())
    MirageTranspilePass(lift=False).apply(make_ctx(), module)
    out = io.StringIO()
    CudaTarget(arch="sm_90").emit(make_ctx(), module, out)
    text = out.getvalue()
    assert text.startswith("// Generated by mirage_xdsl (cuda target, sm_90)")
    assert "/* mirage-launch-plan @graph_0\n" in text
    assert parse_plans(text) == emit_cuda(module).plans


def test_kernels_wait_for_prior_grids_before_global_memory() -> None:
    """Programmatic dependent launch is only correct if a kernel waits for the grids before
    it (griddepcontrol.wait) before its first global access: the wait must come right after
    the shared-memory header, and sm_90 plans ask the runtime for PDL, older ones do not."""
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = parse(RMSNORM_G0.read_text())
    MirageTranspilePass(lift=False).apply(make_ctx(), module)
    program = emit_cuda(module)
    body = program.source.split('extern "C" __global__', 1)[1].split(") {", 1)[1]
    statements = [line.strip() for line in body.splitlines() if line.strip()]
    assert statements[:4] == [
        "extern __shared__ __align__(128) unsigned char smem[];",
        "const int tid = threadIdx.x;",
        "if (tid < 4) reinterpret_cast<int*>(smem)[tid] = 0;  // zeroed 16-byte header",
        "mx::wait_for_prior_grids();  // PDL: nothing global is touched before the previous grid is done",
    ]
    assert all(step.pdl for step in program.plans["graph_0"].steps)
    assert not any(step.pdl for step in emit_cuda(module, arch="sm_80").plans["graph_0"].steps)


EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"


def _rmsnorm_example(weight: bool) -> CudaProgram:
    """examples/rmsnorm_linear.mlir (W marked kn.weight), or with the mark removed, lowered by
    the default pipeline with the split-K plans enumerated (the benchmark's `c0x`)."""
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    text = (EXAMPLES_DIR / "rmsnorm_linear.mlir").read_text()
    assert ", kn.weight}" in text
    module = parse(text if weight else text.replace(", kn.weight}", "}"))
    MirageTranspilePass(lift=False, tuning="always_split=true").apply(make_ctx(), module)
    return emit_cuda(module)


def test_weight_prologue_loads_go_before_the_dependency_wait() -> None:
    """With W marked kn.weight, the ring prologue's cp.async loads of W (and only those) are
    issued before griddepcontrol.wait, the kernel triggers its dependents right before that wait
    and its launch is one_wave; X is still loaded after the wait (codegen/weight_prefetch.py)."""
    program = _rmsnorm_example(weight=True)
    body = program.source.split('extern "C" __global__', 1)[1].split(") {", 1)[1]
    head, rest = body.split("mx::wait_for_prior_grids();", 1)
    prologue, loop = rest.split("for (int it = 0;", 1)
    assert "g2s_async" in head and "i1 + " in head and "i0 + " not in head and "i0," not in head
    assert "i0 + " in prologue and "cp_async_commit" in prologue and "cp_async_commit" not in head
    assert head.rstrip().splitlines()[-1].lstrip().startswith("mx::allow_dependent_launch();")
    assert "allow_dependent_launch" not in rest
    assert [step.one_wave for step in program.plans["rmsnorm_linear"].steps] == [True]


def test_kernels_without_weights_keep_the_wait_first() -> None:
    program = _rmsnorm_example(weight=False)
    body = program.source.split('extern "C" __global__', 1)[1]
    before_wait = body.split("mx::wait_for_prior_grids();", 1)[0]
    assert "g2s_async" not in before_wait
    assert "allow_dependent_launch" not in program.source
    assert [step.one_wave for step in program.plans["rmsnorm_linear"].steps] == [False]


def test_weight_attribute_must_be_a_unit_attribute() -> None:
    from xdsl.utils.exceptions import VerifyException

    from mirage_xdsl.dialects.kn import is_weight, weight_inputs

    text = (EXAMPLES_DIR / "rmsnorm_linear.mlir").read_text()
    fn = next(op for op in parse(text).walk() if isinstance(op, FuncOp))
    assert weight_inputs(fn) == frozenset({1})
    x, w = fn.body.block.args
    assert is_weight(w) and not is_weight(x) and not is_weight(None)
    assert not any(is_weight(r) for op in fn.body.block.ops for r in op.results)
    bad = next(op for op in parse(text.replace("kn.weight}", "kn.weight = 1 : i64}")).walk() if isinstance(op, FuncOp))
    with pytest.raises(VerifyException, match=r"argument 1 of @rmsnorm_linear: kn.weight is a unit attribute"):
        weight_inputs(bad)


def test_one_wave_launch_plans_round_trip_through_json() -> None:
    plan = _rmsnorm_example(weight=True).plans["rmsnorm_linear"]
    assert LaunchPlan.from_json(plan.to_json()) == plan
    raw = json.loads(plan.to_json())
    del raw["steps"][0]["one_wave"]  # plans saved before the field load with it off
    assert LaunchPlan.from_json(json.dumps(raw)).steps[0].one_wave is False  # type: ignore[union-attr]


def test_smem_limit_of_older_arch() -> None:
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = parse(RMSNORM_G0.read_text())
    MirageTranspilePass(lift=False).apply(make_ctx(), module)
    kernel = next(op for op in module.walk() if isinstance(op, cute.KernelOp))
    kernel.properties["smem_size"] = IntegerAttr(120000, i64)
    with pytest.raises(DiagnosticException, match="more than sm_86's 101376 B"):
        emit_cuda(module, arch="sm_86")


def test_fma_fallback_compiles() -> None:
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = parse(RMSNORM_G0.read_text())
    MirageTranspilePass(lift=False, to_cute=False).apply(make_ctx(), module)
    ConvertTbToCutePass(tensor_cores=False).apply(make_ctx(), module)
    CuteDecisionsPass().apply(make_ctx(), module)
    (init,) = [op for op in module.walk() if isinstance(op, cute.MmaInitOp)]
    assert init.result.type.mma.atom_name == "UniversalFMA"  # type: ignore[attr-defined]
    program = emit_cuda(module)
    assert "mx::fma_run<128" in program.source
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    out = nvcc_compile(program.source, nvcc)
    assert out["rc"] == 0 and "warning" not in out["stderr"].lower(), out["stderr"][:3000]


# ---------------------------------------------------------------------------------------
# Numerics without a GPU: host emulation of the generated kernels


EMULATED = [
    ("rmsnorm_bs1", "graph_0", 0.5),
    ("gated_mlp", "graph_2", 0.5),
    ("lora", "graph_0", 0.5),
    ("lora", "graph_3", 0.5),
    ("gqa_bs1", "graph_0", 0.1),
]
"""(file, candidate, input scale).  Attention inputs are small: the programs keep the
softmax sums in fp16, which overflows for large logits (as in Mirage)."""


def emulation_cases() -> list[tuple[str, str, float]]:
    if os.environ.get("MIRAGE_XDSL_EMULATE_ALL") != "1":
        return EMULATED
    from mirage_xdsl.frontends.mugraph_import import load_mugraph_file

    cases = []
    for p in MUGRAPH_FILES:
        scale = 0.1 if p.stem.startswith("gqa") else 0.5
        for fn in load_mugraph_file(p).body.block.ops:
            cases.append((p.stem, fn.sym_name.data, scale))  # type: ignore[attr-defined]
    return cases


def have_cxx() -> bool:
    from mirage_xdsl.runtime.host_emulator import find_cxx

    return find_cxx() is not None


def reference_outputs(stem: str, func_name: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from mirage_xdsl.frontends.mugraph_import import load_mugraph_file
    from mirage_xdsl.reference.executor import run_reference

    module = load_mugraph_file(MUGRAPHS / f"{stem}.json")
    fn = next(op for op in module.body.block.ops if op.sym_name.data == func_name)  # type: ignore[attr-defined]
    return run_reference(ModuleOp([fn.clone()]), [x.astype(np.float64) for x in inputs])


@pytest.mark.parametrize(("stem", "func_name", "scale"), emulation_cases())
def test_host_emulation_matches_reference(
    shared_results: dict[str, FileResult], stem: str, func_name: str, scale: float
) -> None:
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    res = shared_results[stem]
    if func_name in res.skipped:
        pytest.skip(res.skipped[func_name])
    assert res.module is not None
    fn = next(op for op in res.module.body.block.ops if op.sym_name.data == func_name)  # type: ignore[attr-defined]
    program = emit_cuda(ModuleOp([fn.clone()]))
    plan = program.plans[func_name]
    rng = np.random.default_rng(7)
    inputs = [rng.uniform(-scale, scale, size=s.shape).astype(np.float16) for s in plan.inputs]
    outputs = HostEmulator(program).run(func_name, inputs)
    refs = reference_outputs(stem, func_name, inputs)
    for out, ref in zip(outputs, refs):
        assert not np.isnan(out).any(), "NaN in the output: unwritten or poisoned values were read"
        err = np.abs(out.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-6)
        assert err < 1e-2, f"{stem}:{func_name}: max error {err:.3g} relative to max |ref|"


def test_host_emulation_fma_fallback() -> None:
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    source = RMSNORM_G0.read_text()
    module = parse(source)
    MirageTranspilePass(lift=False, to_cute=False).apply(make_ctx(), module)
    ConvertTbToCutePass(tensor_cores=False).apply(make_ctx(), module)
    CuteDecisionsPass().apply(make_ctx(), module)
    program = emit_cuda(module)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 4096)).astype(np.float16)
    w = rng.uniform(-1, 1, (4096, 6144)).astype(np.float16)
    (out,) = HostEmulator(program).run("graph_0", [x, w])
    (ref,) = run_reference(parse(source), [x.astype(np.float64), w.astype(np.float64)])
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-2


# ---------------------------------------------------------------------------------------
# Synthetic graphs: the ops no shared file uses (emulated numerics)


def graph_misc_ops() -> ModuleOp:
    """sub/clamp/gelu/mul_scalar chain into nored, concat + sum_todimx, max of sigmoid, rms of
    relu, post-loop add, tb.rms_norm and pow."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("misc")
    X = g.new_input(dims=(64, 256), dtype="float16")
    Y = g.new_input(dims=(64, 256), dtype="float16")
    tb = new_threadblock_graph(grid_dim=(4, 1, 1), forloop_range=4)
    a = tb.new_input(X, input_map=(0, -1, -1), forloop_dim=1)
    b = tb.new_input(Y, input_map=(0, -1, -1), forloop_dim=1)
    acc1 = tb.forloop_accum(tb.mul_scalar(tb.gelu(tb.clamp(tb.sub(a, b), -0.5, 0.7)), 0.5))
    acc2 = tb.forloop_accum(tb.concat(a, b, 1), "sum_todimx")
    acc3 = tb.forloop_accum_max(tb.sigmoid(a))
    acc4 = tb.forloop_accum(tb.relu(b), "rms")
    tb.new_output(tb.add(acc1, acc2), output_map=(0, -1, -1))
    tb.new_output(tb.rms_norm(acc3), output_map=(0, -1, -1))
    tb.new_output(tb.pow(acc3, acc4), output_map=(0, -1, -1))
    for out in g.customized([X, Y], tb):
        g.mark_output(out)
    return g.module


def graph_online_softmax() -> ModuleOp:
    """Flash-attention style: running reduction_max, exp(s - m), rescale accumulators."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("osm")
    Q = g.new_input(dims=(2, 64, 64), dtype="float16")
    K = g.new_input(dims=(2, 64, 512), dtype="float16")
    V = g.new_input(dims=(2, 512, 64), dtype="float16")
    tb = new_threadblock_graph(grid_dim=(2, 4, 1), forloop_range=4)
    q = tb.new_input(Q, input_map=(0, 1, -1), forloop_dim=-1)
    k = tb.new_input(K, input_map=(0, -1, -1), forloop_dim=2)
    v = tb.new_input(V, input_map=(0, -1, -1), forloop_dim=1)
    s = tb.matmul(q, k)
    m, delta = tb.reduction_max(s, 2)
    e = tb.exp(tb.sub(s, m))
    r = tb.exp(delta)
    total = tb.forloop_accum_rescale(e, r, "sum")
    o = tb.forloop_accum_rescale(tb.matmul(e, v), r)
    tb.new_output(tb.div(o, total), output_map=(0, 1, -1))
    (out,) = g.customized([Q, K, V], tb)
    g.mark_output(out)
    return g.module


def graph_fp32_fma() -> ModuleOp:
    """fp32 operands (UniversalFMA), an exp epilogue on the matmul, and kernel-level silu +
    strided reduction library steps over the workspace."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("f32mm")
    X = g.new_input(dims=(24, 96), dtype="float32")
    W = g.new_input(dims=(96, 40), dtype="float32")
    tb = new_threadblock_graph(grid_dim=(2, 1, 1), forloop_range=3)
    x = tb.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    w = tb.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    tb.new_output(tb.forloop_accum(tb.exp(tb.matmul(x, w))), output_map=(1, -1, -1))
    (out,) = g.customized([X, W], tb)
    g.mark_output(g.reduction(g.silu(out), 1, 4))
    return g.module


def graph_odd_matmul() -> ModuleOp:
    """M = 20, N = 12, K = 40 per block: nothing divides the 16x8x16 atom."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("odd")
    X = g.new_input(dims=(20, 120), dtype="float16")
    W = g.new_input(dims=(120, 36), dtype="float16")
    tb = new_threadblock_graph(grid_dim=(3, 1, 1), forloop_range=3)
    x = tb.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    w = tb.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    tb.new_output(tb.silu(tb.forloop_accum(tb.matmul(x, w))), output_map=(1, -1, -1))
    (out,) = g.customized([X, W], tb)
    g.mark_output(out)
    return g.module


SYNTHETIC = {
    "misc": (graph_misc_ops, 0.05, 0.5),
    "osm": (graph_online_softmax, -0.5, 0.5),
    "f32mm": (graph_fp32_fma, -0.5, 0.5),
    "odd": (graph_odd_matmul, -0.5, 0.5),
}


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_synthetic_graph_emulated(name: str) -> None:
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    build, lo, hi = SYNTHETIC[name]
    module = build()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    program = emit_cuda(lowered)
    plan = program.plans[name]
    rng = np.random.default_rng(1)
    inputs = [rng.uniform(lo, hi, size=s.shape).astype(s.dtype) for s in plan.inputs]
    outputs = HostEmulator(program).run(name, inputs)
    refs = run_reference(module, [x.astype(np.float64) for x in inputs])
    assert len(outputs) == len(refs)
    for out, ref in zip(outputs, refs):
        assert not np.isnan(out).any()
        err = np.abs(out.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-6)
        assert err < 1e-2, f"{name}: max error {err:.3g}"


def looped_matmul_graph(name: str, n: int, forloop_range: int) -> ModuleOp:
    """X [16, 256] @ W [256, n]: two blocks over W's columns, a for-loop over K."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph(name)
    X = g.new_input(dims=(16, 256), dtype="float16")
    W = g.new_input(dims=(256, n), dtype="float16")
    tb = new_threadblock_graph(grid_dim=(2, 1, 1), forloop_range=forloop_range)
    x = tb.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    w = tb.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    tb.new_output(tb.forloop_accum(tb.matmul(x, w)), output_map=(1, -1, -1))
    (out,) = g.customized([X, W], tb)
    g.mark_output(out)
    return g.module


def graph_deep_pipeline() -> ModuleOp:
    """A matmul over 8 iterations: both inputs cp.async pipelined, several stages deep."""
    return looped_matmul_graph("deep", 64, 8)


@pytest.mark.parametrize("stages", [2, 3, 5, 8])
def test_pipeline_stages_emulated(stages: int) -> None:
    """Forced pipeline depths give the same numbers; a cp.async wait one group too weak reads
    a buffer whose copy has not landed (the emulator lands copies only at the wait), so the
    emulation sees the poisoned shared memory."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    import dataclasses
    import re

    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    module = graph_deep_pipeline()
    lowered = module.clone()
    MirageTranspilePass(lift=False, tuning=f"stages={stages}").apply(make_ctx(), lowered)
    program = emit_cuda(lowered)
    assert f"mx::cp_async_wait<{stages - 1}>();" in program.source
    assert program.source.count("mx::cp_async_commit();") == stages  # prologue N-1 + the loop's
    rng = np.random.default_rng(3)
    inputs = [rng.uniform(-0.5, 0.5, size=s.shape).astype(s.dtype) for s in program.plans["deep"].inputs]
    (ref,) = run_reference(module, [x.astype(np.float64) for x in inputs])
    (out,) = HostEmulator(program).run("deep", inputs)
    assert np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2
    weak = re.sub(r"cp_async_wait<(\d+)>", lambda m: f"cp_async_wait<{int(m.group(1)) + 1}>", program.source)
    (bad,) = HostEmulator(dataclasses.replace(program, source=weak)).run("deep", inputs)
    assert np.isnan(bad).any() or np.abs(bad.astype(np.float64) - ref).max() / np.abs(ref).max() > 1e-2


def test_synthetic_graphs_compile() -> None:
    """The synthetic graphs (and a bf16 variant of the odd matmul) in one nvcc run."""
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    funcs = []
    for build, _, _ in SYNTHETIC.values():
        module = build()
        MirageTranspilePass(lift=False).apply(make_ctx(), module)
        funcs += [op.clone() for op in module.body.block.ops]
    bf = graph_odd_matmul()
    text = str(bf).replace("f16", "bf16").replace("@odd", "@odd_bf16")
    bf = parse(text)
    MirageTranspilePass(lift=False).apply(make_ctx(), bf)
    funcs += [op.clone() for op in bf.body.block.ops]
    program = emit_cuda(ModuleOp(funcs))
    assert "SM80_16x8x16_F32BF16BF16F32_TN" in program.source
    assert "mx::reduce_max_running<" in program.source and "mx::fma_run<" in program.source
    out = nvcc_compile(program.source, nvcc)
    assert out["rc"] == 0 and "warning" not in out["stderr"].lower(), out["stderr"][:3000]


def graph_bf16_kernel_and_library() -> ModuleOp:
    """bf16 (how a data_type-941 muGraph file imports by default): a kernel-level matmul and
    exp next to a customized op (mha_bs1-style), so both kernels and kernel-level steps run."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("bf")
    X = g.new_input(dims=(2, 16, 64), dtype="bfloat16")
    W = g.new_input(dims=(2, 64, 32), dtype="bfloat16")
    E = g.exp(g.matmul(X, W))
    tb = new_threadblock_graph(grid_dim=(2, 2, 1), forloop_range=2)
    e = tb.new_input(E, input_map=(0, 1, -1), forloop_dim=2)
    tb.new_output(tb.forloop_accum(e, "sum"), output_map=(0, 1, -1))
    (out,) = g.customized([E], tb)
    g.mark_output(out)
    g.mark_output(E)
    return g.module


def test_host_emulation_bfloat16() -> None:
    """The host emulator stores bfloat16 as uint16 bits (numpy has no bf16): it used to raise
    KeyError('bfloat16') for every bf16 plan (e.g. era-B muGraph files imported as era C)."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator
    from mirage_xdsl.runtime.library_ops import load, store

    module = graph_bf16_kernel_and_library()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    program = emit_cuda(lowered)
    plan = program.plans["bf"]
    assert [s.dtype for s in plan.inputs] == ["bfloat16", "bfloat16"]
    rng = np.random.default_rng(5)
    inputs = [rng.uniform(-0.5, 0.5, size=s.shape).astype(np.float32) for s in plan.inputs]
    rounded = []
    for x in inputs:  # the values the emulator actually sees
        bits = np.empty(x.shape, np.uint16)
        store(bits, x, "bfloat16", np)
        rounded.append(load(bits, "bfloat16", np).astype(np.float64))
    outputs = HostEmulator(program).run("bf", inputs)
    refs = run_reference(module, rounded)
    assert [o.dtype for o in outputs] == [np.float32, np.float32]
    for out, ref in zip(outputs, refs):
        assert out.shape == ref.shape and not np.isnan(out).any()
        err = np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max()
        assert err < 2e-2, f"max error {err:.3g}"  # bf16: 8-bit mantissa


# ---------------------------------------------------------------------------------------
# Numerics on a GPU


GPU_CASES = [(p.stem, idx) for p in MUGRAPH_FILES for idx in (0, 1)]


@pytest.mark.gpu
@pytest.mark.parametrize(("stem", "index"), GPU_CASES)
def test_gpu_matches_reference(shared_results: dict[str, FileResult], stem: str, index: int) -> None:
    import cupy

    from mirage_xdsl.driver.compile import compile as compile_graph

    res = shared_results[stem]
    assert res.module is not None
    funcs = [op for op in res.module.body.block.ops if isinstance(op, FuncOp)]
    if index >= len(funcs):
        pytest.skip("no such candidate")
    name = funcs[index].sym_name.data
    graph = compile_graph(ModuleOp([funcs[index].clone()]), name, poison_outputs=True)
    scale = 0.1 if stem.startswith("gqa") else 0.5
    rng = np.random.default_rng(11)
    inputs = [rng.uniform(-scale, scale, size=s.shape).astype(np.float16) for s in graph.plan.inputs]
    outs = graph(*[cupy.asarray(x) for x in inputs])
    refs = reference_outputs(stem, name, inputs)
    for out, ref in zip(outs, refs):
        got = cupy.asnumpy(out).astype(np.float64)
        assert not np.isnan(got).any()
        err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-6)
        assert err < 1e-2, f"{stem}:{name}: max error {err:.3g}"


def assert_emulation_matches(module: ModuleOp, program: CudaProgram, name: str, scale: float, seed: int) -> None:
    """The host-emulated `program` computes `module`'s function `name` on fresh fp16 inputs
    uniform(-scale, scale): no NaN (nothing unwritten read) and relative error < 1e-2."""
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-scale, scale, size=s.shape).astype(np.float16) for s in program.plans[name].inputs]
    (ref,) = run_reference(module, [x.astype(np.float64) for x in inputs])
    (out,) = HostEmulator(program).run(name, inputs)
    assert not np.isnan(out).any()
    assert np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2


def graph_sliced_k() -> ModuleOp:
    """16-column blocks: a (1, 2) thr_layout in a block of four warps, so the two idle warps
    take half of every call's k-steps (sliced K)."""
    return looped_matmul_graph("sliced", 32, 4)


def test_sliced_k_emulated() -> None:
    """Sliced K: the accumulator is declared with 2 slices, the launch adds the partial-sum
    scratch to the plan's shared memory, and the emulated numbers match the reference."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = graph_sliced_k()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    kernel = next(op for op in lowered.walk() if isinstance(op, cute.KernelOp))
    slicing = kernel_resources.mma_slicing(kernel)
    assert list(slicing.slices.values()) == [2]
    assert slicing.total == 1 * 2 * 32 * 4 * 4  # one extra slice of two warps, 4 floats per lane
    program = emit_cuda(lowered)
    assert ", 2> f0;" in program.source and "K sliced over 2 warp groups" in program.source
    (step,) = program.plans["sliced"].steps
    assert isinstance(step, KernelLaunch) and step.smem_bytes == slicing.base + slicing.total > kernel.smem_bytes
    assert_emulation_matches(module, program, "sliced", scale=0.5, seed=5)


def test_register_accumulator(shared_results: dict[str, FileResult]) -> None:
    """rmsnorm_bs1 graph 0 (Mirage's red_ld_rms): the sum-of-squares tile is filled, updated
    by one elementwise add per iteration and read after the loop, so it lives in registers
    and is stored once after the loop.  (test_host_emulation_matches_reference emulates this
    candidate, so its numbers are checked there.)"""
    res = shared_results["rmsnorm_bs1"]
    assert res.module is not None
    fn = next(op for op in res.module.body.block.ops if op.sym_name.data == "graph_0")  # type: ignore[attr-defined]
    program = emit_cuda(ModuleOp([fn.clone()]))
    kernel = next(op for op in res.module.walk() if isinstance(op, cute.KernelOp) and op.kernel_name.data == "graph_0_k0")
    accs = register_accumulators(kernel)
    assert list(accs.values()) == [-(-2 * 128 // 128)]  # a [2, 128] fp32 tile: 2 registers per thread
    src = program.source
    assert src.count("mx::RegTile<") == 1 and src.count("mx::elementwise_reg<") == 1
    assert src.index("mx::reg_store<") > src.index("for (int it")  # stored once, after the loop


def test_register_accumulator_shares_the_ring_after_the_loop() -> None:
    """tb-schedule marks rms_norm's fp32 sum-of-squares accumulator `tb.accum_in_reg`, so
    tb-plan-smem gives its [16,64] tile (4 KiB) shared memory only after the loop, inside
    the space of the cp.async rings; the fill carries `cute.accum_in_reg` and the printer
    keeps the tile in registers, storing it once after the loop.  A marked fill the printer
    cannot keep in registers is an error, not a silent overlap."""
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    text = (Path(__file__).resolve().parents[1] / "examples" / "rmsnorm_linear_bs8.mlir").read_text()
    lowered = Parser(make_ctx(), text).parse_module()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    kernel = next(op for op in lowered.walk() if isinstance(op, cute.KernelOp))
    marked = [op for op in kernel.walk() if isinstance(op, cute.FillOp) and cute.ACCUM_IN_REG in op.attributes]
    assert len(marked) == 1
    acc = marked[0].dst
    assert register_accumulators(kernel) == {acc: 16 * 64 // 128}
    rings = [
        op for op in kernel.walk() if isinstance(op, cute.SmemAllocOp) and op.num_buffers > 1
    ]
    ring_end = max(op.byte_offsets[-1] + (op.byte_offsets[1] - op.byte_offsets[0]) for op in rings)
    (offset,) = acc.owner.byte_offsets  # type: ignore[union-attr]
    assert offset + 16 * 64 * 4 <= ring_end  # the tile lies inside the rings' space
    source = emit_cuda(lowered).source
    assert source.count("mx::RegTile<8>") == 1 and source.index("mx::reg_store<") > source.index("for (int it")
    marked[0].properties["value"] = FloatAttr(1.0, f64)  # no longer a cleared accumulator
    with pytest.raises(DiagnosticException, match="planned in registers"):
        register_accumulators(kernel)
    del marked[0].attributes[cute.REG_ACCUM]  # a printer given a marked fill cute-register-accumulators did not keep
    with pytest.raises(kernel_resources.CudaEmitError, match="planned in registers"):
        kernel_resources.register_accumulators(kernel)


def test_wide_block_emulated() -> None:
    """nTrans (8 rows, one block each, no matmul) gets 512-thread blocks and block-wide row
    sums; the emulated kernel matches the reference."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    text = (Path(__file__).resolve().parents[1] / "examples" / "ntrans.mlir").read_text()
    module = Parser(make_ctx(), text).parse_module()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    program = emit_cuda(lowered)
    (step,) = program.plans["ntrans"].steps
    assert isinstance(step, KernelLaunch) and step.block == (512, 1, 1)
    # one row sum per block: the whole block reduces it, warps meet in the appended scratch
    # (in the register-resident row chain, passes/cute/row_chains.py)
    assert program.source.count("mx::block_sum<512>(") == 2
    kernel = next(op for op in lowered.walk() if isinstance(op, cute.KernelOp))
    # the chain keeps every tile in registers: the launch asks for the header and the
    # scratch (cute.row_chain_smem), not tb-plan-smem's whole plan
    live = kernel.attributes[ROW_CHAIN_SMEM]
    assert isinstance(live, IntegerAttr) and live.value.data < kernel.smem_bytes
    assert step.smem_bytes == live.value.data + 512 // 32 * 4
    assert_emulation_matches(module, program, "ntrans", scale=1.0, seed=4)


# ---------------------------------------------------------------------------------------
# Split-K combined inside the kernel (tb.grid_sum)


def emulate_split_k_rms_twice(module: ModuleOp, program: CudaProgram, seed: int) -> None:
    """Two host-emulated runs of split_k_rms in a row on fresh inputs match the reference of
    `module`, and each leaves the counter buffer zero (re-armed for the next launch)."""
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    plan = program.plans["split_k_rms"]
    emu = HostEmulator(program)
    rng = np.random.default_rng(seed)
    for _ in range(2):
        inputs = [rng.uniform(-1, 1, size=s.shape).astype(np.float16) for s in plan.inputs]
        (ref,) = run_reference(module, [x.astype(np.float64) for x in inputs])
        (out,) = emu.run("split_k_rms", inputs)
        assert not np.isnan(out).any()
        assert np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2
        assert not emu.counters["split_k_rms"].any()  # re-armed for the next launch


@pytest.mark.parametrize("reduce_partials", [False, True])
def test_grid_sum_emulated(reduce_partials: bool) -> None:
    """A split-K rms_norm(X) @ W kernel whose four split blocks per column tile meet in a grid
    sum: the plan passes the workspace scratch and one arrival counter per group, the last
    block stores, and two runs in a row (the counters must be re-armed by the first) match
    the reference.  With `reduce_partials` the sum of squares is reduced to [2, 1] before
    the grid sum, in fp32, so each block's partials shrink."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    text = (Path(__file__).parent / "data" / "split_k_grid_sum.mlir").read_text()
    module = Parser(make_ctx(), text).parse_module()
    lowered = module.clone()
    # equal splits (late_finisher=0): the last block to arrive sums (the late finisher's
    # protocol has its own tests)
    MirageTranspilePass(lift=False, tuning=f"reduce_partials={reduce_partials},late_finisher=0").apply(make_ctx(), lowered)
    (grid_sum,) = [op for op in lowered.walk() if isinstance(op, cute.GridSumOp)]
    assert len(grid_sum.ins) == 2 and grid_sum.grid_axis == 1
    partial_shapes = sorted(tuple(v.type.get_shape()) for v in grid_sum.ins)
    assert all(v.type.element_type == f32 for v in grid_sum.ins)
    program = emit_cuda(lowered)
    # the last block drops its group's partials from L2 after its last use of them (the
    # emulator poisons the discarded lines, so a discard too early shows up as NaN below)
    discard = program.source.index("mx::grid_discard_partials<")
    assert discard > program.source.rindex("mx::grid_partial_sum")
    plan = program.plans["split_k_rms"]
    (step,) = plan.steps
    assert isinstance(step, KernelLaunch) and plan.counters == 2  # one per column tile
    assert [r.kind for r in step.args[-2:]] == ["workspace", "counters"]
    if reduce_partials:  # 8 blocks x fp32 [2, 1] + [2, 32] partials
        assert partial_shapes == [(2, 1), (2, 32)]
        assert 2 * 4 * (2 + 64) * 4 <= plan.workspace_bytes < 2 * 4 * (64 + 64) * 4
    else:  # 8 blocks x two fp32 [2, 32] partials
        assert partial_shapes == [(2, 32), (2, 32)]
        assert plan.workspace_bytes >= 2 * 4 * (64 + 64) * 4
    emulate_split_k_rms_twice(module, program, seed=3)


def split_k_rms_text(rows: int) -> str:
    """test/data/split_k_grid_sum.mlir (X [2, 256]) with X and the output widened to `rows` rows."""
    text = (Path(__file__).parent / "data" / "split_k_grid_sum.mlir").read_text()
    return re.sub(r"(?<![0-9])2x(256|32|64|1)x", rf"{rows}x\1x", text)


@pytest.mark.parametrize("rows", [2, 16])
def test_late_finisher_emulated(rows: int) -> None:
    """The split-K kernel with a late finisher (mirage-transpile's default `late_finisher=1`): partners
    run 1 of the 8 iterations of a column tile each, the finisher 5; the plan passes only
    the counter buffer, sized for the partners' words (2 groups x 3 partners x one slot);
    two runs in a row match the reference (the finisher re-armed every word, so the second
    run waits on fresh partials) and leave the buffer zero.  With 16 rows the sum of
    squares runs on the tensor cores (mx::SquareSumMma), whose result feeds the rms."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = Parser(make_ctx(), split_k_rms_text(rows)).parse_module()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    (grid_sum,) = [op for op in lowered.walk() if isinstance(op, cute.GridSumOp)]
    assert grid_sum.partner_trip_count == 1
    slot = sum(math.prod(v.type.get_shape()) for v in grid_sum.ins)
    program = emit_cuda(lowered)
    assert ("mx::SquareSumMma<" in program.source) == (rows == 16)
    assert "grid_arrive" not in program.source and "gw0.wait(" in program.source
    plan = program.plans["split_k_rms"]
    (step,) = plan.steps
    assert isinstance(step, KernelLaunch) and plan.counters == 2 * 3 * slot
    assert [r.kind for r in step.args[-2:]] == ["input", "counters"]
    emulate_split_k_rms_twice(module, program, seed=5)


def test_late_finisher_skips_wide_splits() -> None:
    """cute-late-finisher leaves a kernel alone when its finisher would hold more than
    MAX_PARTNER_WORDS partner words per thread (rmsnorm bs8's 8-way split plans: those
    kernels spilled and ptxas emitted an illegal instruction), and takes the 4-way one."""
    from mirage_xdsl.bench.prepare import _module, _variant_module
    from mirage_xdsl.passes.cute.late_finisher import MAX_PARTNER_WORDS, partner_words_per_thread

    module = _module(str(Path(__file__).parents[1] / "examples" / "rmsnorm_linear_bs8.mlir"))
    for variant, late in (("c4s4xrf1", False), ("c0s7xrf1", True)):
        lowered = _variant_module(module, "rmsnorm_linear_bs8", variant)
        (kernel,) = [op for op in lowered.walk() if isinstance(op, cute.KernelOp)]
        (grid_sum,) = [op for op in kernel.walk() if isinstance(op, cute.GridSumOp)]
        assert (grid_sum.partner_trip_count is not None) == late
        assert (partner_words_per_thread(kernel, grid_sum) <= MAX_PARTNER_WORDS) == late


def test_late_finisher_weight_streams_without_l2_policy_by_default() -> None:
    """The evict_first L2 policy on the finisher's weight loads is opt-in (`evict_first`):
    ptxas (CUDA 13.0) gave its cp.async descriptor an odd uniform-register pair in
    rmsnorm_linear's c0s8xrf1 / c0s8xrf2 / c0s4xrf2 kernels, which fault with an illegal
    instruction on an H100 (found by mirage-tune; test_gpu_late_finisher_stage_shift_grid)."""
    from mirage_xdsl.bench.prepare import _module, _variant_module
    from mirage_xdsl.passes.cute.late_finisher import LateFinisherPass

    module = _module(str(Path(__file__).parents[1] / "examples" / "rmsnorm_linear.mlir"))
    for variant in ("c0s8xrf1", "c0s4xrf2", "c0s7xrf1"):
        lowered = _variant_module(module, "rmsnorm_linear", variant)
        assert not any(cute.L2_EVICT_FIRST in op.attributes for op in lowered.walk())
        assert "g2s_async_evict_first" not in emit_cuda(lowered).source
    lowered = _variant_module(module, "rmsnorm_linear", "c0s7x")
    for grid_sum in [op for op in lowered.walk() if isinstance(op, cute.GridSumOp)]:
        grid_sum.partner_trips = None
    LateFinisherPass(shift=1, evict_first=True).apply(make_ctx(), lowered)
    assert any(cute.L2_EVICT_FIRST in op.attributes for op in lowered.walk())


def test_late_finisher_verifier_rejects_bad_splits() -> None:
    """cute.grid_sum's partner_trips must leave the finisher work: 1 <= E < the loop's trip count."""
    from xdsl.utils.exceptions import VerifyException

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    lowered = parse(split_k_rms_text(2))
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    (grid_sum,) = [op for op in lowered.walk() if isinstance(op, cute.GridSumOp)]
    grid_sum.partner_trips = IntegerAttr(2, i64)
    with pytest.raises(VerifyException, match=r"partner_trips = 2 must lie in \[1, 2\)"):
        grid_sum.verify()


GRID_PARTIAL_SUM_CHECK = r"""
#include "mirage_xdsl/grid.cuh"
#include <cstdio>
#include <vector>
template <int N> struct Flat { static constexpr int size = N; static int off(int i) { return i; } };
template <int NT, int S, int N> int check() {
  constexpr int SLOT = N + 8;
  std::vector<float> parts(S * SLOT), out(N, -1.0f);
  for (int s = 0; s < S; ++s)
    for (int i = 0; i < N; ++i) parts[s * SLOT + i] = float((i * 7 + s * 3) % 11) - 5.0f;
  for (int tid = 0; tid < NT; ++tid) mx::grid_partial_sum<NT, S, SLOT, Flat<N>>(out.data(), parts.data(), tid);
  int bad = 0;
  for (int i = 0; i < N; ++i) {
    float want = 0.0f;
    for (int s = 0; s < S; ++s) want += parts[s * SLOT + i];
    bad += out[i] != want;
  }
  std::printf("%d %d %d %d\n", NT, S, N, bad);
  return bad;
}
int main() {
  return check<128, 8, 2>() + check<128, 4, 16>() + check<128, 8, 128>() + check<128, 4, 200>()
       + check<128, 4, 1024>() + check<128, 2, 1029>() + check<64, 3, 64 * 11 + 5>() + check<256, 4, 256 * 17>();
}
"""


def run_host_check(tmp_path: Path, source: str) -> str:
    """Build the C++ program `source` against the device library in host emulation
    (-DMX_HOST) and run it; its stdout, after asserting that it exited 0 (its count of wrong
    values).  Skips the test without a host C++ compiler."""
    from mirage_xdsl.runtime.host_emulator import INCLUDE_DIR, find_cxx

    cxx = find_cxx()
    if cxx is None:
        pytest.skip("no host C++ compiler")
    src = tmp_path / "check.cpp"
    src.write_text(source)
    exe = tmp_path / "check"
    subprocess.run([cxx, "-std=c++17", "-O1", "-DMX_HOST", "-w", f"-I{INCLUDE_DIR}", "-o", str(exe), str(src)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    return run.stdout


def test_grid_partial_sum_host(tmp_path: Path) -> None:
    """mx::grid_partial_sum adds every element's partials, for tiles of fewer elements than
    threads, whole trips (one batch, several, a remainder batch) and a partial last trip."""
    report = run_host_check(tmp_path, GRID_PARTIAL_SUM_CHECK)
    assert len(report.split("\n")) == 9  # eight cases, each reporting 0 wrong elements


GRID_DISCARD_CHECK = r"""
#include "mirage_xdsl/grid.cuh"
#include <cmath>
#include <cstdio>
#include <vector>
// Discard the group [first, first + floats) of a 128-byte-aligned buffer with a block of NT
// threads; the poisoned floats must be exactly those of the 128-byte lines wholly inside it.
template <int NT>
int check(int first, int floats) {
  std::vector<float> buf(8192 + 32, 1.0f);
  float* base = reinterpret_cast<float*>((reinterpret_cast<unsigned long long>(buf.data()) + 127) & ~127ull);
  mxh::run_block({0, 0, 0}, {NT, 1, 1}, [&] { mx::grid_discard_partials<NT>(base + first, floats, (int)threadIdx.x); });
  int bad = 0;
  for (int i = 0; i < 8192; ++i) {
    const int line = i / 32;
    const bool inside = line * 32 >= first && line * 32 + 32 <= first + floats;
    bad += std::isnan(base[i]) != inside;
  }
  std::printf("%d %d %d %d\n", NT, first, floats, bad);
  return bad;
}
int main() {
  return check<128>(0, 4160) + check<128>(1040, 1040) + check<32>(5, 3000) + check<64>(16, 20) + check<128>(96, 32);
}
"""


def test_grid_discard_partials_host(tmp_path: Path) -> None:
    """mx::grid_discard_partials drops exactly the 128-byte lines wholly inside a group's slots
    (poisoned with NaN on the host): none at the group's unaligned edges, which it shares with
    its neighbours, none outside, and every line for blocks of any width."""
    report = run_host_check(tmp_path, GRID_DISCARD_CHECK)
    assert len(report.split("\n")) == 6  # five cases, each reporting 0 wrong floats


def fused_and_lowered(text: str, ranks: int) -> Iterator[tuple[int, ModuleOp, ModuleOp]]:
    """(rank, the plain graph `text` fused with kn-fuse's plan of that cost rank, the same
    after mirage-transpile) for ranks 0 .. ranks-1."""
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass, fuse_plain_graphs

    for rank in range(ranks):
        module = Parser(make_ctx(), text).parse_module()
        fuse_plain_graphs(make_ctx(), module, candidate=rank)
        lowered = module.clone()
        MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
        yield rank, module, lowered


def test_planned_grid_sum_emulated() -> None:
    """kn-fuse's grid-sum plans of a small rms_norm(X) @ W compute the plain graph."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    text = """
    func.func @small(%X: tensor<2x1024xf16>, %W: tensor<1024x256xf16>) -> tensor<2x256xf16> {
      %n = kn.rms_norm %X {normalized_shape = array<i64: 1024>} : tensor<2x1024xf16>
      %o = kn.matmul %n, %W : tensor<2x1024xf16>, tensor<1024x256xf16> -> tensor<2x256xf16>
      func.return %o : tensor<2x256xf16>
    }"""
    found = 0
    for rank, module, lowered in fused_and_lowered(text, 12):
        kernels = [op for op in module.walk() if op.name == "kn.customized"]
        if len(kernels) != 1 or not kernels[0].attributes["kn.template"].data.endswith("_grid_sum"):  # type: ignore[attr-defined]
            continue
        assert_emulation_matches(module, emit_cuda(lowered), "small", scale=0.5, seed=rank)
        found += 1
        if found == 2:
            break
    assert found == 2


# ---------------------------------------------------------------------------------------
# Matmul -> exp -> matmul with P kept in registers (cute.mma_chain)

REGISTER_CHAIN = Path(__file__).parent / "filecheck" / "codegen" / "register-chain.mlir"


@pytest.mark.parametrize(("rows", "dtype", "warps"), [(16, "f16", (1, 4)), (16, "bf16", (1, 4)), (32, "f16", (2, 2)), (64, "f16", (4, 1))])
def test_register_chain_emulated(rows: int, dtype: str, warps: tuple[int, int]) -> None:
    """Attention with 16, 32 or 64 query rows per block: one cute.mma_chain per iteration (no
    shared P tile, no barrier between the two products), a warp row per 16 query rows and
    the other warps splitting the keys of P @ V, and the emulated kernel computes the
    reference (bf16: P rounded to bf16 like the shared tile it replaces)."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    from xdsl.parser import Parser

    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.host_emulator import HostEmulator

    text = REGISTER_CHAIN.read_text().replace("f16", dtype).replace("x16x", f"x{rows}x")
    module = Parser(make_ctx(), text).parse_module()
    lowered = module.clone()
    MirageTranspilePass(lift=False).apply(make_ctx(), lowered)
    (loop,) = [op for op in lowered.walk() if isinstance(op, cute.ForOp)]
    names = [op.name for op in loop.body.block.ops]
    assert names.count("cute.mma_chain") == 1 and "cute.mma" not in names
    (chain,) = [op for op in loop.body.block.ops if isinstance(op, cute.MmaChainOp)]
    assert chain.sum.type.mma.tg == warps  # type: ignore[attr-defined]
    assert names.count("cute.barrier") == 2  # after the loads, at the end of the iteration
    assert not any(isinstance(op, cute.SmemAllocOp) and not op.result.uses for op in lowered.walk())
    program = emit_cuda(lowered)
    rng = np.random.default_rng(5)
    inputs = [rng.uniform(-0.3, 0.3, size=s.shape).astype(np.float32) for s in program.plans["attn"].inputs]
    (ref,) = run_reference(module, [x.astype(np.float64) for x in inputs])
    (out,) = HostEmulator(program).run("attn", [x.astype(np.float16) for x in inputs] if dtype == "f16" else inputs)
    assert not np.isnan(out).any()
    assert np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2


def test_planned_register_chains_emulated() -> None:
    """kn-fuse's attention plans of a small GQA graph that lower to cute.mma_chain (its warps
    own 16 keys each) compute the plain graph; plans that do not fit the pattern keep the
    shared P tile."""
    if not have_cxx():
        pytest.skip("no host C++ compiler")
    text = """
    func.func @gqa(%Q: tensor<2x32x64xf16>, %K: tensor<2x64x512xf16>, %V: tensor<2x512x64xf16>) -> tensor<2x32x64xf16> {
      %s = kn.matmul %Q, %K : tensor<2x32x64xf16>, tensor<2x64x512xf16> -> tensor<2x32x512xf16>
      %e = kn.exp %s : tensor<2x32x512xf16>
      %z = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<2x32x512xf16> -> tensor<2x32x1xf16>
      %p = kn.div %e, %z : tensor<2x32x512xf16>, tensor<2x32x1xf16> -> tensor<2x32x512xf16>
      %o = kn.matmul %p, %V : tensor<2x32x512xf16>, tensor<2x512x64xf16> -> tensor<2x32x64xf16>
      func.return %o : tensor<2x32x64xf16>
    }"""
    found = 0
    for rank, module, lowered in fused_and_lowered(text, 8):
        if not any(isinstance(op, cute.MmaChainOp) for op in lowered.walk()):
            continue
        assert_emulation_matches(module, emit_cuda(lowered), "gqa", scale=0.3, seed=rank)
        found += 1
    assert found >= 1
