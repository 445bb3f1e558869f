"""The ptxas guard (driver/ptxas_guard.py): PTX that reuses the register holding `smem`'s
address is found and rewritten so that no derived value reads the reused register, and
`compile_cuda` assembles the rewrite (or, failing that, the PTX without ptxas's optimizer);
the three fuzz graphs ptxas 13.0 miscompiled run right on the GPU."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from mirage_xdsl.driver import nvcc as compiler
from mirage_xdsl.driver.ptxas_guard import SAFE_PTXAS_OPTIONS, PtxasGuardWarning, separate_shared_addresses, smem_register_reuse

_LOOP_REUSE = """\
.extern .shared .align 128 .b8 smem[];
.visible .entry k(
)
{
\tmov.u32 \t%r427, smem;
\tadd.s32 \t%r235, %r427, 4288;
$L__BB0_27:
\tld.shared.f32 \t%f76, [%r235];
\tld.shared.f32 \t%f68, [%r427+6432];
\tadd.s32 \t%r427, %r427, 64;
\tsetp.ne.s32 \t%p22, %r427, 256;
\t@%p22 bra \t$L__BB0_27;
\tret;
}
"""

_NO_LIVE_VALUE = """\
.extern .shared .align 128 .b8 smem[];
.visible .entry k(
)
{
\tmov.u32 \t%r1, smem;
\tadd.s32 \t%r2, %r1, 4288;
\tld.shared.f32 \t%f1, [%r2];
\tsetp.gt.s32 \t%p1, %r1, 3;
\tadd.s32 \t%r1, %r5, 128;
\tld.shared.f32 \t%f2, [%r1];
\tret;
}
.visible .entry other(
)
{
\tadd.s32 \t%r1, %r3, 64;
\tld.shared.f32 \t%f1, [%r2];
\tret;
}
"""


def test_a_loop_that_reuses_the_smem_register_is_found() -> None:
    """The shape of fuzz tc seed 8 graph 423's PTX: the register set to `smem` becomes the loop's
    pointer while a tile base derived from it is read in the loop."""
    (hit,) = smem_register_reuse(_LOOP_REUSE)
    assert (hit.kernel, hit.register, hit.line, hit.redefined, hit.derived, hit.read) == ("k", "%r427", 5, 10, "%r235", 8)


def test_a_reuse_without_a_live_derived_value_is_not_a_hit() -> None:
    """%r1 is set again after its derived %r2 is last read (a predicate compare does not write
    it); in the second function %r2 is another function's register."""
    assert smem_register_reuse(_NO_LIVE_VALUE) == []


def test_any_shared_symbol_counts() -> None:
    """The sm_90a kernels' `smem_raw` (a mangled `.shared` symbol) and 64-bit registers too;
    other symbols (a `.global` table) do not."""
    ptx = """\
.extern .shared .align 16 .b8 _ZN2mx6hopper8smem_rawE[];
.global .align 4 .b8 table[16];
.visible .entry k(
)
{
\tmov.u64 \t%rd7, _ZN2mx6hopper8smem_rawE;
\tmov.u32 \t%r9, table;
\tadd.s64 \t%rd8, %rd7, 1024;
\tadd.s32 \t%r10, %r9, 8;
\tadd.s64 \t%rd7, %rd7, 64;
\tadd.s32 \t%r9, %r9, 4;
\tld.shared.f32 \t%f1, [%rd8];
\tld.global.f32 \t%f2, [%r10];
\tret;
}
"""
    assert [(h.register, h.redefined, h.derived) for h in smem_register_reuse(ptx)] == [("%rd7", 10, "%rd8")]


def test_the_rewrite_reads_a_fresh_register_where_only_the_symbol_reaches() -> None:
    """The tile base is derived from `%mx_shared0` (declared, set to `smem` after the `mov`);
    the loop's own reads of %r427 (reached by its increment too) stay; no hit is left."""
    out = separate_shared_addresses(_LOOP_REUSE).splitlines()
    assert out[3:8] == [
        "{",
        "\t.reg .b32 \t%mx_shared0;",
        "\tmov.u32 \t%r427, smem;",
        "\tmov.u32 \t%mx_shared0, smem;",
        "\tadd.s32 \t%r235, %mx_shared0, 4288;",
    ]
    assert "\tld.shared.f32 \t%f68, [%r427+6432];" in out and "\tadd.s32 \t%r427, %r427, 64;" in out
    assert smem_register_reuse("\n".join(out)) == []


_BRANCHES = """\
.extern .shared .align 128 .b8 smem[];
.visible .entry k(
)
{
\t.reg .b32 \t%r<500>;
\tmov.u32 \t%r9, %tid.x;
\t@%p1 bra \t$L__BB0_2;
\tmov.u32 \t%r427, smem;
\tadd.s32 \t%r235, %r427, 4288;
$L__BB0_2:
\tadd.s32 \t%r236, %r427, 16;
\t// begin inline asm
{
 .reg .b64 pol;
 ld.relaxed.gpu.global.L2::cache_hint.u32 %r1, [%rd1], pol;
}
\t// end inline asm
$L__BB0_27:
\tld.shared.f32 \t%f76, [%r235];
\tldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r427,%r5}, [%r236];
\t@%p22 bra \t$L__BB0_27;
\tret;
}
"""


def test_the_rewrite_follows_branches_and_vector_writes() -> None:
    """%r236 is computed where a branch may skip the `mov` (not renamed, so the rewrite leaves a
    hit); the inline assembly's scope does not end the function (nor do its registers'
    declarations place ours), and an `ldmatrix` into a vector sets %r427 again."""
    (hit,) = smem_register_reuse(_BRANCHES)
    assert (hit.register, hit.redefined, hit.derived, hit.read) == ("%r427", 20, "%r235", 19)
    out = separate_shared_addresses(_BRANCHES)
    assert "\tadd.s32 \t%r235, %mx_shared0, 4288;" in out and "\tadd.s32 \t%r236, %r427, 16;" in out
    assert out.index("\t.reg .b32 \t%mx_shared0;") > out.index("%r<500>")
    # %r236, read by the ldmatrix, is still derived from the reused register: compile_cuda
    # falls back to SAFE_PTXAS_OPTIONS for this module
    assert [(h.derived, h.read) for h in smem_register_reuse(out)] == [("%r236", 22)]


def test_the_rewrite_leaves_unknown_control_flow_alone() -> None:
    """A branch to a label the function does not have: the flow is not known, nothing changes."""
    ptx = _LOOP_REUSE.replace("\tret;", "\t@%p1 bra \t$L__elsewhere;\n\tret;")
    assert smem_register_reuse(ptx) and separate_shared_addresses(ptx) == ptx


@pytest.mark.skipif(compiler.find_nvcc() is None, reason="no nvcc")
@pytest.mark.parametrize(("seed", "index", "guarded"), [(8, 423, True), (9, 456, True), (2, 0, False)])
def test_compile_cuda_assembles_the_rewritten_ptx(
    seed: int, index: int, guarded: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the real nvcc: the two miscompiled tc graphs take a second nvcc run on their
    rewritten PTX with the usual options and no warning; an ordinary graph is compiled once."""
    commands = _compile_recording(seed, index, tmp_path, monkeypatch, expect_warning=False)
    if guarded:
        assert len(commands) == 2
        assert commands[1][-1].endswith("guarded.ptx") and not any(o in commands[1] for o in SAFE_PTXAS_OPTIONS)
    else:
        assert len(commands) == 1


@pytest.mark.skipif(compiler.find_nvcc() is None, reason="no nvcc")
def test_compile_cuda_falls_back_to_the_unoptimized_assembly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the rewrite leave the pattern, the PTX is assembled with `SAFE_PTXAS_OPTIONS` and a
    `PtxasGuardWarning` names the kernel."""
    monkeypatch.setattr(compiler, "separate_shared_addresses", lambda ptx: ptx)
    commands = _compile_recording(8, 423, tmp_path, monkeypatch, expect_warning=True)
    assert len(commands) == 2 and all(o in commands[1] for o in SAFE_PTXAS_OPTIONS)


def _compile_recording(seed: int, index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, expect_warning: bool) -> list[list[str]]:
    """Compile fuzz tc graph (seed, index) with the real nvcc; the nvcc commands run."""
    from mirage_xdsl.bench import fuzz, fuzz_check
    from mirage_xdsl.codegen.cuda_target import emit_cuda

    program = emit_cuda(fuzz_check.lower_case(fuzz.case_of(seed, index, "tc")), "sm_90")
    commands: list[list[str]] = []
    run = compiler._run_nvcc

    def recording(cmd: list[str]):  # type: ignore[no-untyped-def]
        commands.append(cmd)
        return run(cmd)

    monkeypatch.setattr(compiler, "_run_nvcc", recording)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cubin = compiler.compile_cuda(program.source, "sm_90", cache_dir=tmp_path)
    assert [issubclass(w.category, PtxasGuardWarning) for w in caught] == ([True] if expect_warning else [])
    assert cubin.is_file() and cubin.stat().st_size > 0
    return commands


@pytest.mark.gpu
@pytest.mark.parametrize(("seed", "index"), [(8, 423), (9, 456), (9, 625)])
def test_gpu_graphs_ptxas_miscompiled_run_right(seed: int, index: int, tmp_path: Path) -> None:
    """Each faulted with cudaErrorIllegalAddress when assembled from NVVM's PTX with ptxas's
    optimizer (H200, CUDA 13.0); from the rewritten PTX they match the reference."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    out = fuzz_check.check_gpu(fuzz.case_of(seed, index, "tc"), seed=fuzz._input_seed(seed, index), cache_dir=tmp_path)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"
