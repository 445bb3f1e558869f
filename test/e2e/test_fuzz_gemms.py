"""The fuzzer's GEMM family (bench/fuzz_gemms.py): kn graphs the default pipeline gives the
sm_90a GEMM and `mx.einsum` contractions with random schedule options.  On the CPU: the draws
are reproducible, valid and lower as drawn; on the GPU: a few graphs match the reference."""

from __future__ import annotations

import random

import pytest
from conftest import run_tool

from mirage_xdsl.bench import fuzz_gemms
from mirage_xdsl.bench.fuzz import case_of
from mirage_xdsl.bench.fuzz_check import lower_case
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


def test_gemm_family_needs_a_gpu() -> None:
    proc = run_tool("mirage_xdsl.bench.fuzz", "--family", "gemm", "--emulate", "--count", "1")
    assert proc.returncode == 2 and "--family gemm needs a GPU" in proc.stderr


@pytest.mark.gpu
def test_gpu_gemm_family_matches_the_reference(tmp_path: object) -> None:
    """Twelve graphs of the family on the GPU (NaN-poisoned outputs, float64 reference)."""
    from mirage_xdsl.bench.fuzz import run_fuzz

    outcomes = run_fuzz(12, 7, batch=4, family="gemm", failures_dir=str(tmp_path), log=lambda line: None)
    assert len(outcomes) == 12
    bad = [f"{o.name}: {o.status} {o.reason} {o.message[:300]}" for o in outcomes if o.status in ("mismatch", "crash")]
    assert not bad, bad
