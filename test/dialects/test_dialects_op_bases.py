"""The abstract op bases that `kn` and `tb` share (`dialects/common/op_bases.py`): each kn op
and its tb counterpart subclass one family base, their IRDL definitions differ only in the
tensor type the level binds, and the shared rules give the same message at both levels.

Syntax and every verifier message per op are checked by the lit files under
test/filecheck/dialects/; this file checks the sharing itself.
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import TensorType, f16
from xdsl.ir import Block

from mirage_xdsl.dialects import kn, tb
from mirage_xdsl.dialects.common import op_bases
from mirage_xdsl.dialects.tb import STensorType

UNARY = ("Exp", "Square", "Sqrt", "Silu", "Sigmoid", "Gelu", "Relu", "Log")
BINARY = ("Add", "Sub", "Mul", "Div", "Pow")

PAIRS = [
    *[(getattr(kn, f"{n}Op"), getattr(tb, f"{n}Op"), op_bases.UnaryOpBase) for n in UNARY],
    (kn.ClampOp, tb.ClampOp, op_bases.ClampOpBase),
    (kn.MulScalarOp, tb.MulScalarOp, op_bases.MulScalarOpBase),
    *[(getattr(kn, f"{n}Op"), getattr(tb, f"{n}Op"), op_bases.BinaryOpBase) for n in BINARY],
    (kn.MatmulOp, tb.MatmulOp, op_bases.MatmulOpBase),
    (kn.ConcatOp, tb.ConcatOp, op_bases.ConcatOpBase),
    (kn.ReductionMaxOp, tb.ReduceMaxOp, op_bases.OneResultReductionOpBase),
    (kn.ReductionOp, tb.ReductionOp, op_bases.OneResultReductionOpBase),
    (kn.RmsNormOp, tb.RmsNormOp, op_bases.UnaryOpBase),
]


@pytest.mark.parametrize(("kn_op", "tb_op", "family"), PAIRS, ids=lambda c: getattr(c, "name", c.__name__))
def test_kn_and_tb_ops_share_a_family_base(kn_op, tb_op, family) -> None:
    assert issubclass(kn_op, family) and issubclass(tb_op, family)
    assert issubclass(kn_op, kn.KnOp) and issubclass(tb_op, tb.TbOp)
    kdef, tdef = kn_op.get_irdl_definition(), tb_op.get_irdl_definition()
    as_tb = repr(kdef.operands + kdef.results).replace("BaseAttr(TensorType)", "BaseAttr(STensorType)")
    assert as_tb == repr(tdef.operands + tdef.results)
    assert kdef.assembly_format == tdef.assembly_format
    assert kdef.options == tdef.options


def test_elementwise_classes_keep_their_level_groups() -> None:
    """Passes group ops by the level classes (tb.TbUnaryOp / tb.TbBinaryOp): rms_norm and concat
    share a base with them but are not elementwise."""
    assert issubclass(tb.MatmulOp, tb.TbBinaryOp) and issubclass(kn.MatmulOp, kn.KnBinaryOp)
    assert not issubclass(tb.RmsNormOp, tb.TbUnaryOp) and not issubclass(tb.ConcatOp, tb.TbBinaryOp)
    assert not issubclass(kn.RmsNormOp, kn.KnUnaryOp) and not issubclass(kn.ConcatOp, kn.KnBinaryOp)


def _graph(*types):
    """A detached block whose arguments have `types` (values to build ops on)."""
    return Block(arg_types=list(types)).args


def test_shared_rules_read_the_same_at_both_levels() -> None:
    (x,) = _graph(TensorType(f16, [4, 8]))
    (t,) = _graph(STensorType([4, 8], f16))
    for op in (kn.ClampOp(x, 2.0, 1.0), tb.ClampOp(t, 2.0, 1.0)):
        with pytest.raises(kn.KnVerifyError, match=r"^(kn|tb)\.clamp: min_value \(2.0\) must not exceed max_value \(1.0\)$"):
            op.verify_()
    a, b = _graph(TensorType(f16, [4, 8]), TensorType(f16, [4, 16]))
    c, d = _graph(STensorType([4, 8], f16), STensorType([4, 16], f16))
    for op in (kn.AddOp(a, a), tb.AddOp(c, c)):
        op.operands = [op.operands[0], b if isinstance(op, kn.AddOp) else d]
        with pytest.raises(kn.KnVerifyError, match=r"^(kn|tb)\.add: .*broadcast"):
            op.verify_()


def test_levels_bind_their_tensor_type_and_shape_rules() -> None:
    a, b = _graph(TensorType(f16, [3, 4, 8]), TensorType(f16, [3, 8, 2]))
    assert kn.MatmulOp(a, b).result.type == TensorType(f16, [3, 4, 2])  # batch dims at the kernel level
    c, d = _graph(STensorType([1, 4, 8], f16, True), STensorType([1, 8, 2], f16, True))
    assert tb.MatmulOp(c, d).result.type == STensorType([1, 4, 2], f16, True)  # tiles keep after_accum
    with pytest.raises(Exception, match="leading"):
        tb.MatmulOp.infer_shape((3, 4, 8), (3, 8, 2))
