"""The fuzzer's GPU families: GEMM (bench/fuzz_gemms.py: kn graphs the default pipeline gives
the sm_90a GEMM, `mx.einsum` contractions with random schedule options) and attention
(bench/fuzz_attention.py: the flash and decode kernels, forced or chosen).  On the CPU: the
draws are reproducible, valid and lower as drawn; on the GPU: a few graphs match the reference."""

from __future__ import annotations

import random
import shutil

import pytest
from conftest import run_tool

from mirage_xdsl.bench import fuzz_gemms
from mirage_xdsl.bench.fuzz import case_of
from mirage_xdsl.bench.fuzz_check import lower_case
from mirage_xdsl.dialects.cute.decode_attention import DecodeAttentionOp
from mirage_xdsl.dialects.cute.hopper_attention import HopperAttentionOp
from mirage_xdsl.dialects.cute.hopper_gemm import HopperGemmOp


def test_gemm_family_is_reproducible_and_16_bit() -> None:
    cases = [case_of(3, i, "gemm") for i in range(24)]
    again = [case_of(3, i, "gemm") for i in range(24)]
    assert [str(c.module) for c in cases] == [str(c.module) for c in again]
    assert [c.options for c in cases] == [c.options for c in again]
    assert {c.kind for c in cases} == {"gemm", "einsum"}
    assert {c.dtype for c in cases} <= {"float16", "bfloat16"}
    assert all(c.name == f"fuzz_gemm_3_{i}" for i, c in enumerate(cases))


def test_einsum_cases_lower_with_their_schedule() -> None:
    """Every einsum case's options are ones the pass accepts: it lowers to the sm_90a GEMM,
    the drawn overrides written on the op (CTA pairs, split-K where drawn)."""
    cases = [c for c in (case_of(5, i, "gemm") for i in range(40)) if c.kind == "einsum"]
    assert len(cases) >= 10
    for case in cases:
        gemms = [op for op in lower_case(case).walk() if isinstance(op, HopperGemmOp)]
        assert len(gemms) == 1, case
        if case.options.get("cluster") == 2:
            assert gemms[0].cluster.value.data == 2
        if case.options.get("split_k", 0) > 1:
            assert gemms[0].splits == case.options["split_k"]


def test_gemm_graphs_stay_within_the_reference_budget() -> None:
    rng = random.Random(0)
    for _ in range(200):
        lead, m, n, k = fuzz_gemms._dims(rng, large=rng.random() < 0.5)
        assert m * n * k * (lead[0] if lead else 1) * (lead[1] if len(lead) > 1 else 1) <= fuzz_gemms.MAX_FLOP


def test_gemm_family_refuses_other_dtypes() -> None:
    with pytest.raises(ValueError, match="fp16 or bf16"):
        fuzz_gemms.random_gemm_graph(random.Random(0), "g", "float32")


@pytest.mark.parametrize("family", ["gemm", "attention"])
def test_gpu_families_refuse_the_emulator(family: str) -> None:
    proc = run_tool("mirage_xdsl.bench.fuzz", "--family", family, "--emulate", "--count", "1")
    assert proc.returncode == 2 and f"--family {family} needs a GPU" in proc.stderr


def test_attention_family_forces_the_kernels_it_draws() -> None:
    """Reproducible fp16 / bf16 attention graphs; a case that forces a kernel lowers to it
    (with the drawn shape or options), the others go through the default pipeline."""
    cases = [case_of(4, i, "attention") for i in range(60)]
    assert [str(c.module) for c in cases] == [str(case_of(4, i, "attention").module) for i in range(60)]
    assert {c.dtype for c in cases} <= {"float16", "bfloat16"} and all(c.kind == "attention" for c in cases)
    forced = {"flash": 0, "decode": 0}
    for case in cases:
        kernel = case.options.get("kernel")
        if kernel is None:
            continue
        forced[kernel] += 1
        low = lower_case(case)
        if kernel == "flash":
            (op,) = [o for o in low.walk() if isinstance(o, HopperAttentionOp)]
            assert (op.consumers.value.data, op.key_tile.value.data) == case.options["shape"]
        else:
            (op,) = [o for o in low.walk() if isinstance(o, DecodeAttentionOp)]
            assert (op.splits.value.data, op.warps.value.data, op.stages.value.data) == case.options["options"]
    assert forced["flash"] >= 3 and forced["decode"] >= 1, forced


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("family", ["gemm", "attention"])
def test_family_programs_compile(family: str, tmp_path: object) -> None:
    """Without a GPU (CI has nvcc): eight graphs of the family, lowered as drawn, printed as one
    translation unit and compiled by nvcc for their architecture (sm_90a for the TMA / wgmma
    kernels) -- a printer or template change that breaks one schedule fails here."""
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.nvcc import compile_cuda

    cases = [case_of(9, i, family) for i in range(8)]
    funcs = [op.clone() for case in cases for op in lower_case(case).body.block.ops]
    program = emit_cuda(ModuleOp(funcs), "sm_90")
    assert len(program.plans) == 8
    assert compile_cuda(program.source, program.arch, cache_dir=str(tmp_path)).is_file()


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["gemm", "attention"])
def test_gpu_family_matches_the_reference(family: str, tmp_path: object) -> None:
    """Twelve graphs of the family on the GPU (NaN-poisoned outputs, float64 reference)."""
    from mirage_xdsl.bench.fuzz import run_fuzz

    outcomes = run_fuzz(12, 7, batch=4, family=family, failures_dir=str(tmp_path), log=lambda line: None)
    assert len(outcomes) == 12
    bad = [f"{o.name}: {o.status} {o.reason} {o.message[:300]}" for o in outcomes if o.status in ("mismatch", "crash")]
    assert not bad, bad
