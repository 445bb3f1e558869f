"""`tb-compute-strides`: turn the chosen innermost dims into strides (mirage-notes 3.3).

Every tensor whose layout the compiler chooses is laid out by
`layout_math.calc_tensor_strides(shape, innermost, elem_bytes)`: dims ordered
`[innermost, N-1, ..., 0]`, the first dim of size != 1 padded to 16 bytes.  Accumulator
tiles (`tb.forloop_accum` results) use 4-byte elements (fp32 storage, passes/README.md).

Writes (passes/README.md):
* every tb op: `tb.strides = [array<i64>, ...]` and `tb.num_phy_elems = array<i64>`, one
  entry per result (chain intermediates get the strides of their own innermost dim);
* every kn op result that is not a graph output: `kn.strides = [array<i64>, ...]` on the op;
* graph outputs without `kn.strides`: the function result attribute `kn.strides`;
  graph inputs keep their given strides (row-major is recorded where none were given,
  Mirage's `new_input(strides=None)` default).

Innermost dims come from tb-resolve-layout (`tb.innermost`, `kn.innermost`); where they are
missing the last dim is used (row-major).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, DictionaryAttr, ModuleOp, TensorType, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.tiling import row_major_strides
from mirage_xdsl.passes.tb.layout_math import calc_tensor_strides, storage_elem_bytes


def _ints_attr(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def _innermost(op: Operation, attr: str, index: int, value: SSAValue) -> int:
    """The recorded innermost dim of result `index` of `op`, else the last dim."""
    recorded = op.attributes.get(attr)
    if isinstance(recorded, DenseArrayBase):
        dims = kn.ints(recorded)
        if index < len(dims) and dims[index] >= 0:
            return dims[index]
    return len(kn.shape_of(value)) - 1


def result_layouts(op: Operation, attr: str) -> list[tuple[tuple[int, ...], int]]:
    """(strides, num_phy_elems) of every result of `op` from its recorded innermost dims."""
    layouts = []
    for i, res in enumerate(op.results):
        nbytes = storage_elem_bytes(res)
        layouts.append(calc_tensor_strides(kn.shape_of(res), _innermost(op, attr, i, res), nbytes))
    return layouts


def _with_strides(attrs: DictionaryAttr | None, strides: Sequence[int]) -> DictionaryAttr:
    data = dict(attrs.data) if attrs is not None else {}
    data[kn.STRIDES_ATTR] = _ints_attr(strides)
    return DictionaryAttr(data)


def _given_strides(attrs: DictionaryAttr | None) -> Attribute | None:
    """The `kn.strides` entry of an argument or result dictionary, if there is one."""
    return attrs.data.get(kn.STRIDES_ATTR) if attrs is not None else None


def _dicts(array: ArrayAttr | None, count: int) -> list[DictionaryAttr | None]:
    entries: list[DictionaryAttr | None] = [None] * count
    if array is not None:
        for i, entry in enumerate(array.data[:count]):
            entries[i] = entry if isinstance(entry, DictionaryAttr) else None
    return entries


def compute_function_strides(func: FuncOp) -> None:
    """Annotate one kernel-graph function (see the module docstring)."""
    body = func.body.block
    returned: dict[SSAValue, list[int]] = {}
    for op in body.ops:
        if isinstance(op, ReturnOp):
            for i, value in enumerate(op.arguments):
                returned.setdefault(value, []).append(i)

    # graph inputs: keep the given strides, record row-major where none were given
    arg_dicts = _dicts(func.arg_attrs, len(body.args))
    changed = False
    for i, arg in enumerate(body.args):
        if isinstance(arg.type, TensorType) and _given_strides(arg_dicts[i]) is None:
            arg_dicts[i] = _with_strides(arg_dicts[i], row_major_strides(kn.shape_of(arg)))
            changed = True
    if changed:
        func.arg_attrs = ArrayAttr([d if d is not None else DictionaryAttr({}) for d in arg_dicts])

    res_dicts = _dicts(func.res_attrs, len(func.function_type.outputs.data))
    res_changed = False
    for op in body.ops:
        if isinstance(op, kn.CustomizedOp):
            for tb_op in op.body.block.ops:
                layouts = result_layouts(tb_op, "tb.innermost")
                tb_op.attributes["tb.strides"] = ArrayAttr([_ints_attr(s) for s, _ in layouts])
                tb_op.attributes["tb.num_phy_elems"] = _ints_attr([n for _, n in layouts])
        if op.dialect_name() != "kn" or not op.results:
            continue
        final: list[tuple[int, ...]] = []
        for res, (strides, _) in zip(op.results, result_layouts(op, "kn.innermost")):
            positions = returned.get(res, [])
            given = [attr for i in positions if (attr := _given_strides(res_dicts[i])) is not None]
            if given:
                assert isinstance(given[0], DenseArrayBase), "kn.strides is an array<i64> (dialects/kn/tensors.py)"
                chosen = kn.ints(given[0])
            else:
                chosen = strides
            final.append(chosen)
            for i in positions:
                if _given_strides(res_dicts[i]) is None:
                    res_dicts[i] = _with_strides(res_dicts[i], chosen)
                    res_changed = True
        if any(res not in returned for res in op.results):
            op.attributes[kn.STRIDES_ATTR] = ArrayAttr([_ints_attr(s) for s in final])
    if res_changed:
        func.res_attrs = ArrayAttr([d if d is not None else DictionaryAttr({}) for d in res_dicts])


@dataclass(frozen=True)
class ComputeStridesPass(ModulePass):
    """Record strides and physical sizes of every tensor the compiler lays out."""

    name = "tb-compute-strides"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Write the strides of every kernel-graph func in `op` (`compute_function_strides`; the module docstring lists the attributes).

        Raises:
            Nothing.
        """
        for func in [f for f in op.walk() if isinstance(f, FuncOp) and f.body.blocks]:
            compute_function_strides(func)

