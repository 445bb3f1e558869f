"""The `kn` / `tb` dialects: Python construction API, STensorType and verifier rules (their
text: the lit ops files' round trip, the mirage-opt error path and hypothesis fuzzing of
malformed IR text are in test_dialects_text.py).

The lit files under test/filecheck/dialects/ check every op's syntax and every verifier
message; this file checks what lit cannot: shape inference in the op constructors, the
type API, that broken input never escapes as a Python crash, and the CLI exit status.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, FloatAttr, IndexType, ModuleOp, TensorType, bf16, f16, f32, i8
from xdsl.dialects.func import Func, FuncOp, ReturnOp
from xdsl.ir import Block, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import kn, tb, tiling
from mirage_xdsl.dialects.tb import STensorType

DIALECT_TESTS = Path(__file__).parents[1] / "filecheck" / "dialects"
OPS_FILES = (DIALECT_TESTS / "kn" / "ops.mlir", DIALECT_TESTS / "tb" / "ops.mlir")
BAD_MATMUL = DIALECT_TESTS / "Inputs" / "bad_kn_matmul.mlir"
BAD_TB_GRAPH = DIALECT_TESTS / "Inputs" / "bad_tb_graph.mlir"
BAD_ACCUM_KIND = DIALECT_TESTS / "Inputs" / "bad_accum_kind.mlir"
BAD_IRDL_TYPE = DIALECT_TESTS / "Inputs" / "bad_irdl_type.mlir"

FAST = settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# ---------------------------------------------------------------------------------------
# Helpers


def make_context() -> Context:
    ctx = Context()
    for dialect in (Builtin, Func, Arith, kn.Kernel, tb.Threadblock):
        ctx.load_dialect(dialect)
    return ctx


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def parse_and_verify(text: str) -> ModuleOp:
    module = parse(text)
    module.verify()
    return module


def print_op(op, generic: bool = False) -> str:
    from io import StringIO

    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(op)
    return out.getvalue()


def chunks_of(path: Path) -> list[str]:
    return [c for c in path.read_text().split("// -----") if "func.func" in c]


VALID_CHUNKS = [c for p in OPS_FILES for c in chunks_of(p)]


def tensor_args(*types) -> list[SSAValue]:
    """Block arguments of the given types (SSA values to build ops from)."""
    return list(Block(arg_types=types).args)


def t(*shape: int, dtype=f16) -> TensorType:
    return TensorType(dtype, shape)


def s(*shape: int, dtype=f16, after: bool = False) -> STensorType:
    return STensorType(shape, dtype, after)


def build_customized(
    inputs: Sequence[TensorType],
    body,
    *,
    grid: Sequence[int],
    forloop_range: int = 1,
    reduction_dimx: int = 64,
    block: Sequence[int] = (128, 1, 1),
) -> tuple[ModuleOp, kn.CustomizedOp]:
    """A module with one `func.func` holding one `kn.customized` whose region `body(args)` fills.

    `body` receives the region's block arguments and returns the list of ops to put in it;
    the kernel's result types are inferred from the `tb.output` ops it creates.
    """
    region_block = Block(arg_types=inputs)
    ops = body(list(region_block.args))
    region_block.add_ops(ops)
    outputs = [op for op in ops if isinstance(op, tb.OutputOp)]
    result_types = [
        TensorType(
            kn.element_type_of(o.input), tiling.output_dtensor_shape(kn.shape_of(o.input), grid, o.omap)
        )
        for o in outputs
    ]
    func = FuncOp("k", (list(inputs), result_types))
    func_block = func.body.block
    custom = kn.CustomizedOp(
        list(func_block.args),
        result_types,
        region_block,
        grid_dim=grid,
        block_dim=block,
        forloop_range=forloop_range,
        reduction_dimx=reduction_dimx,
    )
    func_block.add_ops([custom, ReturnOp(*custom.results)])
    return ModuleOp([func]), custom


# ---------------------------------------------------------------------------------------
# kn: constructors infer result types


def test_kn_matmul_infers_shape() -> None:
    a, b = tensor_args(t(16, 64), t(64, 32))
    op = kn.MatmulOp(a, b)
    assert op.result.type == t(16, 32)
    op.verify()


def test_kn_matmul_batched() -> None:
    q, k = tensor_args(t(2, 256, 64, dtype=bf16), t(2, 64, 4096, dtype=bf16))
    op = kn.MatmulOp(q, k)
    assert op.result.type == t(2, 256, 4096, dtype=bf16)
    op.verify()


def test_kn_matmul_rejects_bad_shapes() -> None:
    a, b, c = tensor_args(t(4, 8), t(4, 8), t(3, 8, 16))
    with pytest.raises(tiling.ShapeError, match="contraction dims differ"):
        kn.MatmulOp(a, b)
    with pytest.raises(tiling.ShapeError, match="operand ranks differ"):
        kn.MatmulOp(a, c)


@pytest.mark.parametrize("cls", [kn.AddOp, kn.SubOp, kn.MulOp, kn.DivOp, kn.PowOp])
def test_kn_binary_broadcasts(cls) -> None:
    a, b = tensor_args(t(4, 1, dtype=f32), t(1, 8, dtype=f32))
    op = cls(a, b)
    assert op.result.type == t(4, 8, dtype=f32)
    op.verify()


@pytest.mark.parametrize(
    "cls", [kn.ExpOp, kn.SquareOp, kn.SqrtOp, kn.SiluOp, kn.SigmoidOp, kn.GeluOp, kn.ReluOp, kn.LogOp]
)
def test_kn_unary_keeps_type(cls) -> None:
    (a,) = tensor_args(t(4, 8))
    op = cls(a)
    assert op.result.type == a.type
    op.verify()


def test_kn_parametrized_unary_ops() -> None:
    (a,) = tensor_args(t(4, 8))
    clamp = kn.ClampOp(a, -1.0, 2.5)
    assert clamp.min_value.value.data == -1.0 and clamp.max_value.value.data == 2.5
    clamp.verify()
    mul = kn.MulScalarOp(a, 0.125)
    assert mul.scalar == FloatAttr(0.125, mul.scalar.type)
    mul.verify()
    with pytest.raises(VerifyException, match=r"kn.clamp: min_value \(3.0\) must not exceed max_value \(1.0\)"):
        kn.ClampOp(a, 3.0, 1.0).verify()


def test_kn_structured_ops() -> None:
    a, b = tensor_args(t(8, 128), t(8, 64))
    red = kn.ReductionOp(a, 1)
    assert red.result.type == t(8, 1) and red.size.value.data == 1
    strided = kn.ReductionOp(a, 1, 64)
    assert strided.result.type == t(8, 64)
    norm = kn.RmsNormOp(a, [128])
    assert norm.result.type == a.type and kn.ints(norm.normalized_shape) == (128,)
    cat = kn.ConcatOp(a, b, 1)
    assert cat.result.type == t(8, 192)
    chunk = kn.ChunkOp(cat.result, 3, 1)
    assert [r.type for r in chunk.outputs] == [t(8, 64)] * 3
    reduce = kn.AllReduceOp(a, inplace=True)
    assert reduce.inplace is not None and reduce.result.type == a.type
    for op in (red, strided, norm, cat, chunk, reduce, kn.AllReduceOp(a)):
        op.verify()


def test_kn_constructors_reject_bad_parameters() -> None:
    (a,) = tensor_args(t(4, 10))
    with pytest.raises(tiling.ShapeError, match="not divisible into 3 chunks"):
        kn.ChunkOp(a, 3, 1)
    with pytest.raises(tiling.ShapeError, match="chunk dim 2 is not a dimension"):
        kn.ChunkOp(a, 2, 2)
    with pytest.raises(tiling.ShapeError, match="reduction dim 5"):
        kn.ReductionOp(a, 5)
    with pytest.raises(tiling.ShapeError, match="only the concat dim may differ"):
        kn.ConcatOp(a, tensor_args(t(2, 10))[0], 1)


@pytest.mark.parametrize(
    ("typ", "message"),
    [
        (TensorType(f16, [-1, 8]), "device tensors need a static shape"),
        (TensorType(f16, [1, 2, 3, 4, 5]), "device tensors need a static shape of 1 to 4"),
        (TensorType(IndexType(), [4]), "element type index is not a float or integer type"),
    ],
)
def test_kn_device_tensor_types(typ, message) -> None:
    (a,) = tensor_args(typ)
    with pytest.raises(VerifyException, match=re.escape(message)):
        kn.ExpOp(a).verify()


def test_kn_integer_tensors_are_allowed() -> None:
    a, b = tensor_args(t(4, 8, dtype=i8), t(4, 8, dtype=i8))
    kn.AddOp(a, b).verify()


# ---------------------------------------------------------------------------------------
# STensorType


def test_stensor_type_api() -> None:
    typ = STensorType([2, 128], f16)
    assert typ.get_shape() == (2, 128)
    assert typ.get_element_type() == f16
    assert not typ.is_after_accum
    after = typ.with_after_accum(True)
    assert after.is_after_accum and after.get_shape() == (2, 128)
    assert after != typ and after.with_after_accum(False) == typ
    reshaped = after.with_shape([2, 1])
    assert reshaped.get_shape() == (2, 1) and reshaped.is_after_accum and reshaped.element_type == f16
    assert str(typ) == "!tb.stensor<2x128xf16>"
    assert str(reshaped) == "!tb.stensor<2x1xf16, after_accum>"
    assert kn.shape_of(typ) == (2, 128) and kn.element_type_of(reshaped) == f16


def test_stensor_type_after_accum_values() -> None:
    (before, after) = tensor_args(s(4, 4), s(4, 4, after=True))
    assert not tb.after_accum(before) and tb.after_accum(after)
    (plain,) = tensor_args(t(4, 4))
    assert not tb.after_accum(plain)


@pytest.mark.parametrize(
    ("shape", "dtype", "message"),
    [
        ([4, 0], f16, "dims must be positive"),
        ([], f16, "must have 1 to 4 dims, got 0"),
        ([1, 2, 3, 4, 5], f16, "must have 1 to 4 dims, got 5"),
        ([4], IndexType(), "element type index is not a float or integer type"),
    ],
)
def test_stensor_type_rejects(shape, dtype, message) -> None:
    with pytest.raises(VerifyException, match=re.escape(message)):
        STensorType(shape, dtype)


@pytest.mark.parametrize(
    "text", ["!tb.stensor<2x128xf16>", "!tb.stensor<2x1xbf16, after_accum>", "!tb.stensor<1x2x3x4xf32>"]
)
def test_stensor_type_text_round_trip(text: str) -> None:
    typ = Parser(make_context(), text).parse_type()
    assert isinstance(typ, STensorType)
    assert str(typ) == text


# ---------------------------------------------------------------------------------------
# tb: constructors infer result types


def test_tb_ops_infer_types() -> None:
    x, y, r = tensor_args(s(1, 64, 64), s(1, 64, 32), s(1, 64, 1))
    mm = tb.MatmulOp(x, y)
    assert mm.result.type == s(1, 64, 32)
    add = tb.AddOp(mm.result, r)
    assert add.result.type == s(1, 64, 32)
    red = tb.ReductionOp(x, 2)
    assert red.result.type == s(1, 64, 1)
    dimx = tb.ReductionToDimxOp(x, 2, 16)
    assert dimx.result.type == s(1, 64, 16)
    rmax = tb.ReductionMaxOp(x, 2)
    assert rmax.max.type == rmax.diff.type == s(1, 64, 1)
    cat = tb.ConcatOp(x, y, 2)
    assert cat.result.type == s(1, 64, 96)
    norm = tb.RmsNormOp(x)
    assert norm.result.type == x.type
    clamp = tb.ClampOp(x, 0.0, 1.0)
    assert clamp.result.type == x.type
    assert tb.MulScalarOp(x, 2.0).scalar.value.data == 2.0


def test_tb_binary_propagates_after_accum() -> None:
    a, b = tensor_args(s(4, 8, after=True), s(4, 1, after=True))
    assert tb.DivOp(a, b).result.type == s(4, 8, after=True)


@pytest.mark.parametrize(
    ("kind", "shape"),
    [
        ("nored", (8, 256)),
        ("red_ld_sum", (8, 1)),
        ("red_ld_mean", (8, 1)),
        ("red_ld_rms", (8, 1)),
        ("redtox_ld_sum", (8, 64)),
        ("max", (8, 256)),
    ],
)
def test_tb_forloop_accum_shapes(kind: str, shape: tuple[int, ...]) -> None:
    (x,) = tensor_args(s(8, 256))
    op = tb.ForloopAccumOp(x, kind, 64)
    assert op.accum_kind == kind
    assert op.result.type == STensorType(shape, f16, True)
    assert op.rescale is None


@pytest.mark.parametrize(("kind", "shape"), [("nored_rescale", (8, 256)), ("red_ld_sum_rescale", (8, 1))])
def test_tb_forloop_accum_rescale(kind: str, shape: tuple[int, ...]) -> None:
    x, r = tensor_args(s(8, 256), s(8, 1))
    op = tb.ForloopAccumOp(x, kind, rescale=r)
    assert op.rescale is r
    assert op.result.type == STensorType(shape, f16, True)


def test_tb_forloop_accum_unknown_kind() -> None:
    (x,) = tensor_args(s(8, 256))
    with pytest.raises(tiling.ShapeError, match="unknown accumulator kind 'avg'"):
        tb.ForloopAccumOp(x, "avg")


def test_detached_tb_ops_verify_local_rules() -> None:
    """While being built (no parent yet) a tb op checks the rules that need no graph."""
    x, r = tensor_args(s(8, 256), s(8, 1, after=True))
    tb.ExpOp(x).verify()
    tb.ReductionToDimxOp(x, 1, 64).verify()
    tb.ForloopAccumOp(x, "redtox_ld_sum", 32).verify()
    with pytest.raises(VerifyException, match="rescale tile must be computed inside the for-loop"):
        tb.ForloopAccumOp(x, "nored_rescale", rescale=r).verify()


def test_tb_op_outside_customized_does_not_verify() -> None:
    text = """
func.func @f(%x: !tb.stensor<8x256xf16>) {
  %e = tb.exp %x : !tb.stensor<8x256xf16>
  func.return
}"""
    with pytest.raises(VerifyException, match="'tb.exp' expects parent op 'kn.customized'"):
        parse_and_verify(text)


# ---------------------------------------------------------------------------------------
# A whole kernel built through the Python API (mirage-notes 2.3, rmsnorm graph 0)


def rmsnorm_body(args: list[SSAValue]) -> list:
    x, w = args
    t1 = tb.InputOp(x, (-1, -1, -1), 1, (2, 128))
    t2 = tb.InputOp(w, (1, -1, -1), 0, (128, 24))
    t3 = tb.ForloopAccumOp(t1.result, "red_ld_rms")
    t4 = tb.MatmulOp(t1.result, t2.result)
    t5 = tb.ForloopAccumOp(t4.result, "nored")
    t6 = tb.DivOp(t5.result, t3.result)
    out = tb.OutputOp(t6.result, (1, -1, -1))
    return [t1, t2, t3, t4, t5, t6, out]


def test_build_rmsnorm_kernel() -> None:
    module, custom = build_customized(
        [t(2, 4096), t(4096, 6144)], rmsnorm_body, grid=(256, 1, 1), forloop_range=32
    )
    module.verify()
    assert custom.grid == (256, 1, 1) and custom.block == (128, 1, 1)
    assert custom.num_iterations == 32 and custom.dimx == 64
    assert custom.outputs[0].type == t(2, 6144)
    inputs = [op for op in custom.body.block.ops if isinstance(op, tb.InputOp)]
    assert [(i.imap, i.fdim) for i in inputs] == [((-1, -1, -1), 1), ((1, -1, -1), 0)]
    assert [o.omap for o in custom.body.block.ops if isinstance(o, tb.OutputOp)] == [(1, -1, -1)]
    assert tb.graph_of(inputs[0]) is custom and tb.checked_graph_of(inputs[0]) is custom
    # the printed module parses back to the same text, in custom and generic form
    for generic in (False, True):
        text = print_op(module, generic)
        assert print_op(parse_and_verify(text), generic) == text


def test_built_kernel_with_wrong_tile_fails() -> None:
    def body(args):
        x, w = args
        t1 = tb.InputOp(x, (-1, -1, -1), 1, (2, 64))  # forloop_range 32 gives 2x128
        t2 = tb.InputOp(w, (1, -1, -1), 0, (128, 24))
        return [t1, t2]

    module, _ = build_customized([t(2, 4096), t(4096, 6144)], body, grid=(256, 1, 1), forloop_range=32)
    with pytest.raises(VerifyException, match=re.escape("tb.input: tile shape (2, 64) does not match the inferred")):
        module.verify()


def test_graph_error_reports_malformed_graph() -> None:
    module, custom = build_customized([t(8, 64)], lambda args: [], grid=(1, 1, 1))
    assert custom.graph_error() is None
    custom.properties["forloop_range"] = kn.IntegerAttr(0, kn.i64)
    assert custom.graph_error() == "forloop_range must be >= 1, got 0"
    del custom.properties["grid_dim"]
    assert "grid_dim must be an array of 3 sizes" in (custom.graph_error() or "")


# ---------------------------------------------------------------------------------------
# tiling: verifier and constructors agree with the shape rules (property test)


@FAST
@given(
    dims=st.lists(st.sampled_from([1, 2, 3, 4, 6, 8, 16, 64]), min_size=1, max_size=4),
    grid=st.tuples(*[st.sampled_from([1, 2, 4]) for _ in range(3)]),
    imap=st.tuples(*[st.integers(-2, 4) for _ in range(3)]),
    fdim=st.integers(-2, 4),
    forloop_range=st.sampled_from([1, 2, 4, 3]),
)
def test_input_tile_verifier_matches_tiling(dims, grid, imap, fdim, forloop_range) -> None:
    """The tb.input verifier accepts exactly the tiles `tiling.input_tile_shape` computes."""
    try:
        expected = tiling.input_tile_shape(dims, grid, imap, fdim, forloop_range)
    except tiling.ShapeError as err:
        expected, message = None, str(err)

    def body(args):
        shape = expected if expected is not None else dims
        return [tb.InputOp(args[0], imap, fdim, shape)]

    module, _ = build_customized([t(*dims)], body, grid=grid, forloop_range=forloop_range)
    if expected is None:
        with pytest.raises(VerifyException) as info:
            module.verify()
        assert str(info.value) == f"tb.input: {message}"
    else:
        module.verify()


@FAST
@given(
    tile=st.lists(st.sampled_from([1, 2, 8]), min_size=1, max_size=3),
    grid=st.tuples(*[st.sampled_from([1, 2, 3]) for _ in range(3)]),
    omap=st.tuples(*[st.integers(-1, 3) for _ in range(3)]),
)
def test_output_map_verifier_matches_tiling(tile, grid, omap) -> None:
    """tb.output + kn.customized accept exactly the output maps `tiling.output_dtensor_shape` accepts."""
    try:
        tiling.output_dtensor_shape(tile, grid, omap)
        ok = True
    except tiling.ShapeError:
        ok = False

    def body(args):
        load = tb.InputOp(args[0], (-1, -1, -1), -1, tile)
        acc = tb.ForloopAccumOp(load.result, "nored")
        return [load, acc, tb.OutputOp(acc.result, omap)]

    if not ok:
        with pytest.raises(tiling.ShapeError):
            build_customized([t(*tile)], body, grid=grid)
        return
    module, custom = build_customized([t(*tile)], body, grid=grid)
    module.verify()
    out = custom.outputs[0].type
    for g, m in zip(grid, omap):
        if g > 1:
            assert m >= 0 and out.get_shape()[m] % g == 0


def test_tiling_helpers() -> None:
    assert tiling.input_tile_shape((4096, 6144), (256, 1, 1), (1, -1, -1), 0, 32) == (128, 24)
    assert tiling.output_dtensor_shape((2, 24), (256, 1, 1), (1, -1, -1)) == (2, 6144)
    assert tiling.broadcast_shape((4, 1), (1, 8)) == (4, 8)
    assert tiling.matmul_shape((1, 4, 8), (1, 8, 2), threadblock=True) == (1, 4, 2)
    assert tiling.reduction_shape((8, 128), 1, 64) == (8, 64)
    assert tiling.concat_shape((2, 3), (2, 5), 1) == (2, 8)
    assert tiling.accumulator_shape("redtox_ld_sum", (8, 256), 64) == (8, 64)
    assert tiling.row_major_strides((2, 3, 4)) == (12, 4, 1)
