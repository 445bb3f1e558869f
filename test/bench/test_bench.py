"""`mirage-bench` without a GPU: the workload table, variants, the CPU phase and its cache, the
crash isolation of the GPU phase (with a fake child), the summary arithmetic, CLI errors."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import assert_one_line_error as one_line_error
from conftest import has_gpu, run_tool

from mirage_xdsl.bench import BenchError
from mirage_xdsl.bench.gpu_phase import EnvInfo, Result, run_isolated
from mirage_xdsl.bench.peers import PeerTimes
from mirage_xdsl.bench.prepare import DEFAULT_VARIANTS, Prepared, load_prepared, parse_variant, parse_variants
from mirage_xdsl.bench.report import summarize, summary_rows, write_report
from mirage_xdsl.bench.timing import SWEEP_LAUNCHES, sweep_sets
from mirage_xdsl.bench.workloads import EXAMPLES, WORKLOADS, resolve, resolve_files, select


def run_cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return run_tool("mirage_xdsl.tools.mirage_bench", *args, timeout=timeout)


assert_one_line_error = functools.partial(one_line_error, "mirage-bench")


# ---------------------------------------------------------------------------------------
# Workloads and variants


def test_workload_table_resolves_shared_files(mugraph_dir: Path, tmp_path: Path) -> None:
    resolved = {r.name: r for r in resolve(WORKLOADS, [mugraph_dir])}
    assert list(resolved) == [w.name for w in WORKLOADS]
    assert resolved["rmsnorm_bs1"].files == (mugraph_dir / "rmsnorm_bs1.json", EXAMPLES / "rmsnorm_linear.mlir")
    assert resolved["gqa_bs8"].files == (mugraph_dir / "gqa_bs8.json", EXAMPLES / "gqa_bs8.mlir")
    for w in WORKLOADS:
        assert all(f.is_file() for f in resolved[w.name].files)
        if not w.optional and w.mugraph is not None:
            assert resolved[w.name].files[0].suffix == ".json"
    # optional muGraph files: absent from a directory, found in an extra one
    assert {r.name: r for r in resolve(select("ntrans_bs1"), [tmp_path])}["ntrans_bs1"].files == (EXAMPLES / "ntrans.mlir",)
    (tmp_path / "mha_bs1.json").write_text("[]")
    extra = {r.name: r for r in resolve(select("mha_bs1,lora"), [tmp_path, mugraph_dir], examples=False)}
    assert extra["mha_bs1"].files == (tmp_path / "mha_bs1.json",)
    assert extra["lora"].files == (mugraph_dir / "lora.json",)
    # a required file that is missing is an error
    with pytest.raises(BenchError, match="lora.json: not found"):
        resolve(select("lora"), [tmp_path])
    # --files: grouped by workload, unknown files are their own workload
    files = resolve_files(["lora.mlir", "lora.json", str(tmp_path / "mha_bs1.json")], [mugraph_dir])
    assert [(r.name, [f.name for f in r.files]) for r in files] == [
        ("lora", ["lora.mlir", "lora.json"]),
        ("mha_bs1", ["mha_bs1.json"]),
    ]
    with pytest.raises(BenchError, match="unknown workload 'nope'"):
        select("lora,nope")


def test_parse_variant() -> None:
    assert parse_variant("c0s2") == {"candidate": 0, "stages": 2, "always_split": False, "reduce_partials": False, "late_finisher": 0}
    assert parse_variant("c12s4x") == {"candidate": 12, "stages": 4, "always_split": True, "reduce_partials": False, "late_finisher": 0}
    assert parse_variant("c3s2xr") == {"candidate": 3, "stages": 2, "always_split": True, "reduce_partials": True, "late_finisher": 0}
    # without s<stages>: tb-plan-pipeline chooses the depth
    assert parse_variant("c1") == {"candidate": 1, "stages": 0, "always_split": False, "reduce_partials": False, "late_finisher": 0}
    assert parse_variant("c7xr") == {"candidate": 7, "stages": 0, "always_split": True, "reduce_partials": True, "late_finisher": 0}
    # f<shift>: a late finisher takes `shift` iterations from each split-K partner
    assert parse_variant("c0s7xrf1") == {"candidate": 0, "stages": 7, "always_split": True, "reduce_partials": True, "late_finisher": 1}
    for bad in ("s2", "c1s2y", "C1S2", "c-1s2", "c1s2rx", "c1s", "", "c0f", "c0fx"):
        with pytest.raises(BenchError, match=re.escape("expected c<rank>[s<stages>]")):
            parse_variant(bad)
    assert parse_variants(None) == list(DEFAULT_VARIANTS)
    assert parse_variants("none") is None
    assert parse_variants("c0s2x, c1s2x,c0s2x") == ["c0s2x", "c1s2x"]
    with pytest.raises(BenchError):
        parse_variants("c0s2x,oops")


# ---------------------------------------------------------------------------------------
# CPU phase and cache


@pytest.fixture(scope="module")
def lora_prepared(tmp_path_factory: pytest.TempPathFactory, mugraph_dir: Path) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    pytest.importorskip("mirage_xdsl.passes.pipeline")
    from mirage_xdsl.driver.nvcc import find_nvcc

    if find_nvcc() is None:
        pytest.skip("nvcc not found: the CPU phase cannot compile (and does not cache failures)")
    root = tmp_path_factory.mktemp("bench")
    cache, prep = root / "cache", root / "prep1"
    proc = run_cli("--prepare-only", str(prep), "--workloads", "lora", "--variants", "c0s2x,c0s3x", "--seed", "11",
                   "--cache-dir", str(cache), "--arch", "sm_90", "--jobs", "2", "--shared", str(mugraph_dir))
    return cache, prep, proc


def _cpu_seconds(stdout: str) -> float:
    m = re.search(r"CPU phase: ([\d.]+) s", stdout)
    assert m is not None, stdout
    return float(m[1])


def test_prepare_only_writes_manifest(lora_prepared: tuple[Path, Path, subprocess.CompletedProcess[str]]) -> None:
    cache, prep, proc = lora_prepared
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "builds 0 cached, 6 built; references 0 cached, 5 computed" in proc.stdout
    manifest = json.loads((prep / "manifest.json").read_text())
    assert manifest["arch"] == "sm_90" and manifest["seeds"] == {"lora": 11 + 5}
    graphs = [c["graph"] for c in manifest["candidates"]]
    assert graphs == ["graph_0", "graph_1", "graph_2", "graph_3", "lora@c0s2x", "lora@c0s3x"]
    prepared, refs, _ = load_prepared(prep)
    assert all(p.error is None and p.plan_json and Path(p.cubin).is_file() for p in prepared)
    assert {p.kind for p in prepared[:4]} == {"mugraph"} and prepared[4].kind == "plain"
    # every candidate computes the same function: one reference for the workload
    assert [p.ref_key for p in prepared] == [0] * 6 and len(refs["lora"]) == 1
    assert refs["lora"][0][0].shape == (16, 4096)
    # identical plan + cubin: timed once on the GPU
    a, b = prepared[4], prepared[5]
    same = a.plan_json == b.plan_json and Path(a.cubin).read_bytes() == Path(b.cubin).read_bytes()
    assert (b.dup_of == "lora@c0s2x") == same


def test_second_run_hits_the_cache(lora_prepared: tuple[Path, Path, subprocess.CompletedProcess[str]], mugraph_dir: Path) -> None:
    cache, prep, first = lora_prepared
    assert first.returncode == 0, first.stdout + first.stderr
    common = ["--workloads", "lora", "--variants", "c0s2x,c0s3x", "--cache-dir", str(cache), "--arch", "sm_90",
              "--jobs", "2", "--shared", str(mugraph_dir)]
    again = run_cli("--prepare-only", str(prep.parent / "prep2"), "--seed", "11", *common)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "builds 6 cached, 0 built; references 5 cached, 0 computed" in again.stdout
    assert _cpu_seconds(again.stdout) < 2.0, again.stdout
    one, two = load_prepared(prep), load_prepared(prep.parent / "prep2")
    assert [p.plan_json for p in one[0]] == [p.plan_json for p in two[0]]
    assert all(p.cached for p in two[0])
    # a new seed: builds still cached, only the references are computed again
    fresh = run_cli("--prepare-only", str(prep.parent / "prep3"), "--seed", "12", *common)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert "builds 6 cached, 0 built; references 0 cached, 5 computed" in fresh.stdout


@pytest.mark.skipif(has_gpu(), reason="tests the no-GPU path")
def test_from_without_gpu(lora_prepared: tuple[Path, Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    _, prep, first = lora_prepared
    assert first.returncode == 0, first.stdout + first.stderr
    proc = run_cli(str(tmp_path / "r.md"), "--from", str(prep), "--in-process")
    assert proc.returncode == 1 and "no GPU found" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------
# GPU phase bookkeeping with a fake child process

FAKE_CHILD = """
import json, sys
args = sys.argv[1:]
todo = [int(i) for i in args[args.index("--child-candidates") + 1].split(",") if i not in ("", "-")]
tag = "@@mirage-bench "
for i in todo:
    if i == 1:
        sys.exit(7)  # the process dies (a fault that kills it)
    res = {"workload": "w", "file": "f.json", "graph": f"graph_{i}", "kind": "mugraph", "status": "ok",
           "ours_dev_us": 10.0 + i, "bytes": 1000}
    if i in (3, 5):
        res["status"] = "error"
    print(tag + json.dumps({"result": res}), flush=True)
    if i in (3, 5):
        sys.exit(3)  # a sticky CUDA error: a new process goes on (with the peers only after the last)
print(tag + json.dumps({"peers": {"eager_us": 30.0, "graph_us": 20.0, "notes": {"torch.compile": "skipped"}}}), flush=True)
"""


def test_sweep_sets_repeat_the_sets_in_turn() -> None:
    """A timed CUDA graph runs the input sets in turn, at least SWEEP_LAUNCHES times, so the
    idle start of each replay is shared by many runs (timing.SWEEP_LAUNCHES)."""
    sets = [["a"], ["b"], ["c"]]
    runs = sweep_sets(sets, 8)
    assert runs == sets * 3
    assert len(sweep_sets(sets)) >= SWEEP_LAUNCHES
    many = [[i] for i in range(20)]
    assert sweep_sets(many, 16) == many  # one pass is enough


def test_run_isolated_restarts_after_crashes(tmp_path: Path) -> None:
    child = tmp_path / "child.py"
    child.write_text(textwrap.dedent(FAKE_CHILD))
    prepared = [Prepared("w", "f.json", f"graph_{i}") for i in range(6)]
    results, peers = run_isolated([sys.executable, str(child)], tmp_path, prepared, bench=True, atol_rel=1e-2, compile_mode=None)
    assert [(r.graph, r.status) for r in results] == [
        ("graph_0", "ok"),
        ("graph_1", "crash"),
        ("graph_2", "ok"),
        ("graph_3", "error"),
        ("graph_4", "ok"),
        ("graph_5", "error"),
    ]
    assert "exited with status 7" in (results[1].message or "")
    assert peers["w"].graph_us == 20.0 and peers["w"].notes["torch.compile"] == "skipped"


MODE_CHILD = """
import json, sys
args = sys.argv[1:]
mode = args[args.index("--compile-mode") + 1] if "--compile-mode" in args else None
tag = "@@mirage-bench "
res = {"workload": "w", "file": "f.json", "graph": "graph_0", "kind": "mugraph", "status": "ok", "ours_dev_us": 10.0}
print(tag + json.dumps({"result": res}), flush=True)
skipped = "--no-compile-peer" in args
print(tag + json.dumps({"peers": {"compile_us": None if skipped else 9.0, "compile_mode": mode}}), flush=True)
"""


@pytest.mark.parametrize("mode", ["default", None])
def test_run_isolated_forwards_the_compile_mode(tmp_path: Path, mode: str | None) -> None:
    """The torch.compile peer's mode reaches each workload's GPU process (`--compile-mode`),
    and no mode means `--no-compile-peer` there."""
    child = tmp_path / "child.py"
    child.write_text(textwrap.dedent(MODE_CHILD))
    prepared = [Prepared("w", "f.json", "graph_0")]
    _, peers = run_isolated([sys.executable, str(child)], tmp_path, prepared, bench=True, atol_rel=1e-2, compile_mode=mode)
    assert peers["w"].compile_mode == mode
    assert (peers["w"].compile_us is None) == (mode is None)


GPU_CHILD = """
import json, os, sys, time
args = sys.argv[1:]
workload = args[args.index("--child-peers") + 1]
todo = [int(i) for i in args[args.index("--child-candidates") + 1].split(",") if i not in ("", "-")]
tag = "@@mirage-bench "
start = time.time()
time.sleep(0.5)  # long enough that two workloads overlap
span = f"{os.environ.get('CUDA_VISIBLE_DEVICES')} {start} {time.time()}"
for i in todo:
    res = {"workload": workload, "file": "f.json", "graph": f"graph_{i}", "kind": "mugraph", "status": "ok",
           "ours_dev_us": 10.0, "message": span}
    print(tag + json.dumps({"result": res}), flush=True)
print(tag + json.dumps({"peers": {"graph_us": 20.0}}), flush=True)
"""


def test_run_isolated_spreads_workloads_over_gpus(tmp_path: Path) -> None:
    """`--gpus 2`: two workloads at a time, each child on one GPU of its own (its
    CUDA_VISIBLE_DEVICES), the results in workload order, each workload's peers naming the
    GPU its candidates ran on; the report lists them."""
    from mirage_xdsl.bench.report import write_report

    child = tmp_path / "child.py"
    child.write_text(textwrap.dedent(GPU_CHILD))
    prepared = [Prepared(w, "f.json", f"graph_{k}") for k, w in enumerate(["a", "a", "b", "c", "d"])]
    results, peers = run_isolated(
        [sys.executable, str(child)], tmp_path, prepared, bench=True, atol_rel=1e-2, compile_mode=None, gpus=2
    )
    assert [(r.workload, r.graph) for r in results] == [(p.workload, p.graph) for p in prepared]
    spans = {r.workload: (r.message or "").split() for r in results}
    assert all(spans[w][0] == str(t.gpu) for w, t in peers.items())  # the child ran on the GPU its peers name
    assert {t.gpu for t in peers.values()} == {0, 1}
    windows = sorted((float(a), float(b)) for _, a, b in spans.values())
    assert any(later[0] < earlier[1] for earlier, later in zip(windows, windows[1:]))  # two ran at once
    text = write_report(tmp_path / "r.md", results, peers, EnvInfo(device="GPU"), {}, 1e-2, date="d")
    assert "- GPUs: the workloads ran 2 at a time" in text


def test_gpus_must_be_positive_and_not_in_process(tmp_path: Path) -> None:
    for extra in (["--gpus", "0"], ["--gpus", "2", "--in-process"]):
        proc = run_cli(str(tmp_path / "r.md"), "--from", str(tmp_path), *extra)
        assert proc.returncode == 1 and "--gpus" in proc.stderr and "Traceback" not in proc.stderr


def test_gpus_honour_cuda_visible_devices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`CUDA_VISIBLE_DEVICES=2,3 mirage-bench --gpus 2` runs its children on GPUs 2 and 3;
    asking for more GPUs than the variable lists is a usage error before any work."""
    from mirage_xdsl.bench.gpu_phase import child_devices

    assert child_devices(2, None) == ["0", "1"]
    assert child_devices(2, "2, 3,5") == ["2", "3"]
    assert child_devices(1, "GPU-0a1b") == ["GPU-0a1b"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    proc = run_cli(str(tmp_path / "r.md"), "--from", str(tmp_path), "--gpus", "2")
    assert proc.returncode == 1 and "CUDA_VISIBLE_DEVICES='1' lists 1 GPU" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------
# Report


def test_summary_arithmetic_and_report(tmp_path: Path) -> None:
    results = [
        Result("gqa_bs1", "gqa_bs1.json", "graph_0", "mugraph", "ok", 1e-3, 40.0, 25.0, 20.0, bytes=2_200_000),
        Result("gqa_bs1", "gqa_bs1.json", "graph_1", "mugraph", "FAIL", 0.5, 9.0, 8.0, 5.0, bytes=2_200_000),
        Result("gqa_bs1", "gqa.mlir", "gqa@c1s2x", "plain", "ok", 1e-3, 30.0, 18.0, 11.0, bytes=2_200_000),
        Result("gqa_bs1", "gqa.mlir", "gqa@c0s3x", "plain", "ok", 1e-3, 30.0, 16.0, None, bytes=2_200_000),
        Result("lora", "lora.json", "graph_0", "mugraph", "error", message="boom"),
    ]
    peers = {
        "gqa_bs1": PeerTimes(eager_us=35.0, graph_us=22.0, compile_us=None, notes={"torch.compile": "RuntimeError: x"}),
        "lora": PeerTimes(notes={p: "no candidate passed" for p in ("torch eager", "torch graph", "torch.compile")}),
    }
    gqa, lora = summarize(results, peers, copy_gbs=4000.0)
    # the FAIL candidate is faster but does not count; the device time ranks (11 < 16 graph-mode)
    assert gqa.best is results[2] and gqa.best_us == 11.0
    assert gqa.best_mugraph is results[0] and gqa.best_plain is results[2]
    assert gqa.best_peer == ("torch graph", 22.0)
    assert gqa.speedup == pytest.approx(2.0)
    assert gqa.achieved_gbs == pytest.approx(2_200_000 / 11e-6 / 1e9)  # 200 GB/s
    assert gqa.copy_fraction == pytest.approx(0.05)
    assert lora.best is None and lora.speedup is None and lora.achieved_gbs is None
    rows = summary_rows([gqa, lora])
    assert rows[2] == (
        "| gqa_bs1 | 11.0 (gqa@c1s2x) | 20.0 (graph_0) | 11.0 (gqa@c1s2x) | 35.0 | 22.0 | - | 22.0 (torch graph) "
        "| 2.000x | 2.20 | 200 | 5 |"
    )
    assert rows[3].startswith("| lora | - | - | - | - | - | - | - | - | - | - | - |")
    env = EnvInfo(device="NVIDIA H200", arch="sm_90", cupy="14.0", cuda_runtime="13.0", torch="2.11", triton="3.6", copy_gbs=4000.0)
    text = write_report(tmp_path / "r.md", results, peers, env, {"gqa_bs1": 1, "lora": 5}, 1e-2, date="2026-11-22T00:00:00")
    assert (tmp_path / "r.md").read_text() == text
    for needle in ("- Device: NVIDIA H200 (sm_90)", "torch 2.11, triton 3.6", "Copy bandwidth: 4000 GB/s", rows[2],
                   "- gqa_bs1 torch.compile: RuntimeError: x", "| gqa_bs1 | gqa.mlir | gqa@c0s3x | ok |",
                   "- lora lora.json graph_0: boom", "3 of 5 candidates passed",
                   "torch.compile uses mode='max-autotune-no-cudagraphs'"):
        assert needle in text, needle
    peers["gqa_bs1"].compile_mode = "default"
    text = write_report(tmp_path / "r.md", results, peers, env, {"gqa_bs1": 1, "lora": 5}, 1e-2, date="2026-11-22T00:00:00")
    assert "torch.compile uses mode='default'" in text


# ---------------------------------------------------------------------------------------
# CLI errors


def test_cli_errors(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("--workloads", "lora,nope", "--prepare-only", str(tmp_path)), "unknown workload 'nope'")
    assert_one_line_error(run_cli("--prepare-only", str(tmp_path), "--variants", "c1y"), "variant 'c1y'")
    assert_one_line_error(run_cli(), "give the markdown report path")
    assert_one_line_error(run_cli(str(tmp_path / "r.md"), "--from", str(tmp_path / "none")), "manifest.json: no such file")
    assert_one_line_error(run_cli("--bogus"), "unrecognized arguments")


def test_script_runs_from_a_checkout(tmp_path: Path) -> None:
    """`python tools/mirage_bench.py` (the device machine's way) works without installing."""
    script = Path(__file__).resolve().parents[2] / "tools" / "mirage_bench.py"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(script), "--workloads", "nope"], capture_output=True, text=True, env=env, timeout=120)
    assert_one_line_error(proc, "unknown workload")


def test_gpu_phase_imports_no_xdsl() -> None:
    """`mirage-bench --from DIR` runs on a GPU machine that has numpy, CuPy and torch but no
    xDSL: the GPU phase and the runtime must import without it (xDSL blocked here)."""
    code = (
        "import sys; sys.modules['xdsl'] = None; sys.modules['z3'] = None; sys.modules['ortools'] = None\n"
        "import mirage_xdsl.tools.mirage_bench, mirage_xdsl.bench.gpu_phase, mirage_xdsl.runtime.executable\n"
        "import mirage_xdsl.bench.prepare, mirage_xdsl.bench.report, mirage_xdsl.target\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_megakernel_bench_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    """The megakernel bench parses its command line before it needs CuPy: a malformed
    `--trace` is exit status 2 with the expected form named, on a machine without a GPU."""
    from mirage_xdsl.bench.megakernel import main

    assert main(["decoder_layer", "--trace", "decoder_layer"]) == 2
    assert "expected NAME=PATH" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["--compile-mode", "fastest"])
    assert exit_info.value.code == 2
