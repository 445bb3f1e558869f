"""The `contraction` dialect: one op, `contraction.contract`, carrying a seed-004 `Config`.

    %out = "contraction.contract"(%a, %b) <{
        dim_types = ["C", "M", "N", "K"], exec_types = ["SEQ", "SEQ", "SEQ", "SEQ"],
        dim_sizes = array<i64: 4, 64, 32, 16>,
        strides = [array<i64: 1024, 16, 0, 1>, array<i64: 512, 0, 1, 32>, array<i64: 2048, 32, 1, 0>],
        data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO"
    }> : (tensor<4x64x16xf16>, tensor<4x16x32xf16>) -> tensor<4x64x32xf16>

With `prim_last = "ELWISE_MUL"` the op takes a third operand D of the result's type, which
multiplies the accumulated result elementwise (Out = (A x B) * D, D read with Out's strides):

    %out = "contraction.contract"(%a, %b, %d) <{..., prim_last = "ELWISE_MUL", ...}>
        : (tensor<64x32xf16>, tensor<32x16xf16>, tensor<64x16xf16>) -> tensor<64x16xf16>

An optional `activation` (our extension of the seed's epilogues) lists unary functions applied,
in order, to each fp32 result element after the ELWISE_MUL factor, before the store:
`Out = act_n(...act_1((A x B) [* D]))`, e.g. `activation = [#cute.fn<gelu>]` for an MLP's
first projection.  kn-partition sets it when it lowers `kn.matmul` + unary ops to the sm_90 GEMM.

Properties mirror the `Config` fields (enum members by name).  `exec_types` is optional:
an op without it is *unscheduled* (a config straight from `generate_config`, which no
rule constrains yet); an op with it must pass the four rules of seed Task 3e
(`config.verify`, same messages).  Both kinds must be well formed and agree with their
tensor types (element type = data type, element count = the product of the sizes of the
dimensions indexing that tensor).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum
from typing import Any, TypeVar

from xdsl.dialects.builtin import ArrayAttr, BFloat16Type, DenseArrayBase, Float16Type, Float32Type, StringAttr, TensorType, i64
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_operand_def, opt_prop_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects.contraction.config import (
    TENSOR_NAMES,
    Config,
    DataType,
    DimType,
    ExecType,
    FirstType,
    LastType,
    PrimType,
    check_structure,
    verify,
)
from mirage_xdsl.dialects.contraction.permute import PermuteOp
from mirage_xdsl.dialects.cute.attrs import UnaryFnAttr

_E = TypeVar("_E", bound=Enum)

ELEMENT_TYPES = {DataType.FLOAT16: Float16Type, DataType.FLOAT32: Float32Type, DataType.BFLOAT16: BFloat16Type}


def _names(values: Sequence[Enum]) -> ArrayAttr[StringAttr]:
    return ArrayAttr([StringAttr(v.name) for v in values])


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def _values(attr: DenseArrayBase[Any]) -> list[int]:
    """The values of an `array<...>` property: ints for the `array<i64: ...>` built by `_ints`.

    The element type is not constrained by the op definition; a float array (malformed IR)
    yields floats here, which `check_structure` then rejects.
    """
    return list(attr.get_values())


def _enum(enum_type: type[_E], attr: StringAttr, what: str) -> _E:
    try:
        return enum_type[attr.data]
    except KeyError:
        options = ", ".join(m.name for m in enum_type)
        raise VerifyException(f"contraction.contract: {what} {attr.data!r} is not one of {options}") from None


@irdl_op_definition
class ContractOp(IRDLOperation):
    """`out = contract(a, b)` as described by a seed-004 `Config` (see the module docstring).

    Operands: `lhs` (tensor A), `rhs` (tensor B), optional `mul` (tensor D, the ELWISE_MUL
    factor, of the result's type); result: the output tensor.
    """

    name = "contraction.contract"

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    mul = opt_operand_def(TensorType)
    result = result_def(TensorType)

    dim_types = prop_def(ArrayAttr[StringAttr])
    exec_types = opt_prop_def(ArrayAttr[StringAttr])
    dim_sizes = prop_def(DenseArrayBase)
    strides = prop_def(ArrayAttr[DenseArrayBase])
    data_type = prop_def(StringAttr)
    prim_main = prop_def(StringAttr)
    prim_last = prop_def(StringAttr)
    prim_first = prop_def(StringAttr)
    activation = opt_prop_def(ArrayAttr[UnaryFnAttr])

    def __init__(
        self,
        lhs: SSAValue,
        rhs: SSAValue,
        result_type: Attribute,
        config: Config,
        scheduled: bool = True,
        mul: SSAValue | None = None,
        activation: Sequence[UnaryFnAttr] = (),
    ):
        props = config_properties(config, scheduled)
        if activation:
            props["activation"] = ArrayAttr(activation)
        super().__init__(operands=[lhs, rhs, [mul] if mul is not None else []], result_types=[result_type], properties=props)

    @property
    def activation_fns(self) -> list[UnaryFnAttr]:
        """The unary functions applied after the accumulation (and the ELWISE_MUL factor), in order."""
        return list(self.activation.data) if self.activation is not None else []

    @property
    def is_scheduled(self) -> bool:
        """Whether the op carries exec types (and so must satisfy rules 1-4)."""
        return self.exec_types is not None

    def config(self) -> Config:
        """The op's properties as a `Config` (all SEQ when unscheduled).

        Raises:
            VerifyException: an enum name that is not a member of its enum.
        """
        types = [_enum(DimType, a, "dim type") for a in self.dim_types.data]
        execs = self.exec_types.data if self.exec_types is not None else [StringAttr("SEQ")] * len(types)
        return Config(
            data_type=_enum(DataType, self.data_type, "data_type"),
            prim_main=_enum(PrimType, self.prim_main, "prim_main"),
            prim_last=_enum(LastType, self.prim_last, "prim_last"),
            prim_first=_enum(FirstType, self.prim_first, "prim_first"),
            dim_types=types,
            exec_types=[_enum(ExecType, a, "exec type") for a in execs],
            dim_sizes=_values(self.dim_sizes),
            strides=[_values(s) for s in self.strides.data],
        )

    def set_config(self, config: Config, scheduled: bool) -> None:
        """Replace the properties by `config` (exec types only when `scheduled`); the activation stays."""
        props = config_properties(config, scheduled)
        if self.activation is not None:
            props["activation"] = self.activation
        self.properties = props

    def verify_(self) -> None:
        """Check the configuration (`check_structure`, and `verify`'s rules 1-4 when scheduled) and the tensor types.

        Raises:
            VerifyException: a configuration rule is broken (its message), an operand or result
                has an element type other than `data_type`'s, or its element count differs from
                the product of the sizes of the dims that index it (stride != 0); prim_last is
                ELWISE_MUL without a third operand of the result's type, or NONE with one.
        """
        config = self.config()
        try:
            check_structure(config)
            if self.is_scheduled:
                verify(config)
        except ValueError as err:
            raise VerifyException(f"contraction.contract: {err}") from err
        self._verify_tensor_types(config)
        self._verify_epilogue(config)

    def _verify_epilogue(self, config: Config) -> None:
        if config.prim_last is LastType.ELWISE_MUL:
            if self.mul is None:
                raise VerifyException(
                    "contraction.contract: prim_last ELWISE_MUL multiplies the result by a third operand, but the op has "
                    "two; pass the factor D (of the result's type) as the third operand"
                )
            if self.mul.type != self.result.type:
                raise VerifyException(
                    f"contraction.contract: the ELWISE_MUL factor has type {self.mul.type} but the result is "
                    f"{self.result.type}; D must have the result's shape and element type"
                )
        elif self.mul is not None:
            raise VerifyException(
                f"contraction.contract: a third operand is the ELWISE_MUL factor, but prim_last is {config.prim_last.name}; "
                'set prim_last = "ELWISE_MUL" or drop the operand'
            )

    def _verify_tensor_types(self, config: Config) -> None:
        expected_element = ELEMENT_TYPES[config.data_type]
        for name, value, strides in zip(TENSOR_NAMES, (self.lhs, self.rhs, self.result), config.strides):
            tensor = value.type
            assert isinstance(tensor, TensorType)
            if not isinstance(tensor.element_type, expected_element):
                raise VerifyException(
                    f"contraction.contract: tensor {name} has element type {tensor.element_type} but data_type is "
                    f"{config.data_type.name}"
                )
            covered = math.prod(size for size, stride in zip(config.dim_sizes, strides) if stride != 0)
            elements = math.prod(tensor.get_shape())
            if covered != elements:
                raise VerifyException(
                    f"contraction.contract: tensor {name} has {elements} elements but the dimensions indexing it "
                    f"(stride != 0) cover {covered}"
                )


def config_properties(config: Config, scheduled: bool) -> dict[str, Attribute]:
    """The `contraction.contract` properties of a config (exec types only when `scheduled`).

    Raises:
        AttributeError: a field holds something other than the expected enum members.
    """
    props: dict[str, Attribute] = {
        "dim_types": _names(config.dim_types),
        "dim_sizes": _ints(config.dim_sizes),
        "strides": ArrayAttr([_ints(s) for s in config.strides]),
        "data_type": StringAttr(config.data_type.name),
        "prim_main": StringAttr(config.prim_main.name),
        "prim_last": StringAttr(config.prim_last.name),
        "prim_first": StringAttr(config.prim_first.name),
    }
    if scheduled:
        props["exec_types"] = _names(config.exec_types)
    return props


Contraction = Dialect("contraction", [ContractOp, PermuteOp], [])
