"""A binary einsum as a kernel graph holding one `contraction.contract` (seed 004's Config).

    module = einsum_module("cmk,ckn->cmn", [(4, 64, 32), (4, 32, 16)], "float16")

gives

    func.func @einsum(%a: tensor<4x64x32xf16>, %b: tensor<4x32x16xf16>) -> tensor<4x64x16xf16> {
      %o = contraction.contract(%a, %b) <{...generate_config's config...}> : ...
      func.return %o : tensor<4x64x16xf16>
    }

Operands are row-major (the config's strides say so); the output's indices are the einsum's
right-hand side in order.  A third input indexed exactly like the output
(`"cmk,ckn,cmn->cmn"`) becomes the contraction's ELWISE_MUL factor: a third operand of the
op, `prim_last = ELWISE_MUL`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import BFloat16Type, Float16Type, ModuleOp, TensorType
from xdsl.ir import Block, Region

from mirage_xdsl.dialects.contraction.config import DataType, generate_config, parse_einsum
from mirage_xdsl.dialects.contraction.ops import ContractOp

DTYPES = {"float16": (DataType.FLOAT16, Float16Type), "bfloat16": (DataType.BFLOAT16, BFloat16Type)}


def einsum_module(equation: str, shapes: Sequence[Sequence[int]], dtype: str = "float16", name: str = "einsum") -> ModuleOp:
    """The kernel graph `name(a, b[, d]) -> einsum(equation, a, b[, d])` over row-major tensors.

    Args:
        equation: `lhs,rhs->out` (letters; every index of out in lhs or rhs), or
            `lhs,rhs,out->out` (the third input multiplies the result elementwise).
        shapes: the input shapes (two, or three with the factor).
        dtype: `float16` or `bfloat16` (inputs and output; accumulation is fp32).
        name: the function name.

    Raises:
        ValueError: a malformed equation or shapes (`generate_config`'s messages), or
            another dtype.
    """
    if dtype not in DTYPES:
        raise ValueError(f"einsum: dtype {dtype!r} is not one of {sorted(DTYPES)}")
    data_type, element = DTYPES[dtype]
    config = generate_config(equation, shapes)
    config.data_type = data_type
    parsed = parse_einsum(equation)
    sizes = {c: s for ix, shape in zip((parsed.lhs, parsed.rhs), shapes[:2]) for c, s in zip(ix, shape)}
    types = [TensorType(element(), list(shape)) for shape in shapes[:2]]
    out_type = TensorType(element(), [sizes[c] for c in parsed.out])
    if parsed.mul:
        types.append(out_type)
    block = Block(arg_types=types)
    mul = block.args[2] if parsed.mul else None
    contract = ContractOp(block.args[0], block.args[1], out_type, config, scheduled=False, mul=mul)
    block.add_ops([contract, func.ReturnOp(contract.result)])
    fn = func.FuncOp(name, (types, [out_type]), Region(block))
    return ModuleOp([fn])
