"""Module-level checks of kernel graphs that no single op verifier can make.

xDSL 0.74's `ModuleOp.verify()` runs every op's verifier but does not check SSA dominance
(a value used above its definition parses and verifies), and nothing verifies the `func`
argument/result attribute `kn.strides`.  `verify_kernel_graphs` adds both, plus the device
limits on every tensor of a function's signature; the tools run it on every module they read
(mirage-opt before the first pass, `driver/load.py`, the muGraph importer, the builder).

Every failure raises `KnVerifyError` (a `VerifyException`) with a one-line message naming the
function, the op or argument, the rule and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, DictionaryAttr, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from mirage_xdsl.dialects.common.checks import KnVerifyError
from mirage_xdsl.dialects.kn.tensors import STRIDES_ATTR, tensor_type_error
from mirage_xdsl.target.device import MAX_TENSOR_ELEMENTS


def _value_name(value: SSAValue) -> str:
    return f"%{value.name_hint}" if value.name_hint else f"a value of type {value.type}"


def _where(op: Operation) -> str:
    """`@func: <op name> (op #i of its block)`: enough to find the op in the printed IR."""
    fn = op.parent_op()
    while fn is not None and fn.name != "func.func":
        fn = fn.parent_op()
    prefix = f"@{fn.properties['sym_name'].data}: " if fn is not None else ""  # type: ignore[attr-defined]
    block = op.parent_block()
    index = next((i for i, o in enumerate(block.ops) if o is op), 0) if block is not None else 0
    return f"{prefix}{op.name} (op #{index} of its block)"


def _defining_block(value: SSAValue) -> Block | None:
    if isinstance(value, BlockArgument):
        return value.block
    return value.op.parent_block()  # type: ignore[attr-defined]


def check_dominance(root: Operation) -> None:
    """Every operand of every op nested in `root` is defined above its use: a block argument
    of an enclosing block, or a result of an earlier op of the same or an enclosing block.
    Multi-block regions (none in kernel graphs) are checked within each block only.

    Raises:
        KnVerifyError: an op uses a value before (or without) its definition.
    """
    for region in root.regions:
        for block in region.blocks:
            _check_block(block, set(), len(region.blocks) > 1)


def _check_block(block: Block, above: set[SSAValue], multi_block: bool) -> None:
    visible = set(above)
    visible.update(block.args)
    for op in block.ops:
        for i, operand in enumerate(op.operands):
            if operand in visible:
                continue
            owner = _defining_block(operand)
            if multi_block and owner is not None and owner.parent is block.parent:
                continue  # another block of a CFG region: not ordered by position
            raise KnVerifyError(
                f"{_where(op)}: operand #{i} ({_value_name(operand)}) is used before its definition; "
                "SSA values must be defined above their first use: move the defining op before this one"
            )
        for region in op.regions:
            for inner in region.blocks:
                _check_block(inner, visible, len(region.blocks) > 1)
        visible.update(op.results)


def strides_error(strides: Sequence[int], shape: Sequence[int], output: bool) -> str | None:
    """Why element `strides` (outermost first) cannot describe a tensor of `shape` in the
    generated code, or None: one non-negative stride per dim, a span (largest offset + 1)
    within 32-bit indexing, and for an `output` no two elements at one address (inputs may
    repeat elements, e.g. stride 0 to broadcast a row).  The text continues a sentence that
    names the strides ("kn.strides = [0, 1] ...")."""
    if len(strides) != len(shape):
        entries = "entry" if len(strides) == 1 else "entries"
        return f"has {len(strides)} {entries} for a rank-{len(shape)} tensor; give one stride per dim"
    if any(s < 0 for s in strides):
        return "has a negative stride; strides count elements forward from the tensor's start"
    span = 1 + sum((d - 1) * s for d, s in zip(shape, strides))
    if span > MAX_TENSOR_ELEMENTS:
        return (
            f"spans {span} elements, more than the {MAX_TENSOR_ELEMENTS} that 32-bit indexing in the "
            "generated kernels reaches; use smaller dims or packed strides"
        )
    if output:
        return _overlap_error(strides, shape)
    return None


def _overlap_error(strides: Sequence[int], shape: Sequence[int]) -> str | None:
    """Whether two distinct elements of an output share an address (sufficient test: with the
    dims of size > 1 sorted by stride, each stride reaches past the inner dims' extent)."""
    extent = 1
    dims = sorted(((s, d) for d, s in zip(shape, strides) if d > 1))
    for stride, size in dims:
        if stride < extent:
            return (
                "lets distinct elements of this output share an address (a dim of size > 1 with stride "
                f"{stride} < {extent}, the extent of the dims inside it); outputs need strides that keep "
                "every element apart, e.g. row-major"
            )
        extent = stride * size
    return None


def _strides_of(attrs: Attribute | None, what: str) -> tuple[int, ...] | None:
    """The `kn.strides` entry of one argument/result attribute dictionary (None: absent)."""
    if not isinstance(attrs, DictionaryAttr) or STRIDES_ATTR not in attrs.data:
        return None
    value = attrs.data[STRIDES_ATTR]
    if not isinstance(value, DenseArrayBase):
        raise KnVerifyError(
            f"{what}: {STRIDES_ATTR} must be an array of element strides, one per dim, e.g. "
            f"array<i64: 4096, 1>; got {value}"
        )
    return tuple(int(v) for v in value.get_values())


def _check_signature_entry(
    fn: Operation, kind: str, index: int, typ: Attribute, attrs: Attribute | None, graph: bool
) -> None:
    what = f"@{fn.sym_name.data}: {kind} #{index}"  # type: ignore[attr-defined]
    if graph and not isinstance(typ, TensorType):
        raise KnVerifyError(
            f"{what} has type {typ}; the inputs and outputs of a kernel graph are device tensors, "
            "e.g. tensor<8x64xf16>: pass scalars as op attributes"
        )
    if isinstance(typ, TensorType) and (err := tensor_type_error(typ)) is not None:
        raise KnVerifyError(f"{what}: {err}")
    strides = _strides_of(attrs, what)
    if strides is None:
        return
    if not isinstance(typ, TensorType):
        raise KnVerifyError(f"{what}: {STRIDES_ATTR} is given for type {typ}, which is not a tensor; remove it")
    err = strides_error(strides, tuple(typ.get_shape()), output=kind == "result")
    if err is not None:
        raise KnVerifyError(f"{what}: {STRIDES_ATTR} = {list(strides)} {err}")


def check_signature(fn: Operation) -> None:
    """The arguments and results of a `func.func` holding kn ops are device tensors, every
    tensor of `fn`'s signature fits the device (`tensor_type_error`), there is one attribute
    dictionary per argument/result, and the `kn.strides` attributes are usable: one
    non-negative stride per dim, within 32-bit indexing, and for results no two elements at
    one address (inputs may repeat elements, e.g. stride 0 to broadcast).

    Raises:
        KnVerifyError: naming the function, the argument or result, the rule and the fix.
    """
    ftype = fn.function_type  # type: ignore[attr-defined]
    graph = any(op.dialect_name() == "kn" for op in fn.walk())  # a function of kn ops
    for kind, types, attrs in (
        ("argument", ftype.inputs.data, fn.arg_attrs),  # type: ignore[attr-defined]
        ("result", ftype.outputs.data, fn.res_attrs),  # type: ignore[attr-defined]
    ):
        entries = list(attrs.data) if isinstance(attrs, ArrayAttr) else []
        if isinstance(attrs, ArrayAttr) and len(entries) != len(types):
            raise KnVerifyError(
                f"@{fn.sym_name.data}: {len(entries)} {kind} attribute dictionaries for {len(types)} "  # type: ignore[attr-defined]
                f"{kind}s; give one dictionary per {kind} (possibly empty, {{}})"
            )
        for index, typ in enumerate(types):
            _check_signature_entry(fn, kind, index, typ, entries[index] if index < len(entries) else None, graph)


def check_op_strides(op: Operation) -> None:
    """The `kn.strides` attribute of a kernel op (written by tb-compute-strides, one array per
    result) names usable strides for each result (rules of `check_signature`, as outputs).

    Raises:
        KnVerifyError: the attribute is malformed or a result's strides are unusable.
    """
    attr = op.attributes.get(STRIDES_ATTR)
    if attr is None:
        return
    if not isinstance(attr, ArrayAttr) or len(attr.data) != len(op.results):
        raise KnVerifyError(
            f"{_where(op)}: {STRIDES_ATTR} must be a list with one array<i64> of strides per result "
            f"({len(op.results)}), e.g. [array<i64: 64, 1>]"
        )
    for i, (entry, res) in enumerate(zip(attr.data, op.results)):
        if not isinstance(entry, DenseArrayBase) or not isinstance(res.type, TensorType):
            raise KnVerifyError(f"{_where(op)}: {STRIDES_ATTR}[{i}] must be an array<i64> of strides for a tensor result")
        strides = tuple(int(v) for v in entry.get_values())
        if (err := strides_error(strides, tuple(res.type.get_shape()), output=True)) is not None:
            raise KnVerifyError(f"{_where(op)}: {STRIDES_ATTR}[{i}] = {list(strides)} {err}")


def _functions(module: Operation) -> Iterable[Operation]:
    return (op for op in module.walk() if op.name == "func.func")


def verify_kernel_graphs(module: ModuleOp | Operation) -> None:
    """Run the module-level checks on every `func.func` in `module`: SSA dominance, the
    signature's tensors and strides, and the `kn.strides` of kernel ops.

    Raises:
        KnVerifyError: the first violation found, as one line naming where and the fix.
    """
    check_dominance(module)
    for fn in _functions(module):
        check_signature(fn)
        for op in fn.walk():
            if op.dialect_name() == "kn":
                check_op_strides(op)
