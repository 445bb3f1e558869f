"""What the kernel-graph and threadblock-graph builders share: the argument checks that
raise `GraphBuildError` (a `ValueError` whose message starts with the op's name), the dtype
names a builder accepts (`DTYPES`), and the tensor handles it returns (`DTensor` of a
`KNGraph`, `STensor` of a `TBGraph`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type, bf16, f16, f32, f64
from xdsl.ir import Attribute, SSAValue

from mirage_xdsl.dialects import kn, tb, tiling
from mirage_xdsl.target.device import MAX_TENSOR_ELEMENTS

if TYPE_CHECKING:
    from mirage_xdsl.frontends.builder import KNGraph
    from mirage_xdsl.frontends.tb_builder import TBGraph


class GraphBuildError(ValueError):
    """A builder call breaks a shape or graph rule; the message starts with the op's name."""


DTYPES: dict[str, Attribute] = {
    "float16": f16,
    "half": f16,
    "fp16": f16,
    "bfloat16": bf16,
    "bf16": bf16,
    "float32": f32,
    "float": f32,
    "fp32": f32,
    "float64": f64,
    "double": f64,
}


DTYPE_NAMES: dict[type[Attribute], str] = {
    Float16Type: "float16",
    BFloat16Type: "bfloat16",
    Float32Type: "float32",
    Float64Type: "float64",
}


def show_value(value: Any) -> str:
    """`value` for an error message: plain data as written, other objects by type name (their
    default repr, `<... object at 0x...>`, tells a user nothing)."""
    if value is None or isinstance(value, bool | int | float | str | _Tensor):
        return repr(value)
    if isinstance(value, list | tuple) and all(v is None or isinstance(v, bool | int | float | str) for v in value):
        return repr(value)
    return f"a {type(value).__name__}"


def dtype_attr(dtype: Any, name: str = "new_input") -> Attribute:
    """The xDSL element type of `dtype`: an xDSL type Mirage supports, or a name of `DTYPES`
    ("float16", "fp16", "bfloat16", ..., also torch / Mirage dtype objects by their name).

    Raises:
        GraphBuildError: an unsupported xDSL type or an unknown name (`name` prefixes the message).
    """
    if isinstance(dtype, Attribute):
        if (err := kn.element_type_error(dtype)) is not None:
            raise GraphBuildError(f"{name}: dtype: {err}")
        return dtype
    key = getattr(dtype, "name", dtype)  # torch / Mirage dtype objects carry a name
    if not isinstance(key, str) or key.lower().removeprefix("torch.").removeprefix("mi.") not in DTYPES:
        raise GraphBuildError(f"{name}: unknown dtype {show_value(dtype)} (expected one of {', '.join(sorted(set(DTYPES)))})")
    return DTYPES[key.lower().removeprefix("torch.").removeprefix("mi.")]


def dtype_name(attr: Attribute) -> str:
    """The builder's name of an element type ("float16", "bfloat16", "float32", "float64"), else its IR spelling."""
    return DTYPE_NAMES.get(type(attr), str(attr))


def is_int(value: Any) -> bool:
    """Whether `value` is an integer (`numbers.Integral`) other than a bool."""
    # bool is an int subclass, but True as a size is a typo, not a 1
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def int_arg(name: str, what: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """`value` as a Python int within [lo, hi].

    Raises:
        GraphBuildError: `value` is not an int (floats and bools are refused, not truncated)
            or lies outside the range.
    """
    if not is_int(value):
        raise GraphBuildError(f"{name}: {what} must be an int, got {show_value(value)}")
    out = int(value)
    if (lo is not None and out < lo) or (hi is not None and out > hi):
        bounds = f">= {lo}" if hi is None else f"in [{lo if lo is not None else '-inf'}, {hi}]"
        raise GraphBuildError(f"{name}: {what} must be {bounds}, got {out}")
    return out


def ints_arg(name: str, what: str, values: Any, length: int | None = None) -> tuple[int, ...]:
    """A list or tuple of ints (not bools or floats) as a tuple, of `length` entries if given.

    Raises:
        GraphBuildError: `values` is not a list/tuple of ints or has the wrong length.
    """
    iterable = hasattr(values, "__iter__") and not isinstance(values, str | bytes | Mapping | AbstractSet)
    items = list(values) if iterable else None
    if items is None or not all(is_int(v) for v in items):
        raise GraphBuildError(f"{name}: {what} must be a list or tuple of ints, got {show_value(values)}")
    out = tuple(int(v) for v in items)
    if length is not None and len(out) != length:
        raise GraphBuildError(f"{name}: {what} must have {length} entries, got {len(out)}")
    return out


def number_arg(name: str, what: str, value: Any) -> float:
    """`value` as a finite-or-infinite Python float (ints and floats only, not bools or text).

    Raises:
        GraphBuildError: `value` is not a real number, or is NaN.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(float(value)):
        raise GraphBuildError(f"{name}: {what} must be a number, got {show_value(value)}")
    return float(value)


def dims_arg(name: str, dims: Any) -> tuple[int, ...]:
    """A tensor shape: 1 to MAX_TENSOR_DIMS positive ints with fewer than 2^31 elements.

    Raises:
        GraphBuildError: `dims` is not such a list/tuple of ints.
    """
    shape = ints_arg(name, "dims", dims)
    if not 1 <= len(shape) <= tiling.MAX_TENSOR_DIMS or any(d < 1 for d in shape):
        raise GraphBuildError(f"{name}: dims must be 1..{tiling.MAX_TENSOR_DIMS} positive sizes, got {shape}")
    if math.prod(shape) > MAX_TENSOR_ELEMENTS:
        raise GraphBuildError(
            f"{name}: dims {shape} hold {math.prod(shape)} elements, more than the {MAX_TENSOR_ELEMENTS} that "
            "32-bit indexing in the generated kernels reaches; split the tensor"
        )
    return shape


def checked(name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a `tiling` shape rule, re-raising its ShapeError as a GraphBuildError naming the op."""
    try:
        return fn(*args, **kwargs)
    except tiling.ShapeError as err:
        raise GraphBuildError(f"{name}: {err}") from None


class _Tensor:
    value: SSAValue

    @property
    def dims(self) -> tuple[int, ...]:
        """The shape (elements per dim)."""
        return kn.shape_of(self.value)

    @property
    def num_dims(self) -> int:
        """The rank (number of dims)."""
        return len(self.dims)

    @property
    def dtype(self) -> str:
        """The element type's builder name ("float16", "bfloat16", "float32", "float64"), else its IR spelling."""
        return dtype_name(kn.element_type_of(self.value))

    def dim(self, i: int) -> int:
        """The size (elements) of dim `i` (negative `i` counts from the last dim).

        Raises:
            IndexError: `i` is not a dim of the tensor.
        """
        return self.dims[i]


class DTensor(_Tensor):
    """A device tensor of a `KNGraph` (a graph input or an op result)."""

    def __init__(self, graph: KNGraph, value: SSAValue):
        self.graph = graph
        self.value = value

    def __repr__(self) -> str:
        return f"DTensor(dims={self.dims}, dtype={self.dtype})"


class STensor(_Tensor):
    """A shared-memory tile of a `TBGraph`."""

    def __init__(self, graph: TBGraph, value: SSAValue):
        self.graph = graph
        self.value = value

    @property
    def after_accum(self) -> bool:
        """Whether the tile lives after the for-loop (produced by or from a for-loop accumulator)."""
        return tb.after_accum(self.value)

    def __repr__(self) -> str:
        return f"STensor(dims={self.dims}, dtype={self.dtype}, after_accum={self.after_accum})"
