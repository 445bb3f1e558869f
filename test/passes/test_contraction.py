"""Seed-004 contraction interface: config generation, the four verify rules, the
`mirage-contraction` report CLI and the contraction dialect's op and passes (the optimizer's
split/fuse/permute/make_executable: test_contraction_optimizer.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from mirage_xdsl.dialects.contraction.config import (
    Config,
    DataType,
    DimType,
    ExecType,
    FirstType,
    LastType,
    PrimType,
    RuleViolation,
    generate_config,
    verify,
)
from mirage_xdsl.passes.contraction.optimizer import (
    KIB,
    Optimizer,
    TargetModel,
)

C, M, N, K = DimType.C, DimType.M, DimType.N, DimType.K
SEQ, PAR, PRIM = ExecType.SEQ, ExecType.PAR, ExecType.PRIM

# einsum, input shapes (small enough to evaluate with numpy)
EINSUMS = [
    ("cmk,ckn->cmn", [(2, 32, 64), (2, 64, 16)]),
    ("abcd,cde->abe", [(2, 4, 8, 16), (8, 16, 32)]),
    ("bshd,hdn->bsn", [(2, 16, 4, 8), (4, 8, 32)]),
    ("aebf,dfce->abcd", [(2, 3, 8, 4), (6, 4, 16, 3)]),
    ("bhqd,bkhd->bhqk", [(2, 3, 16, 8), (2, 32, 3, 8)]),
]
SMALL_TARGET = TargetModel(smem_per_block=4 * KIB, l2_bytes=8 * KIB, num_sms=4)


def evaluate(config: Config, a: np.ndarray, b: np.ndarray, out_elems: int) -> np.ndarray:
    """Run a config on flat row-major data: view each tensor through the config's sizes and
    strides (stride 0 broadcasts an absent dim), multiply, sum over the K dims."""
    views = [
        np.lib.stride_tricks.as_strided(t, shape=config.dim_sizes, strides=[s * t.itemsize for s in strides])
        for t, strides in zip((a, b), config.strides)
    ]
    k_axes = tuple(i for i, t in enumerate(config.dim_types) if t is K)
    summed = (views[0] * views[1]).sum(axis=k_axes)
    out = np.full(out_elems, np.nan)
    kept = [i for i, t in enumerate(config.dim_types) if t is not K]
    out_view = np.lib.stride_tricks.as_strided(
        out, shape=[config.dim_sizes[i] for i in kept], strides=[config.strides[2][i] * out.itemsize for i in kept]
    )
    out_view[...] = summed
    return out


def check_computes(einsum: str, shapes: list[tuple[int, ...]], config: Config) -> None:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s) for s in shapes)
    expected = np.einsum(einsum, a, b)
    got = evaluate(config, a.ravel(), b.ravel(), expected.size)
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-10, atol=1e-10)


def make_config(dim_types, exec_types, sizes=None, strides=None) -> Config:
    n = len(dim_types)
    return Config(
        DataType.FLOAT16,
        PrimType.GEMM,
        LastType.NONE,
        FirstType.ZERO,
        list(dim_types),
        list(exec_types),
        list(sizes or [2] * n),
        [list(s) for s in strides] if strides else [[1] * n for _ in range(3)],
    )


# -- generate_config (seed Task 2) --------------------------------------------------------


def test_generate_config_batched_gemm():
    config = generate_config("cmk,ckn->cmn", [(4, 4096, 4096), (4, 4096, 4096)])
    assert config.dim_types == [C, M, N, K]
    assert config.exec_types == [SEQ] * 4
    assert config.dim_sizes == [4, 4096, 4096, 4096]
    assert config.strides == [
        [4096 * 4096, 4096, 0, 1],  # A = c m k
        [4096 * 4096, 0, 1, 4096],  # B = c k n
        [4096 * 4096, 4096, 1, 0],  # Out = c m n
    ]
    assert (config.data_type, config.prim_main, config.prim_last, config.prim_first) == (
        DataType.FLOAT16,
        PrimType.GEMM,
        LastType.NONE,
        FirstType.ZERO,
    )


@pytest.mark.parametrize(
    "einsum, shapes, types, sizes, strides",
    [
        (
            "abcd,cde->abe",
            [(2, 3, 4, 5), (4, 5, 6)],
            [M, M, N, K, K],  # dims a b e c d
            [2, 3, 6, 4, 5],
            [[60, 20, 0, 5, 1], [0, 0, 1, 30, 6], [18, 6, 1, 0, 0]],
        ),
        (
            "bshd,hdn->bsn",
            [(2, 3, 4, 5), (4, 5, 6)],
            [M, M, N, K, K],  # dims b s n h d
            [2, 3, 6, 4, 5],
            [[60, 20, 0, 5, 1], [0, 0, 1, 30, 6], [18, 6, 1, 0, 0]],
        ),
        (
            "aebf,dfce->abcd",
            [(2, 3, 4, 5), (6, 5, 7, 3)],
            [M, M, N, N, K, K],  # dims a b c d e f
            [2, 4, 7, 6, 3, 5],
            [[60, 5, 0, 0, 20, 1], [0, 0, 3, 105, 1, 21], [168, 42, 6, 1, 0, 0]],
        ),
        (
            "bhqd,bkhd->bhqk",
            [(2, 3, 4, 5), (2, 6, 3, 5)],
            [C, C, M, N, K],  # dims b h q k d
            [2, 3, 4, 6, 5],
            [[60, 20, 5, 0, 1], [90, 5, 0, 15, 1], [72, 24, 6, 1, 0]],
        ),
    ],
)
def test_generate_config_classifies_and_strides(einsum, shapes, types, sizes, strides):
    config = generate_config(einsum, shapes)
    assert config.dim_types == types
    assert config.dim_sizes == sizes
    assert config.strides == strides
    assert config.exec_types == [SEQ] * len(types)


@pytest.mark.parametrize("einsum, shapes", EINSUMS)
def test_generated_config_computes_the_einsum(einsum, shapes):
    check_computes(einsum, shapes, generate_config(einsum, shapes))


def test_generate_config_elwise_mul():
    config = generate_config("cmk,ckn,cmn->cmn", [(2, 3, 4), (2, 4, 5), (2, 3, 5)])
    plain = generate_config("cmk,ckn->cmn", [(2, 3, 4), (2, 4, 5)])
    assert config.prim_last is LastType.ELWISE_MUL and plain.prim_last is LastType.NONE
    assert (config.dim_types, config.dim_sizes, config.strides) == (plain.dim_types, plain.dim_sizes, plain.strides)


@pytest.mark.parametrize(
    "einsum, shapes, message",
    [
        ("cmk,ckn", [(1, 2, 3), (1, 3, 4)], "exactly one '->'"),
        ("cmk,ckn->cmn->x", [(1, 2, 3), (1, 3, 4)], "exactly one '->'"),
        ("cmk->cm", [(1, 2, 3)], "has 1 input"),
        ("a,b,c->abc", [(1,), (2,), (3,)], "has 3 input"),
        ("mk,kn,nm->mn", [(2, 3), (3, 4), (4, 2)], "only accepted as an elementwise factor"),
        ("mk,kn,mn->mn", [(2, 3), (3, 4)], "has 3 inputs but 2 shape"),
        ("mk,kn,mn->mn", [(2, 3), (3, 4), (2, 5)], "index 'n' has size 4 in input A but 5 in input D"),
        ("a,b,c,d->abcd", [(1,), (2,), (3,), (4,)], "has 4 input"),
        ("c1k,ckn->cn", [(1, 2, 3), (1, 3, 4)], "non-letter index '1'"),
        ("...k,kn->...n", [(2, 3), (3, 4)], "non-letter index '.'"),
        ("mmk,kn->mn", [(2, 2, 3), (3, 4)], "index 'm' repeats within tensor A"),
        ("mk,kn->mnz", [(2, 3), (3, 4)], "output index 'z' appears in neither input"),
        ("mkj,kn->mn", [(2, 3, 5), (3, 4)], "index 'j' appears only in input A and not in the output"),
        ("mk,knj->mn", [(2, 3), (3, 4, 5)], "index 'j' appears only in input B"),
        ("mk,kn->mn", [(2, 3)], "1 shape"),
        ("mk,kn->mn", [(2, 3), (3, 4), (2, 4)], "3 shape"),
        ("mk,kn->mn", [(2, 3, 1), (3, 4)], "has rank 3"),
        ("mk,kn->mn", [(2, 3), (5, 4)], "index 'k' has size 3 in input A but 5 in input B"),
        ("mk,kn->mn", [(2, 0), (0, 4)], "positive integer"),
        ("mk,kn->mn", [(2, 3.0), (3, 4)], "positive integer"),
        (42, [(2, 3), (3, 4)], "must be a string"),
    ],
)
def test_generate_config_rejects_bad_input(einsum, shapes, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        generate_config(einsum, shapes)


# -- verify (seed Task 3e) ----------------------------------------------------------------

GOOD = ([C, M, N, K, M, N, K], [PAR, PAR, PAR, SEQ, PRIM, PRIM, PRIM])


def test_verify_accepts_an_executable_config():
    verify(make_config(*GOOD))
    verify(make_config([K, M, N, K], [SEQ, PRIM, PRIM, PRIM]))  # no PAR at all is fine
    verify(make_config([C, M, N, K], [PRIM] * 4))  # a C dim may be PRIM (batched primitive)


def test_rule1_no_k_dimension_is_par():
    config = make_config([K, M, N, K], [PAR, PRIM, PRIM, PRIM])
    with pytest.raises(RuleViolation, match=r"rule 1 violated .*dimension 0 \(K, size 2\) is PAR.*make them SEQ") as exc:
        verify(config)
    assert exc.value.rules == [1]
    config.exec_types[0] = SEQ
    verify(config)


def test_rule2_seq_left_of_prim():
    config = make_config([M, N, K, K], [PRIM, PRIM, PRIM, SEQ])
    with pytest.raises(RuleViolation, match=r"rule 2 violated .*dimension 3 \(K, size 2\) is SEQ but lies right of PRIM dimension 0") as exc:
        verify(config)
    assert 2 in exc.value.rules
    fixed = Optimizer(config)  # the fix the message names
    fixed.permute_dims([3, 0, 1, 2])
    fixed.verify()


def test_rule3_par_left_of_seq():
    config = make_config([K, M, N, M, N, K], [SEQ, PAR, PAR, PRIM, PRIM, PRIM])
    with pytest.raises(RuleViolation, match=r"rule 3 violated .*dimension 1 \(M, size 2\), dimension 2 \(N, size 2\) are PAR") as exc:
        verify(config)
    assert exc.value.rules == [3]
    optimizer = Optimizer(config)
    optimizer.permute_dims([1, 2, 0, 3, 4, 5])
    optimizer.verify()


def test_rule4_rightmost_dimensions_are_prim():
    with pytest.raises(RuleViolation, match=r"rule 4 violated .*no dimension is PRIM") as exc:
        verify(make_config([M, N, K], [PAR, PAR, SEQ]))
    assert exc.value.rules == [4]
    # a PAR dim right of the PRIM block breaks only rule 4 (rules 2/3 are about SEQ)
    with pytest.raises(RuleViolation, match=r"rule 4 violated .*dimension 3 \(C, size 2\) is not PRIM but lies right of PRIM") as exc:
        verify(make_config([M, N, K, C], [PRIM, PRIM, PRIM, PAR]))
    assert exc.value.rules == [4]


def test_rule4_prim_needs_m_n_and_k():
    with pytest.raises(RuleViolation, match=r"rule 4 violated .*include no N dimension") as exc:
        verify(make_config([N, M, K], [SEQ, PRIM, PRIM]))
    assert exc.value.rules == [4]
    with pytest.raises(RuleViolation, match="include no M and no K dimension"):
        verify(make_config([M, K, N], [SEQ, SEQ, PRIM]))


def test_verify_reports_every_violated_rule():
    config = make_config([K, M, N, K, C], [PRIM, SEQ, PRIM, PAR, SEQ])
    with pytest.raises(RuleViolation) as exc:
        verify(config)
    assert exc.value.rules == [1, 2, 3, 4]
    assert str(exc.value).count("violated") == 4


def test_verify_rejects_malformed_configs():
    with pytest.raises(ValueError, match="exec_types has 2 entries, dim_types has 3"):
        verify(make_config([M, N, K], [PRIM, PRIM]))
    bad = make_config([M, N, K], [PRIM] * 3)
    bad.strides.pop()
    with pytest.raises(ValueError, match="strides must be 3 lists"):
        verify(bad)
    bad = make_config([M, N, K], [PRIM] * 3, sizes=[2, 0, 2])
    with pytest.raises(ValueError, match="size of dimension 1 must be a positive integer"):
        verify(bad)
    bad = make_config([M, N, "K"], [PRIM] * 3)
    with pytest.raises(ValueError, match=r"dim_types\[2\] must be a DimType"):
        verify(bad)


# -- split_dim (seed Task 3a) -------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mirage_xdsl.tools.contraction_report", *args], capture_output=True, text=True
    )


def test_cli_prints_the_task4_report():
    proc = run_cli("cmk,ckn->cmn", "4x4096x4096", "4x4096x4096")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "## a) initial config" in out and "## b) L2-optimised config" in out and "## why these sizes" in out
    initial, optimised = out.split("## b)")
    assert "dim_sizes  = [4, 4096, 4096, 4096]" in initial
    assert "exec_types = [SEQ, SEQ, SEQ, SEQ]" in initial
    assert "dim_sizes  = [4, 1, 2, 32, 16, 16, 128, 128, 256]" in optimised
    assert "exec_types = [PAR, PAR, PAR, PAR, PAR, SEQ, PRIM, PRIM, PRIM]" in optimised
    assert "chosen m_l2 = 32, n_l2 = 16" in optimised
    assert proc.stderr == ""


def test_cli_target_options():
    proc = run_cli("cmk,ckn->cmn", "4x4096x4096", "4x4096x4096", "--smem-kib", "48", "--l2-mib", "24")
    assert proc.returncode == 0, proc.stderr
    assert "chosen m_prim = 64, n_prim = 64, k_prim = 128" in proc.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["cmk,ckn->cm", "4x8x8", "4x8x8"], "index 'n' appears only in input B"),
        (["cmk,ckn->cmn", "4x8", "4x8x8"], "has rank 2"),
        (["cmk,ckn->cmn", "4x8x8a", "4x8x8"], "must be sizes joined by 'x'"),
        (["cmk,ckn->cmn", "4x8x8"], "2 inputs but 1 shape"),
        (["m,n->mn", "4", "8"], "no K dimension"),
        ([], "required"),
        (["mk,kn->mn", "2x3", "3x4", "--sms", "0"], "must be positive"),
    ],
)
def test_cli_errors_are_one_line(args, message):
    proc = run_cli(*args)
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("mirage-contraction: error: ")
    assert message in lines[0]
    assert "Traceback" not in proc.stderr


# -- the contraction dialect and passes (IR) ----------------------------------------------

from xdsl.context import Context  # noqa: E402
from xdsl.dialects.builtin import Builtin, ModuleOp, TensorType, f16, f32  # noqa: E402
from xdsl.dialects.func import Func, FuncOp, ReturnOp  # noqa: E402
from xdsl.ir import Block, Region  # noqa: E402
from xdsl.parser import Parser  # noqa: E402
from xdsl.passes import PassPipeline  # noqa: E402
from xdsl.utils.exceptions import PassFailedException, VerifyException  # noqa: E402

from mirage_xdsl.dialects.contraction.ops import Contraction, ContractOp  # noqa: E402
from mirage_xdsl.passes.contraction.passes import contraction_passes  # noqa: E402

IR_SHAPES = [(4, 64, 16), (4, 16, 32)]


def ir_context() -> Context:
    ctx = Context()
    for dialect in (Builtin, Func, Contraction):
        ctx.load_dialect(dialect)
    return ctx


def contraction_module(config: Config, shapes, out_shape, scheduled: bool, element=f16) -> ModuleOp:
    """func @f(A, B) -> Out { contraction.contract }, printed and re-parsed (round trip)."""
    arg_types = [TensorType(element, s) for s in shapes]
    out_type = TensorType(element, out_shape)
    block = Block(arg_types=arg_types)
    op = ContractOp(block.args[0], block.args[1], out_type, config, scheduled=scheduled)
    block.add_ops([op, ReturnOp(op.result)])
    module = ModuleOp([FuncOp("f", (arg_types, [out_type]), Region(block))])
    return Parser(ir_context(), str(module)).parse_module()


def the_op(module: ModuleOp) -> ContractOp:
    return next(op for op in module.walk() if isinstance(op, ContractOp))


def run_passes(module: ModuleOp, spec: str) -> None:
    PassPipeline.parse_spec(contraction_passes(), spec).apply(ir_context(), module)


def test_ir_unscheduled_op_round_trips_and_verifies():
    config = generate_config("cmk,ckn->cmn", IR_SHAPES)
    module = contraction_module(config, IR_SHAPES, (4, 64, 32), scheduled=False)
    module.verify()  # all-SEQ configs are fine while unscheduled
    op = the_op(module)
    assert not op.is_scheduled
    assert op.config() == config
    assert '"contraction.contract"' in str(module) and "exec_types" not in str(module)


def test_ir_scheduled_op_runs_the_four_rules():
    config = generate_config("cmk,ckn->cmn", IR_SHAPES)  # all SEQ: no PRIM, rule 4
    module = contraction_module(config, IR_SHAPES, (4, 64, 32), scheduled=True)
    with pytest.raises(VerifyException, match=r"contraction\.contract: rule 4 violated .*no dimension is PRIM"):
        module.verify()
    for exec_types, rule in (
        ([PAR, PRIM, PRIM, PAR], "rule 1 violated"),
        ([SEQ, PRIM, PRIM, PRIM], None),
        ([PRIM, PRIM, SEQ, PRIM], "rule 2 violated"),
        ([SEQ, PAR, PRIM, PRIM], "rule 3 violated"),
    ):
        config.exec_types = exec_types
        module = contraction_module(config, IR_SHAPES, (4, 64, 32), scheduled=True)
        if rule is None:
            module.verify()
        else:
            with pytest.raises(VerifyException, match=rule):
                module.verify()


def test_ir_verifier_checks_tensor_types_and_enum_names():
    config = generate_config("cmk,ckn->cmn", IR_SHAPES)
    with pytest.raises(VerifyException, match="tensor A has element type f32 but data_type is FLOAT16"):
        contraction_module(config, IR_SHAPES, (4, 64, 32), scheduled=False, element=f32).verify()
    with pytest.raises(VerifyException, match="tensor Out has 4096 elements but the dimensions indexing it"):
        contraction_module(config, IR_SHAPES, (4, 32, 32), scheduled=False).verify()
    text = str(contraction_module(config, IR_SHAPES, (4, 64, 32), scheduled=False)).replace('"GEMM"', '"GEMV"')
    with pytest.raises(VerifyException, match="prim_main 'GEMV' is not one of GEMM, BGEMM"):
        Parser(ir_context(), text).parse_module().verify()


def test_ir_passes_transform_the_config():
    module = contraction_module(generate_config("cmk,ckn->cmn", IR_SHAPES), IR_SHAPES, (4, 64, 32), scheduled=False)
    run_passes(module, "contraction-split-dim{dim=3 outer=4 inner=4},contraction-permute-dims{permutation=1,0,2,3,4}")
    config = the_op(module).config()
    assert config.dim_types == [M, C, N, K, K]
    assert config.dim_sizes == [64, 4, 32, 4, 4]
    run_passes(module, "contraction-fuse-dims{a=3 b=4}")
    assert the_op(module).config().dim_sizes == [64, 4, 32, 16]
    assert not the_op(module).is_scheduled
    module.verify()


def test_ir_make_executable_pass_schedules():
    shapes = [(4, 4096, 4096), (4, 4096, 4096)]
    module = contraction_module(generate_config("cmk,ckn->cmn", shapes), shapes, (4, 4096, 4096), scheduled=False)
    run_passes(module, "contraction-make-executable")
    op = the_op(module)
    assert op.is_scheduled
    assert op.config().dim_sizes == [4, 1, 2, 32, 16, 16, 128, 128, 256]
    module.verify()
    assert Parser(ir_context(), str(module)).parse_module().is_structurally_equivalent(module)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("contraction-split-dim{dim=3 outer=3 inner=4}", "outer_size \\* inner_size must equal 16"),
        ("contraction-fuse-dims{a=0 b=1}", "cannot fuse dimension 0 \\(C, size 4\\)"),
        ("contraction-permute-dims{permutation=0,0,1,2}", "repeats dimension"),
    ],
)
def test_ir_pass_errors(spec, message):
    module = contraction_module(generate_config("cmk,ckn->cmn", IR_SHAPES), IR_SHAPES, (4, 64, 32), scheduled=False)
    before = str(module)
    with pytest.raises(PassFailedException, match=message):
        run_passes(module, spec)
    assert str(module) == before


def test_ir_pass_refuses_to_break_a_scheduled_op():
    shapes = [(4, 4096, 4096), (4, 4096, 4096)]
    module = contraction_module(generate_config("cmk,ckn->cmn", shapes), shapes, (4, 4096, 4096), scheduled=False)
    run_passes(module, "contraction-make-executable")
    before = str(module)
    with pytest.raises(PassFailedException, match=r"rule 3 violated .*are PAR but lie right of SEQ dimension 0 \(K, size 16\)"):
        run_passes(module, "contraction-permute-dims{permutation=5,0,1,2,3,4,6,7,8}")  # k_outer (SEQ) first
    assert str(module) == before
    module.verify()


def test_contraction_passes_factories():
    passes = contraction_passes()
    assert sorted(passes) == [
        "contraction-fuse-dims",
        "contraction-make-executable",
        "contraction-permute-dims",
        "contraction-split-dim",
    ]
    assert all(factory().name == name for name, factory in passes.items())
