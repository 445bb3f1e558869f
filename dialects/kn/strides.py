"""Element strides of kernel-level tensors (DTensors) as the IR records them: the `func`
argument attribute `kn.strides`, the producer's `kn.strides` property, or the `func` result
attribute of a graph output (passes/README.md, step 5)."""

from __future__ import annotations

from xdsl.ir import Attribute, OpResult, SSAValue


def _func_of(op):  # noqa: ANN001, ANN202 - xDSL Operation -> FuncOp | None
    from xdsl.dialects import func

    cur = op.parent_op()
    while cur is not None and not isinstance(cur, func.FuncOp):
        cur = cur.parent_op()
    return cur


def _strides_in(attrs: Attribute | None) -> tuple[int, ...] | None:
    from xdsl.dialects.builtin import DenseArrayBase, DictionaryAttr

    if isinstance(attrs, DictionaryAttr):
        st = attrs.data.get("kn.strides")
        if isinstance(st, DenseArrayBase):
            return tuple(int(v) for v in st.get_values())
    return None


def dtensor_strides(value: SSAValue) -> tuple[int, ...]:
    """Element strides of a kernel-level tensor (passes/README.md step 5): the func argument
    attribute, the producer's `kn.strides`, or the func result attribute of a graph output;
    row-major where nothing is recorded."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase
    from xdsl.ir import BlockArgument

    from mirage_xdsl.dialects.tiling import row_major_strides

    if isinstance(value, BlockArgument):
        parent = value.block.parent_op()
        if isinstance(parent, func.FuncOp) and parent.arg_attrs is not None:
            st = _strides_in(parent.arg_attrs.data[value.index])
            if st is not None:
                return st
    elif isinstance(value, OpResult):
        attr = value.op.attributes.get("kn.strides")
        if isinstance(attr, ArrayAttr) and value.index < len(attr.data):
            st = attr.data[value.index]
            if isinstance(st, DenseArrayBase):
                return tuple(int(v) for v in st.get_values())
        fn = _func_of(value.op)
        if fn is not None and fn.res_attrs is not None:
            for use in value.uses:
                if isinstance(use.operation, func.ReturnOp):
                    st = _strides_in(fn.res_attrs.data[use.index])
                    if st is not None:
                        return st
    return row_major_strides(value.type.get_shape())  # type: ignore[attr-defined]
