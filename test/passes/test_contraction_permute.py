"""Issue #31's missing pieces: contractions whose operands need a transpose
(contraction-permute-operands -> contraction.permute -> cute.permute_copy) and the ELWISE_MUL
epilogue (a third operand) on both lowerings; CPU checks, the host emulator, and (GPU)
mx.einsum against the numpy reference executor on NaN-poisoned outputs."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Float16Type, ModuleOp, TensorType
from xdsl.ir import Block, Region
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.dialects.contraction.config import LastType, generate_config
from mirage_xdsl.dialects.contraction.permute import PermuteOp
from mirage_xdsl.dialects.cute.hopper_gemm import HopperGemmOp
from mirage_xdsl.dialects.cute.permute_copy import PermuteCopyOp
from mirage_xdsl.driver.compile import make_context, prepare
from mirage_xdsl.frontends.einsum import einsum_module
from mirage_xdsl.passes.contraction.gemm_view import gemm_view
from mirage_xdsl.passes.contraction.passes import MakeExecutablePass, SplitDimPass
from mirage_xdsl.passes.contraction.permute_operands import PermuteOperandsPass, choose_layouts, with_layouts
from mirage_xdsl.passes.contraction.to_copy import ConvertPermuteToCutePass
from mirage_xdsl.passes.contraction.to_hopper import ConvertContractionToHopperPass
from mirage_xdsl.passes.contraction.to_tb import ConvertContractionToTbPass
from mirage_xdsl.passes.kn.plan_workspace import PlanWorkspacePass
from mirage_xdsl.reference.contraction import run_contraction
from mirage_xdsl.reference.executor import run_function
from mirage_xdsl.runtime.host_emulator import HostEmulator, find_cxx

AEBF = ("aebf,dfce->abcd", [(64,) * 4, (64,) * 4])


def einsum_pipeline(equation: str, shapes: list[tuple[int, ...]], dtype: str = "float16") -> ModuleOp:
    module = einsum_module(equation, shapes, dtype)
    ctx = make_context()
    for p in (PermuteOperandsPass(), PlanWorkspacePass(), ConvertContractionToHopperPass(), ConvertPermuteToCutePass()):
        p.apply(ctx, module)
    module.verify()
    return module


def test_layouts_of_the_coupled_cluster_contraction() -> None:
    config = generate_config(*AEBF)  # dims a b c d e f
    layouts = choose_layouts(config)
    assert layouts.a == (0, 1, 4, 5) and layouts.b == (4, 5, 2, 3)  # A -> a b e f, B -> e f c d
    assert layouts.copied_elements == 2 * 64**4
    view = gemm_view(with_layouts(config, layouts.a, layouts.b))
    assert (view.m, view.n, view.k, view.batch, view.trans_b) == (4096, 4096, 4096, 1, True)


def test_only_the_operand_that_needs_it_is_permuted() -> None:
    # km,kn->mn: A is M-contiguous (no view), B is fine: one copy of A
    module = einsum_module("km,kn->mn", [(64, 128), (64, 256)])
    PermuteOperandsPass().apply(make_context(), module)
    (permute,) = [o for o in module.walk() if isinstance(o, PermuteOp)]
    assert permute.perm() == [1, 0] and permute.input.index == 0  # type: ignore[attr-defined]
    # a contraction with a view is left alone
    module = einsum_module("cmk,ckn->cmn", [(2, 64, 32), (2, 32, 16)])
    PermuteOperandsPass().apply(make_context(), module)
    assert not [o for o in module.walk() if isinstance(o, PermuteOp)]


def test_permute_operands_errors_name_the_op_and_the_rule() -> None:
    module = einsum_module("mk,kn->nm", [(64, 64), (64, 64)])  # the output is M-contiguous
    with pytest.raises(PassFailedException, match=r"contraction-permute-operands: contraction.contract: no row-major permutation"):
        PermuteOperandsPass().apply(make_context(), module)
    module = einsum_module("aebf,dfce->abcd", [(64,) * 4, (64,) * 4])
    ctx = Context()
    SplitDimPass(dim=4, outer=2, inner=32).apply(ctx, module)  # K dim e split: not an axis any more
    with pytest.raises(PassFailedException, match="are not the axes of its row-major tensor"):
        PermuteOperandsPass().apply(ctx, module)


def test_lowered_module_and_plan() -> None:
    module = einsum_pipeline(*AEBF)
    copies = [o for o in module.walk() if isinstance(o, PermuteCopyOp)]
    assert [(c.tile.value.data, c.vec.value.data) for c in copies] == [(0, 8), (64, 1)]
    (gemm,) = [o for o in module.walk() if isinstance(o, HopperGemmOp)]
    assert gemm.ints("gemm") == [4096, 4096, 4096, 1, 1]
    plan = prepare(module, arch="sm_90a").plan
    assert [s.kernel for s in plan.steps] == ["einsum_permute_0", "einsum_permute_1", "einsum_hopper_gemm_0"]  # type: ignore[union-attr]
    assert plan.workspace_bytes == 2 * 2 * 64**4
    assert plan.steps[1].grid == (64 * 64, 1, 1) and plan.steps[1].smem_bytes == 64 * 66 * 2  # type: ignore[union-attr]


def test_reference_runs_permute_and_elwise_mul() -> None:
    rng = np.random.default_rng(0)
    shapes = [(2, 3, 4, 8), (6, 8, 8, 3)]  # permuted, every TMA stride is a multiple of 16 bytes
    module = einsum_module("aebf,dfce->abcd", shapes)
    PermuteOperandsPass().apply(make_context(), module)
    a, b = rng.random(shapes[0]), rng.random(shapes[1])
    (out,) = run_function(module.body.block.first_op, [a, b])  # type: ignore[arg-type]
    np.testing.assert_allclose(out, np.einsum("aebf,dfce->abcd", a, b), rtol=1e-12)
    shapes = [(2, 8, 16), (2, 16, 4), (2, 8, 4)]
    a, b, d = (rng.random(s) for s in shapes)
    (out,) = run_function(einsum_module("cmk,ckn,cmn->cmn", shapes).body.block.first_op, [a, b, d])  # type: ignore[arg-type]
    np.testing.assert_allclose(out, np.einsum("cmk,ckn->cmn", a, b) * d, rtol=1e-12)
    config = generate_config("mk,kn,mn->mn", [(2, 3), (3, 4), (2, 4)])
    assert config.prim_last is LastType.ELWISE_MUL
    with pytest.raises(ValueError, match="needs the factor D"):
        run_contraction(config, a[0], b[0], (8, 4))


def _permute_module(shape: tuple[int, ...], perm: tuple[int, ...]) -> ModuleOp:
    t = TensorType(Float16Type(), list(shape))
    block = Block(arg_types=[t])
    p = PermuteOp(block.args[0], perm)
    block.add_ops([p, func.ReturnOp(p.result)])
    module = ModuleOp([func.FuncOp("g", ([t], [p.result.type]), Region(block))])
    ctx = make_context()
    PlanWorkspacePass().apply(ctx, module)
    ConvertPermuteToCutePass().apply(ctx, module)
    module.verify()
    return module


@pytest.mark.skipif(find_cxx() is None, reason="needs a C++ compiler")
@pytest.mark.parametrize(
    ("shape", "perm"), [((3, 70, 5, 66), (0, 3, 2, 1)), ((4, 8, 16, 24), (0, 2, 1, 3)), ((2, 3, 5), (2, 0, 1)), ((130, 67), (1, 0))]
)
def test_copy_kernels_on_the_emulator(shape: tuple[int, ...], perm: tuple[int, ...]) -> None:
    program = emit_cuda(prepare(_permute_module(shape, perm), arch="sm_80").module, "sm_80")
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    (out,) = HostEmulator(program).run("g", [x])
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.transpose(x.astype(np.float16).astype(np.float32), perm))


@pytest.mark.skipif(find_cxx() is None, reason="needs a C++ compiler")
@pytest.mark.parametrize(
    ("equation", "shapes"),
    [("cmk,ckn,cmn->cmn", [(2, 64, 128), (2, 128, 96), (2, 64, 96)]), ("mk,kn,mn->mn", [(64, 1024), (1024, 64), (64, 64)])],
    ids=["one-step", "two-steps"],
)
def test_elwise_mul_on_the_threadblock_path(equation: str, shapes: list[tuple[int, ...]]) -> None:
    module = einsum_module(equation, shapes)
    ctx = make_context()
    MakeExecutablePass().apply(ctx, module)
    ConvertContractionToTbPass().apply(ctx, module)
    module.verify()
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    # sm_90: make-executable sizes the PRIM tile for the H100's 227 KiB of shared memory
    (out,) = HostEmulator(emit_cuda(prepare(module, arch="sm_90").module, "sm_90")).run("einsum", xs)
    (ref,) = run_function(einsum_module(equation, shapes).body.block.first_op, xs)  # type: ignore[arg-type]
    np.testing.assert_allclose(np.asarray(out, np.float64), ref, atol=5e-3 * np.abs(ref).max(), rtol=5e-3)


GPU_CASES = [
    ("aebf,dfce->abcd", [(3, 8, 5, 16), (6, 16, 40, 8)], "float16", ""),  # tails in m, n; B transposed
    ("aebf,dfce->abcd", [(16,) * 4, (16,) * 4], "bfloat16", ""),
    ("km,kn->mn", [(96, 200), (96, 136)], "float16", "store4"),  # only A transposed
    ("mk,kn,mn->mn", [(200, 104), (104, 136), (200, 136)], "float16", ""),  # ELWISE_MUL, tails
    ("mk,kn,mn->mn", [(200, 104), (104, 136), (200, 136)], "float16", "store16"),
    ("mk,nk,mn->mn", [(136, 72), (100, 72), (136, 100)], "float16", "store4"),  # n = 100
    ("bhqd,bkhd,bhqk->bhqk", [(2, 4, 192, 64), (2, 320, 4, 64), (2, 4, 192, 320)], "bfloat16", ""),  # two batch dims
    ("aebf,dfce,abcd->abcd", [(3, 8, 5, 16), (6, 16, 40, 8), (3, 5, 40, 6)], "float16", ""),  # both
]


@pytest.mark.gpu
@pytest.mark.parametrize(("equation", "shapes", "dtype", "epilogue"), GPU_CASES)
def test_einsum_matches_reference(equation: str, shapes: list[tuple[int, ...]], dtype: str, epilogue: str) -> None:
    import torch

    from mirage_xdsl.driver.einsum import compile_einsum

    torch_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(int(torch.randint(0, 2**31 - 1, (1,)).item()))
    xs = [torch.randn(s, device="cuda", dtype=torch_dtype, generator=gen) for s in shapes]
    graph = compile_einsum(equation, tuple(tuple(s) for s in shapes), dtype, epilogue=epilogue, poison_outputs=True)
    (out,) = graph(*xs)
    module = einsum_module(equation, shapes, dtype)
    (ref,) = run_function(module.body.block.first_op, [x.float().cpu().numpy() for x in xs])  # type: ignore[arg-type]
    got = out.float().cpu().numpy()
    assert not np.isnan(got).any()
    tol = 2e-2 if dtype == "bfloat16" else 4e-3
    np.testing.assert_allclose(got, ref, atol=tol * np.abs(ref).max(), rtol=tol)


@pytest.mark.gpu
def test_mx_einsum_with_a_factor() -> None:
    import torch

    import mirage_xdsl as mx

    a = torch.randn(2, 128, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(2, 64, 128, device="cuda", dtype=torch.float16)
    d = torch.randn(2, 128, 128, device="cuda", dtype=torch.float16)
    got = mx.einsum("cmk,ckn,cmn->cmn", a, b, d).float()
    want = torch.einsum("cmk,ckn->cmn", a.float(), b.float()) * d.float()
    torch.testing.assert_close(got, want, atol=4e-3 * want.abs().max().item(), rtol=4e-3)
