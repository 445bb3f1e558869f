"""Mirage saved-muGraph JSON files <-> `kn`/`tb` IR.

A saved muGraph file (Mirage `benchmark/saved_mugraphs/*.json`, mirage-notes section 2) is a
JSON array of candidate kernel graphs; every kernel graph is an array of KN operator
objects in topological order.  `import_mugraph` turns each candidate into one
`func.func @graph_<N>`:

* every `kn_input_op` becomes a function argument (in file order) with the argument
  attribute `kn.strides` = its `input_strides` (row-major when absent/empty);
* every `kn_output_op` becomes a function result (in file order), with the result
  attribute `kn.strides` when its `output_strides` is non-empty;
* every other KN operator becomes a `kn.*` op; a `kn_customized_op` holds its
  threadblock graph as a region whose block arguments mirror the op's inputs.
  The i-th `tb_input_op` loads from block argument i (its `dtensor.guid` must be the
  customized op's i-th input), the i-th `tb_output_op` produces customized result i.

Consumers reference producers by guid; every reference is resolved and its stored
`dim`/`data_type`/`after_accum` checked against the producer.  EVERY shape is recomputed
with `dialects/tiling.py` (tiles from dtensor shape + grid + input_map + forloop, output
DTensors from tile + grid + output_map, all kn/tb op result shapes) and compared with the
stored `dim`s; serialized `smem_offset`s, `layout`s and `input_map` of `kn_input_op` are
informative and ignored.

Schema eras (mirage-notes 1.1, 2.2) differ in the `data_type` codes and accumulator names:

======  ==========================================================  ====================
era     data_type codes                                             accumulator names
======  ==========================================================  ====================
A       fp16 921, bf16 920, f32 930, f64 940, i8 900, ui16 910       ``tb_accum_*``
B       fp16 941, bf16 940, f32 950, f64 960, i8 935, ui16 945       ``tb_forloop_accum_*``
C       fp16 940, bf16 941, f32 950, f64 960, i8 935, ui16 946       ``tb_forloop_accum_*``
======  ==========================================================  ====================

Without an explicit era the importer detects era A (any `data_type` 921 or any
`tb_accum_*` operator name); otherwise it ASSUMES ERA C: eras B and C use the same codes
with fp16/bf16 swapped and cannot be told apart from the file, so era-B files (Mirage
2025-02-24 .. 2025-06-04) must be imported with `era="B"` (`--mugraph-era=B`).  Both
accumulator spellings are accepted in every era (early era-B files still used
`tb_accum_*`).

Lost in Mirage's JSON: `mul_scalar`'s scalar and `clamp`'s bounds.  The importer reads the
fields `scalar` (or `scalar_value`) and `min_val`/`max_val` (or `min_value`/`max_value`,
`min`/`max`) when present (our exporter writes `scalar`, `min_val`, `max_val`), else uses
Mirage's loader defaults: scalar 0.0, clamp bounds [0.0, 1.0].  Likewise `kn_rms_norm_op`
reads `normalized_shape` when present, else normalizes the last dim; `kn_reduction_<d>_op`
reads `reduce_size` when present, else reduces to size 1; `kn_chunk_<d>_op` reads
`chunk_size` (the number of chunks) when present, else uses the number of output tensors.

`export_mugraph` writes the inverse (era C by default): guids are renumbered from
10000000 (DTensors) and 20000000 (STensors), `smem_offset` is 0, layouts are
`DmemRowMajor`/`SmemRowMajor` and `dim` is padded to 4 entries with 0s.  JSON -> IR ->
JSON -> IR is the identity on the IR.

Every problem in the input raises `MugraphImportError` (a `ValueError`) with a one-line
message naming the file, the graph index, the operator index (and the threadblock
operator index) and the rule, e.g.
`rmsnorm_bs1.json: graph 3, op 2 (kn_customized_op), tb op 0 (tb_input_op): tile dim 1 ...`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IntegerType,
    ModuleOp,
    Signedness,
    TensorType,
    bf16,
    f16,
    f32,
    f64,
    i8,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import kn, tb, tiling
from mirage_xdsl.dialects.kn import STRIDES_ATTR, element_type_of, int_array, ints, shape_of
from mirage_xdsl.dialects.kn.graph_verify import verify_kernel_graphs
from mirage_xdsl.dialects.tb import STensorType
from mirage_xdsl.frontends.nesting import nesting_error
from mirage_xdsl.target.device import MAX_FORLOOP_RANGE

__all__ = [
    "MugraphExportError",
    "MugraphImportError",
    "detect_era",
    "export_mugraph",
    "import_mugraph",
    "load_mugraph_file",
]


class MugraphImportError(ValueError):
    """A saved-muGraph file is malformed or breaks one of Mirage's rules (one-line message)."""


class MugraphExportError(ValueError):
    """The module cannot be written as a saved-muGraph file (one-line message)."""


ERAS = ("A", "B", "C")
ui16 = IntegerType(16, Signedness.UNSIGNED)

DTYPE_CODES: dict[str, dict[int, Attribute]] = {
    "A": {921: f16, 920: bf16, 930: f32, 940: f64, 900: i8, 910: ui16},
    "B": {941: f16, 940: bf16, 950: f32, 960: f64, 935: i8, 945: ui16},
    "C": {940: f16, 941: bf16, 950: f32, 960: f64, 935: i8, 946: ui16},
}
DTYPE_OF_TYPE: dict[str, dict[Attribute, int]] = {
    era: {typ: code for code, typ in table.items()} for era, table in DTYPE_CODES.items()
}

DTENSOR_GUID_BASE = 10000000
STENSOR_GUID_BASE = 20000000
MAX_INT = 2**62  # bound on dims, strides and grid sizes (i64 attributes)

# op-name tables shared by import and export (JSON name fragment <-> op class)
KN_UNARY: dict[str, type[Operation]] = {
    "exp": kn.ExpOp,
    "square": kn.SquareOp,
    "sqrt": kn.SqrtOp,
    "silu": kn.SiluOp,
    "sigmoid": kn.SigmoidOp,
    "gelu": kn.GeluOp,
    "relu": kn.ReluOp,
    "log": kn.LogOp,
}
KN_BINARY: dict[str, type[Operation]] = {
    "add": kn.AddOp,
    "sub": kn.SubOp,
    "mul": kn.MulOp,
    "div": kn.DivOp,
    "pow": kn.PowOp,
    "matmul": kn.MatmulOp,
}
TB_UNARY: dict[str, type[Operation]] = {**tb.UNARY_BY_KIND, "rms_norm": tb.RmsNormOp}
TB_BINARY: dict[str, type[Operation]] = {**tb.BINARY_BY_KIND, "matmul": tb.MatmulOp}

SCALAR_KEYS = ("scalar", "scalar_value")
CLAMP_KEYS = (("min_val", "max_val"), ("min_value", "max_value"), ("min", "max"))
DEFAULT_SCALAR = 0.0
DEFAULT_CLAMP = (0.0, 1.0)

_ERA_A_EVIDENCE = re.compile(r'"data_type"\s*:\s*921(?![0-9.eE])|"tb_accum_')
_OP_NAME = re.compile(r"(kn|tb)_([a-z0-9_]+?)_op")


def detect_era(text: str) -> str:
    """Era A if the text holds `data_type` 921 or a `tb_accum_*` name, else C (B cannot be told
    apart from C)."""
    return "A" if _ERA_A_EVIDENCE.search(text) else "C"


# =======================================================================================
# Import


class _Rule(Exception):
    """Internal: a rule violation at the current location (message without location);
    `sub` locates it inside the current operator (a threadblock operator)."""

    def __init__(self, message: str, sub: str | None = None):
        super().__init__(message)
        self.sub = sub


def _fmt(values: Sequence[int]) -> str:
    return "[" + ",".join(str(v) for v in values) + "]"


def _show(name: Any) -> str:
    """An operator type from the file, safe for a one-line message."""
    if isinstance(name, str) and name.isprintable() and len(name) <= 64:
        return name
    return json.dumps(name)[:64] if isinstance(name, str) else "?"


def _json_kind(value: Any) -> str:
    """The JSON name of a parsed value's kind, for messages ("null", not "NoneType")."""
    kinds = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
             (list, "an array"), (dict, "an object"))
    if value is None:
        return "null"
    return next((name for typ, name in kinds if isinstance(value, typ)), type(value).__name__)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Rule(f"{what} must be a JSON object, got {_json_kind(value)}")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Rule(f"{what} must be a JSON array, got {_json_kind(value)}")
    return value


def _field(obj: dict[str, Any], key: str, what: str = "operator") -> Any:
    if key not in obj:
        raise _Rule(f"{what} has no field '{key}'")
    return obj[key]


def _int(value: Any, what: str, lo: int = -MAX_INT, hi: int = MAX_INT) -> int:
    if not _is_int(value):
        raise _Rule(f"{what} must be an integer, got {json.dumps(value)[:40]}")
    if not lo <= value <= hi:
        raise _Rule(f"{what} = {value} is out of range [{lo}, {hi}]")
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Rule(f"{what} must be a number, got {json.dumps(value)[:40]}")
    try:
        return float(value)
    except OverflowError:
        raise _Rule(f"{what} = {value} does not fit a double") from None


def _int3(obj: dict[str, Any], key: str, lo: int, hi: int = MAX_INT) -> tuple[int, int, int]:
    """An `{x, y, z}` object (a 3-element array is accepted too)."""
    value = _field(obj, key)
    if isinstance(value, list):
        if len(value) != 3:
            raise _Rule(f"'{key}' must have 3 entries (x, y, z), got {len(value)}")
        return tuple(_int(v, f"{key}[{i}]", lo, hi) for i, v in enumerate(value))  # type: ignore[return-value]
    value = _obj(value, f"'{key}'")
    return tuple(_int(_field(value, a, f"'{key}'"), f"{key}.{a}", lo, hi) for a in tiling.GRID_AXES)  # type: ignore[return-value]


class _Tensor:
    """A parsed DTensor/STensor descriptor."""

    __slots__ = ("guid", "shape", "dtype", "after_accum")

    def __init__(self, guid: int, shape: tuple[int, ...], dtype: Attribute, after_accum: bool | None):
        self.guid = guid
        self.shape = shape
        self.dtype = dtype
        self.after_accum = after_accum


class _Importer:
    def __init__(self, era: str, name: str):
        self.era = era
        self.name = name
        self.dtypes = DTYPE_CODES[era]
        self.locs: dict[Operation, str] = {}

    # -- descriptors ----------------------------------------------------------------

    def tensor(self, value: Any, what: str, smem: bool) -> _Tensor:
        obj = _obj(value, what)
        guid = _int(_field(obj, "guid", what), f"{what}.guid", -(2**63), 2**63)
        rank = _int(_field(obj, "num_dims", what), f"{what}.num_dims", 1, 16)
        dims = _list(_field(obj, "dim", what), f"{what}.dim")
        if len(dims) < rank:
            raise _Rule(f"{what}.dim has {len(dims)} entries for num_dims = {rank}")
        shape = tuple(_int(d, f"{what}.dim[{i}]", 1) for i, d in enumerate(dims[:rank]))
        code = _int(_field(obj, "data_type", what), f"{what}.data_type")
        dtype = self.dtypes.get(code)
        if dtype is None:
            known = ", ".join(f"{c}={t}" for c, t in sorted(self.dtypes.items()))
            raise _Rule(f"{what}: unknown data_type {code} for era {self.era} (known: {known})")
        after = None
        if smem and "after_accum" in obj:
            after = obj["after_accum"]
            if not isinstance(after, bool):
                raise _Rule(f"{what}.after_accum must be true or false")
        return _Tensor(guid, shape, dtype, after)

    def tensors(self, op: dict[str, Any], key: str, count: int | None, smem: bool) -> list[_Tensor]:
        items = _list(_field(op, key), f"'{key}'")
        if count is not None and len(items) != count:
            raise _Rule(f"expects {count} {key}, got {len(items)}")
        return [self.tensor(t, f"{key}[{i}]", smem) for i, t in enumerate(items)]

    @staticmethod
    def check(desc: _Tensor, value: SSAValue, what: str, role: str) -> None:
        """The stored descriptor `desc` must describe `value` (shape, dtype, after_accum)."""
        shape = shape_of(value)
        if desc.shape != shape:
            raise _Rule(f"{what} (guid {desc.guid}): stored dims {_fmt(desc.shape)} but {role} {_fmt(shape)}")
        dtype = element_type_of(value)
        if desc.dtype != dtype:
            raise _Rule(f"{what} (guid {desc.guid}): stored data_type is {desc.dtype} but {role} {dtype}")
        typ = value.type
        if desc.after_accum is not None and isinstance(typ, STensorType) and desc.after_accum != typ.is_after_accum:
            raise _Rule(
                f"{what} (guid {desc.guid}): stored after_accum = {str(desc.after_accum).lower()} but {role} "
                f"after_accum = {str(typ.is_after_accum).lower()}"
            )

    def resolve(
        self, op: dict[str, Any], count: int | None, table: dict[int, SSAValue], smem: bool
    ) -> list[SSAValue]:
        values = []
        for i, desc in enumerate(self.tensors(op, "input_tensors", count, smem)):
            value = table.get(desc.guid)
            if value is None:
                raise _Rule(f"input_tensors[{i}] references guid {desc.guid}, which no earlier operator produces")
            self.check(desc, value, f"input_tensors[{i}]", "its producer has")
            values.append(value)
        return values

    def bind(self, op: dict[str, Any], values: Sequence[SSAValue], table: dict[int, SSAValue], smem: bool) -> None:
        for i, desc in enumerate(self.tensors(op, "output_tensors", len(values), smem)):
            self.check(desc, values[i], f"output_tensors[{i}]", "the recomputed result has")
            if desc.guid in table:
                raise _Rule(f"output_tensors[{i}]: guid {desc.guid} is already produced by an earlier operator")
            table[desc.guid] = values[i]

    # -- scalar parameters ------------------------------------------------------------

    @staticmethod
    def scalar(op: dict[str, Any]) -> float:
        for key in SCALAR_KEYS:
            if key in op:
                return _number(op[key], f"'{key}'")
        return DEFAULT_SCALAR

    @staticmethod
    def clamp_bounds(op: dict[str, Any]) -> tuple[float, float]:
        for lo_key, hi_key in CLAMP_KEYS:
            if lo_key in op or hi_key in op:
                lo = _number(op[lo_key], f"'{lo_key}'") if lo_key in op else DEFAULT_CLAMP[0]
                hi = _number(op[hi_key], f"'{hi_key}'") if hi_key in op else DEFAULT_CLAMP[1]
                return lo, hi
        return DEFAULT_CLAMP

    @staticmethod
    def name_dim(match: re.Match[str], op: dict[str, Any], key: str, rank: int) -> int:
        dim = int(match.group(1))
        if key in op and op[key] != dim:
            raise _Rule(f"'{key}' = {json.dumps(op[key])[:20]} contradicts the dim {dim} in the operator name")
        if dim >= rank:
            raise _Rule(f"dim {dim} is not a dimension of a rank-{rank} tensor")
        return dim

    # -- files and graphs ---------------------------------------------------------------

    def module(self, data: Any) -> ModuleOp:
        if not isinstance(data, list):
            raise MugraphImportError(
                f"{self.name}: the top level must be a JSON array of kernel graphs, got {_json_kind(data)}"
            )
        if data and all(isinstance(g, dict) for g in data):
            graphs: list[Any] = [data]  # a single kernel graph (Mirage `KNGraph.to_json`)
        else:
            graphs = data
        funcs = []
        for gi, graph in enumerate(graphs):
            if not isinstance(graph, list):
                raise MugraphImportError(
                    f"{self.name}: graph {gi}: a kernel graph must be a JSON array of operators, "
                    f"got {_json_kind(graph)}"
                )
            funcs.append(self.graph(gi, graph))
        return ModuleOp(funcs)

    def graph(self, gi: int, ops: list[Any]) -> FuncOp:
        block = Block()
        table: dict[int, SSAValue] = {}
        arg_strides: list[tuple[int, ...]] = []
        results: list[SSAValue] = []
        res_strides: list[tuple[int, ...] | None] = []
        for oi, op in enumerate(ops):
            op_type = op.get("op_type") if isinstance(op, dict) else None
            loc = f"graph {gi}, op {oi} ({_show(op_type)})"
            try:
                if not isinstance(op, dict):
                    raise _Rule(f"an operator must be a JSON object, got {_json_kind(op)}")
                if not isinstance(op_type, str):
                    raise _Rule("an operator needs a string field 'op_type'")
                if op_type == "kn_input_op":
                    self.tensors(op, "input_tensors", 0, False)
                    (desc,) = self.tensors(op, "output_tensors", 1, False)
                    strides = self.strides(op, "input_strides", len(desc.shape))
                    arg = block.insert_arg(TensorType(desc.dtype, desc.shape), len(block.args))
                    arg_strides.append(strides or tiling.row_major_strides(desc.shape))
                    if desc.guid in table:
                        raise _Rule(f"output_tensors[0]: guid {desc.guid} is already produced by an earlier operator")
                    table[desc.guid] = arg
                elif op_type == "kn_output_op":
                    (value,) = self.resolve(op, 1, table, False)
                    self.tensors(op, "output_tensors", 0, False)
                    results.append(value)
                    res_strides.append(self.strides(op, "output_strides", len(shape_of(value))) or None)
                else:
                    new = self.kn_op(op, op_type, table, loc)
                    block.add_op(new)
                    self.locs.setdefault(new, loc)
                    self.bind(op, new.results, table, False)
            except _Rule as rule:
                where = f"{loc}, {rule.sub}" if rule.sub else loc
                raise MugraphImportError(f"{self.name}: {where}: {rule}") from None
            except (tiling.ShapeError, VerifyException) as err:
                raise MugraphImportError(f"{self.name}: {loc}: {err}") from None
        ret = ReturnOp(*results)
        block.add_op(ret)
        self.locs[ret] = f"graph {gi} (kn_output_op)"
        arg_attrs = (
            ArrayAttr([DictionaryAttr({STRIDES_ATTR: int_array(s)}) for s in arg_strides]) if arg_strides else None
        )
        res_attrs = None
        if any(s is not None for s in res_strides):
            res_attrs = ArrayAttr(
                [DictionaryAttr({STRIDES_ATTR: int_array(s)} if s is not None else {}) for s in res_strides]
            )
        func = FuncOp(
            f"graph_{gi}",
            FunctionType.from_lists([a.type for a in block.args], [r.type for r in results]),
            Region(block),
            arg_attrs=arg_attrs,
            res_attrs=res_attrs,
        )
        self.verify(gi, func)
        return func

    def verify(self, gi: int, func: FuncOp) -> None:
        """Run every op's verifier once (no diagnostics printing), locating failures."""
        for op in func.walk():
            try:
                op.verify_()
            except VerifyException as err:
                loc = self.locs.get(op, f"graph {gi}")
                raise MugraphImportError(f"{self.name}: {loc}: {str(err).splitlines()[0]}") from None
        try:
            verify_kernel_graphs(func)
        except VerifyException as err:
            raise MugraphImportError(f"{self.name}: graph {gi}: {str(err).splitlines()[0]}") from None

    def strides(self, op: dict[str, Any], key: str, rank: int) -> tuple[int, ...]:
        if key not in op:
            return ()
        items = _list(op[key], f"'{key}'")
        if items and len(items) != rank:
            raise _Rule(f"'{key}' has {len(items)} entries for a rank-{rank} tensor")
        return tuple(_int(s, f"{key}[{i}]", 0) for i, s in enumerate(items))

    # -- kernel-level operators -------------------------------------------------------

    def kn_op(self, op: dict[str, Any], op_type: str, table: dict[int, SSAValue], loc: str) -> Operation:
        match = _OP_NAME.fullmatch(op_type)
        body = match.group(2) if match and match.group(1) == "kn" else None
        if body is None:
            raise _Rule(f"unknown kernel operator type '{_show(op_type)}'")
        if body == "customized":
            return self.customized(op, table, loc)
        if body in KN_UNARY:
            (x,) = self.resolve(op, 1, table, False)
            return KN_UNARY[body](x)  # type: ignore[call-arg]
        if body == "mul_scalar":
            (x,) = self.resolve(op, 1, table, False)
            return kn.MulScalarOp(x, self.scalar(op))
        if body == "clamp":
            (x,) = self.resolve(op, 1, table, False)
            return kn.ClampOp(x, *self.clamp_bounds(op))
        if body in KN_BINARY:
            lhs, rhs = self.resolve(op, 2, table, False)
            return KN_BINARY[body](lhs, rhs)  # type: ignore[call-arg]
        if body == "rms_norm":
            (x,) = self.resolve(op, 1, table, False)
            shape = shape_of(x)
            if "normalized_shape" in op:
                norm = tuple(
                    _int(d, f"normalized_shape[{i}]", 1)
                    for i, d in enumerate(_list(op["normalized_shape"], "'normalized_shape'"))
                )
            else:
                norm = shape[-1:]
            return kn.RmsNormOp(x, norm)
        if body in ("allreduce", "all_reduce"):
            (x,) = self.resolve(op, 1, table, False)
            inplace = op.get("inplace", False)
            if not isinstance(inplace, bool):
                raise _Rule("'inplace' must be true or false")
            return kn.AllReduceOp(x, inplace)
        if m := re.fullmatch(r"reduction_(\d)", body):
            (x,) = self.resolve(op, 1, table, False)
            dim = self.name_dim(m, op, "reduce_dim", len(shape_of(x)))
            size = _int(op["reduce_size"], "'reduce_size'", 1) if "reduce_size" in op else 1
            return kn.ReductionOp(x, dim, size)
        if m := re.fullmatch(r"concat_(\d)", body):
            lhs, rhs = self.resolve(op, 2, table, False)
            return kn.ConcatOp(lhs, rhs, self.name_dim(m, op, "concat_dim", len(shape_of(lhs))))
        if m := re.fullmatch(r"chunk_(\d)", body):
            (x,) = self.resolve(op, 1, table, False)
            dim = self.name_dim(m, op, "chunk_dim", len(shape_of(x)))
            outs = _list(_field(op, "output_tensors"), "'output_tensors'")
            chunks = _int(op["chunk_size"], "'chunk_size'", 1, 4096) if "chunk_size" in op else len(outs)
            if chunks < 1:
                raise _Rule("a chunk operator needs at least one output tensor")
            return kn.ChunkOp(x, chunks, dim)
        raise _Rule(f"unknown or unsupported kernel operator type '{_show(op_type)}'")

    def customized(self, op: dict[str, Any], table: dict[int, SSAValue], loc: str) -> Operation:
        in_descs = self.tensors(op, "input_tensors", None, False)
        inputs = self.resolve(op, None, table, False)
        out_descs = self.tensors(op, "output_tensors", None, False)
        bgraph = _obj(_field(op, "bgraph"), "'bgraph'")
        grid = _int3(bgraph, "grid_dim", 1, 2**31 - 1)
        block_dim = _int3(bgraph, "block_dim", 1, 2**31 - 1) if "block_dim" in bgraph else (128, 1, 1)
        forloop_range = _int(_field(bgraph, "forloop_range", "'bgraph'"), "forloop_range", 1, 2**31 - 1)
        if forloop_range > MAX_FORLOOP_RANGE:  # before the tiles are cut by it
            raise _Rule(
                f"forloop_range = {forloop_range} exceeds {MAX_FORLOOP_RANGE} (the most iterations the reference "
                "executor checks in seconds, target/device.py); take longer tiles per iteration"
            )
        dimx = _int(bgraph.get("reduction_dimx", 64), "reduction_dimx", 1, 2**31 - 1)
        operators = _list(_field(bgraph, "operators", "'bgraph'"), "'bgraph.operators'")

        body = Block(arg_types=[v.type for v in inputs])
        stable: dict[int, SSAValue] = {}
        n_inputs = 0
        outputs: list[tuple[SSAValue, tuple[int, ...]]] = []
        for ti, top in enumerate(operators):
            top_type = top.get("op_type") if isinstance(top, dict) else None
            tloc = f"tb op {ti} ({_show(top_type)})"
            try:
                if not isinstance(top, dict):
                    raise _Rule(f"an operator must be a JSON object, got {_json_kind(top)}")
                if not isinstance(top_type, str):
                    raise _Rule("an operator needs a string field 'op_type'")
                if top_type == "tb_input_op":
                    if n_inputs >= len(inputs):
                        raise _Rule(f"more tb_input_op operators than the {len(inputs)} customized inputs")
                    arg = body.args[n_inputs]
                    dt = self.tensor(_field(top, "dtensor"), "dtensor", False)
                    if dt.guid != in_descs[n_inputs].guid:
                        raise _Rule(
                            f"dtensor guid {dt.guid} differs from customized input {n_inputs} "
                            f"(guid {in_descs[n_inputs].guid}); tb inputs bind positionally"
                        )
                    self.check(dt, arg, "dtensor", f"customized input {n_inputs} has")
                    imap = _int3(top, "input_map", -MAX_INT)
                    fdim = _int(_field(top, "forloop_dim"), "forloop_dim", -MAX_INT)
                    self.tensors(top, "input_tensors", 0, True)
                    tile = tiling.input_tile_shape(shape_of(arg), grid, imap, fdim, forloop_range)
                    (desc,) = self.tensors(top, "output_tensors", 1, True)
                    if desc.shape != tile:
                        raise _Rule(self.tile_mismatch(desc.shape, tile, shape_of(arg), grid, imap, fdim, forloop_range))
                    new: Operation = tb.InputOp(arg, imap, fdim, tile)
                    n_inputs += 1
                elif top_type == "tb_output_op":
                    (value,) = self.resolve(top, 1, stable, True)
                    self.tensors(top, "output_tensors", 0, True)
                    omap = _int3(top, "output_map", -MAX_INT)
                    if "forloop_dim" in top and top["forloop_dim"] != -1:
                        raise _Rule(f"an output's forloop_dim must be -1, got {json.dumps(top['forloop_dim'])[:20]}")
                    shape = tiling.output_dtensor_shape(shape_of(value), grid, omap)
                    k = len(outputs)
                    if k >= len(out_descs):
                        raise _Rule(f"more tb_output_op operators than the {len(out_descs)} customized outputs")
                    dt = self.tensor(_field(top, "dtensor"), "dtensor", False)
                    if dt.shape != shape:
                        raise _Rule(
                            f"dtensor dims {_fmt(dt.shape)} differ from the shape {_fmt(shape)} recomputed from "
                            f"tile {_fmt(shape_of(value))}, grid {_fmt(grid)}, output_map {_fmt(omap)}"
                        )
                    if dt.guid != out_descs[k].guid:
                        raise _Rule(
                            f"dtensor guid {dt.guid} differs from customized output {k} "
                            f"(guid {out_descs[k].guid}); tb outputs bind positionally"
                        )
                    new = tb.OutputOp(value, omap)
                    outputs.append((value, shape))
                else:
                    new = self.tb_op(top, top_type, stable, dimx)
                body.add_op(new)
                self.locs[new] = f"{loc}, {tloc}"
                if new.results:
                    self.bind(top, new.results, stable, True)
            except (_Rule, tiling.ShapeError, VerifyException) as err:
                raise _Rule(str(err), sub=tloc) from None
        if n_inputs != len(inputs):
            raise _Rule(f"bgraph has {n_inputs} tb_input_op operators for {len(inputs)} customized inputs")
        if len(outputs) != len(out_descs):
            raise _Rule(f"bgraph has {len(outputs)} tb_output_op operators for {len(out_descs)} customized outputs")
        result_types = [TensorType(element_type_of(v), shape) for v, shape in outputs]
        return kn.CustomizedOp(
            inputs,
            result_types,
            body,
            grid_dim=grid,
            block_dim=block_dim,
            forloop_range=forloop_range,
            reduction_dimx=dimx,
        )

    @staticmethod
    def tile_mismatch(
        stored: tuple[int, ...],
        tile: tuple[int, ...],
        dshape: tuple[int, ...],
        grid: Sequence[int],
        imap: Sequence[int],
        fdim: int,
        forloop_range: int,
    ) -> str:
        ctx = (
            f"(dtensor {_fmt(dshape)}, grid {_fmt(grid)}, input_map {_fmt(imap)}, forloop_dim {fdim}, "
            f"forloop_range {forloop_range}); stored dims {_fmt(stored)}"
        )
        if len(stored) != len(tile):
            return f"tile rank {len(tile)} (shape {_fmt(tile)}) differs from the stored rank {len(stored)} {ctx}"
        d = next(i for i, (a, b) in enumerate(zip(stored, tile)) if a != b)
        return f"tile dim {d} (size {tile[d]}) recomputed from the maps differs from the stored size {stored[d]} {ctx}"

    # -- threadblock-level operators ------------------------------------------------------

    def tb_op(self, op: dict[str, Any], op_type: str, table: dict[int, SSAValue], dimx: int) -> Operation:
        match = _OP_NAME.fullmatch(op_type)
        body = match.group(2) if match and match.group(1) == "tb" else None
        if body is None:
            raise _Rule(f"unknown threadblock operator type '{_show(op_type)}'")
        if body in TB_UNARY:
            (x,) = self.resolve(op, 1, table, True)
            return TB_UNARY[body](x)  # type: ignore[call-arg]
        if body == "mul_scalar":
            (x,) = self.resolve(op, 1, table, True)
            return tb.MulScalarOp(x, self.scalar(op))
        if body == "clamp":
            (x,) = self.resolve(op, 1, table, True)
            return tb.ClampOp(x, *self.clamp_bounds(op))
        if body in TB_BINARY:
            lhs, rhs = self.resolve(op, 2, table, True)
            return TB_BINARY[body](lhs, rhs)  # type: ignore[call-arg]
        if m := re.fullmatch(r"(?:forloop_)?accum_([a-z_]+)", body):
            kind = m.group(1)
            if kind not in tiling.ACCUMULATOR_KINDS:
                raise _Rule(f"unknown accumulator '{_show(op_type)}'")
            if kind in tiling.RESCALE_ACCUMULATORS:
                x, rescale = self.resolve(op, 2, table, True)
                return tb.ForloopAccumOp(x, kind, dimx, rescale)
            (x,) = self.resolve(op, 1, table, True)
            return tb.ForloopAccumOp(x, kind, dimx)
        if m := re.fullmatch(r"reduction_(\d)(_to_dimx|_max)?", body):
            (x,) = self.resolve(op, 1, table, True)
            dim = self.name_dim(m, op, "reduce_dim", len(shape_of(x)))
            if m.group(2) == "_to_dimx":
                return tb.ReductionToDimxOp(x, dim, dimx)
            if m.group(2) == "_max":
                return tb.ReductionMaxOp(x, dim)
            return tb.ReductionOp(x, dim)
        if m := re.fullmatch(r"concat_(\d)", body):
            lhs, rhs = self.resolve(op, 2, table, True)
            return tb.ConcatOp(lhs, rhs, self.name_dim(m, op, "concat_dim", len(shape_of(lhs))))
        raise _Rule(f"unknown or unsupported threadblock operator type '{_show(op_type)}'")


def _display_name(name: str) -> str:
    return os.path.basename(name) or name


def import_mugraph(text: str, era: str | None = None, name: str = "<input>") -> ModuleOp:
    """Import a saved-muGraph JSON text: one `func.func @graph_<N>` per candidate graph.

    Args:
        text: the file's contents.
        era: "A", "B" or "C" (case-insensitive); None: era A when detected (data_type 921 or a
            `tb_accum_*` name), else era C (eras B and C cannot be told apart).
        name: file name used in error messages (its basename is shown).

    Raises:
        MugraphImportError: malformed JSON, unknown operator or data type, wrong arity, dangling
            guid, inconsistent shapes or a failed verifier; one line naming graph, operator and rule.
    """
    shown = _display_name(name)
    if era is None:
        era = detect_era(text)
    elif not isinstance(era, str) or era.upper() not in ERAS:
        raise MugraphImportError(f"{shown}: unknown muGraph schema era {era!r} (expected A, B or C)")
    era = era.upper()
    check = nesting_error(text, shown, what="malformed JSON: ")
    if check is not None:
        raise MugraphImportError(check)
    try:
        data = json.loads(text)
    except RecursionError:
        raise MugraphImportError(f"{shown}: malformed JSON: nesting too deep") from None
    except ValueError as err:
        raise MugraphImportError(f"{shown}: malformed JSON: {str(err).splitlines()[0]}") from None
    importer = _Importer(era, shown)
    try:
        return importer.module(data)
    except MugraphImportError:
        raise
    except Exception as err:  # noqa: BLE001 - the contract: only MugraphImportError escapes
        detail = str(err).splitlines()[0] if str(err) else ""
        raise MugraphImportError(
            f"{shown}: internal error while importing ({type(err).__name__}: {detail}); the file passed the "
            "importer's checks but could not be handled: please report this with the file"
        ) from err


def load_mugraph_file(path: str | os.PathLike[str], era: str | None = None) -> ModuleOp:
    """Read and import a saved-muGraph file (see `import_mugraph`)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as err:
        raise MugraphImportError(f"{os.fspath(path)}: cannot read: {err}") from None
    return import_mugraph(text, era=era, name=os.fspath(path))


# =======================================================================================
# Export


class _Exporter:
    def __init__(self, era: str):
        if era not in ERAS:
            raise MugraphExportError(f"unknown muGraph schema era {era!r} (expected A, B or C)")
        self.era = era
        self.codes = DTYPE_OF_TYPE[era]
        self.accum_prefix = "tb_accum_" if era == "A" else "tb_forloop_accum_"
        self.next_dguid = DTENSOR_GUID_BASE
        self.next_sguid = STENSOR_GUID_BASE
        self.where = ""

    def fail(self, msg: str) -> MugraphExportError:
        return MugraphExportError(f"{self.where}: {msg}" if self.where else msg)

    def dtype(self, value: SSAValue) -> int:
        typ = element_type_of(value)
        code = self.codes.get(typ)
        if code is None:
            raise self.fail(f"element type {typ} has no era-{self.era} muGraph data_type")
        return code

    @staticmethod
    def dims(shape: Sequence[int]) -> list[int]:
        return list(shape) + [0] * (tiling.MAX_TENSOR_DIMS - len(shape))

    def dtensor(self, value: SSAValue) -> dict[str, Any]:
        if not isinstance(value.type, TensorType):
            raise self.fail(f"value of type {value.type} is not a ranked tensor")
        shape = shape_of(value)
        if any(d < 1 for d in shape):
            raise self.fail(f"tensor {value.type} has a dynamic or empty dim")
        guid = self.next_dguid
        self.next_dguid += 1
        return {
            "data_type": self.dtype(value),
            "dim": self.dims(shape),
            "guid": guid,
            "layout": "DmemRowMajor",
            "num_dims": len(shape),
        }

    def stensor(self, value: SSAValue) -> dict[str, Any]:
        typ = value.type
        if not isinstance(typ, STensorType):
            raise self.fail(f"value of type {typ} is not a !tb.stensor")
        guid = self.next_sguid
        self.next_sguid += 1
        shape = typ.get_shape()
        return {
            "after_accum": typ.is_after_accum,
            "data_type": self.dtype(value),
            "dim": self.dims(shape),
            "guid": guid,
            "layout": "SmemRowMajor",
            "num_dims": len(shape),
            "smem_offset": 0,
        }

    @staticmethod
    def strides_of(attrs: ArrayAttr[DictionaryAttr] | None, i: int) -> tuple[int, ...] | None:
        if attrs is None or i >= len(attrs.data):
            return None
        attr = attrs.data[i].data.get(STRIDES_ATTR)
        return ints(attr) if attr is not None else None  # type: ignore[arg-type]

    @staticmethod
    def xyz(values: Sequence[int]) -> dict[str, int]:
        return dict(zip(tiling.GRID_AXES, values))

    def graph(self, gi: int, func: FuncOp) -> list[dict[str, Any]]:
        self.where = f"graph {gi} (@{func.sym_name.data})"
        if len(func.body.blocks) != 1:
            raise self.fail("a kernel graph needs exactly one block")
        block = func.body.block
        descs: dict[SSAValue, dict[str, Any]] = {}
        ops: list[dict[str, Any]] = []
        for i, arg in enumerate(block.args):
            desc = descs[arg] = self.dtensor(arg)
            strides = self.strides_of(func.arg_attrs, i) or tiling.row_major_strides(shape_of(arg))
            ops.append(
                {
                    "op_type": "kn_input_op",
                    "input_map": self.xyz((-1, -1, -1)),
                    "input_strides": list(strides),
                    "input_tensors": [],
                    "output_tensors": [desc],
                }
            )
        for op in block.ops:
            if isinstance(op, ReturnOp):
                for i, value in enumerate(op.operands):
                    strides = self.strides_of(func.res_attrs, i)
                    ops.append(
                        {
                            "op_type": "kn_output_op",
                            "input_tensors": [self.ref(descs, value)],
                            "output_map": self.xyz((-1, -1, -1)),
                            "output_strides": list(strides) if strides is not None else [],
                            "output_tensors": [],
                        }
                    )
                continue
            entry = self.kn_op(op, descs)
            if "input_tensors" not in entry:
                entry["input_tensors"] = [self.ref(descs, v) for v in op.operands]
            entry["output_tensors"] = [descs.setdefault(r, self.dtensor(r)) for r in op.results]
            ops.append(entry)
        return ops

    def ref(self, descs: dict[SSAValue, dict[str, Any]], value: SSAValue) -> dict[str, Any]:
        desc = descs.get(value)
        if desc is None:
            raise self.fail(f"operand {value} is not defined in this graph")
        return desc

    def kn_op(self, op: Operation, descs: dict[SSAValue, dict[str, Any]]) -> dict[str, Any]:
        for name, cls in KN_UNARY.items():
            if type(op) is cls:
                return {"op_type": f"kn_{name}_op"}
        for name, cls in KN_BINARY.items():
            if type(op) is cls:
                return {"op_type": f"kn_{name}_op"}
        if isinstance(op, kn.MulScalarOp):
            return {"op_type": "kn_mul_scalar_op", "scalar": op.scalar.value.data}
        if isinstance(op, kn.ClampOp):
            return {"op_type": "kn_clamp_op", "min_val": op.min_value.value.data, "max_val": op.max_value.value.data}
        if isinstance(op, kn.RmsNormOp):
            return {"op_type": "kn_rms_norm_op", "normalized_shape": list(ints(op.normalized_shape))}
        if isinstance(op, kn.ReductionOp):
            dim, size = op.dim.value.data, op.size.value.data
            return {"op_type": f"kn_reduction_{dim}_op", "reduce_dim": dim, "reduce_size": size}
        if isinstance(op, kn.ConcatOp):
            dim = op.dim.value.data
            return {"op_type": f"kn_concat_{dim}_op", "concat_dim": dim}
        if isinstance(op, kn.ChunkOp):
            dim = op.dim.value.data
            return {"op_type": f"kn_chunk_{dim}_op", "chunk_dim": dim, "chunk_size": len(op.results)}
        if isinstance(op, kn.AllReduceOp):
            return {"op_type": "kn_allreduce_op", "inplace": op.inplace is not None}
        if isinstance(op, kn.CustomizedOp):
            bgraph, bound = self.bgraph(op, descs)
            return {
                "op_type": "kn_customized_op",
                "bgraph": bgraph,
                "input_tensors": [self.ref(descs, v) for v in bound],
            }
        raise self.fail(f"operation {op.name} has no muGraph equivalent")

    def bgraph(
        self, op: kn.CustomizedOp, descs: dict[SSAValue, dict[str, Any]]
    ) -> tuple[dict[str, Any], list[SSAValue]]:
        block = op.body.block
        inputs = list(op.inputs)
        tb_inputs = [o for o in block.ops if isinstance(o, tb.InputOp)]
        order = []
        for o in tb_inputs:
            arg = o.dtensor
            if not isinstance(arg, BlockArgument) or arg.block is not block:
                raise self.fail("tb.input must load a block argument of its kn.customized")
            order.append(arg.index)
        if sorted(order) != list(range(len(inputs))):
            raise self.fail(
                f"kn.customized: the tb.input ops load block arguments {order}; muGraph JSON needs each "
                f"of the {len(inputs)} inputs loaded exactly once"
            )
        # JSON binds the i-th tb_input_op to the i-th customized input: permute the inputs
        # to the tb.input order (the identity for imported graphs).
        bound = [inputs[i] for i in order]
        outputs = [descs.setdefault(r, self.dtensor(r)) for r in op.outputs]
        sdescs: dict[SSAValue, dict[str, Any]] = {}
        operators: list[dict[str, Any]] = []
        n_out = 0
        for top in block.ops:
            if isinstance(top, tb.InputOp):
                entry: dict[str, Any] = {
                    "op_type": "tb_input_op",
                    "dtensor": self.ref(descs, inputs[top.dtensor.index]),  # type: ignore[attr-defined]
                    "input_map": self.xyz(top.imap),
                    "forloop_dim": top.fdim,
                    "input_tensors": [],
                }
            elif isinstance(top, tb.OutputOp):
                if n_out >= len(outputs):
                    raise self.fail("kn.customized has more tb.output ops than results")
                entry = {
                    "op_type": "tb_output_op",
                    "dtensor": outputs[n_out],
                    "output_map": self.xyz(top.omap),
                    "input_tensors": [self.ref(sdescs, top.input)],
                }
                n_out += 1
            else:
                entry = self.tb_op(top, op)
                entry["input_tensors"] = [self.ref(sdescs, v) for v in top.operands]
            entry["output_tensors"] = [sdescs.setdefault(r, self.stensor(r)) for r in top.results]
            operators.append(entry)
        return {
            "graph_level": "thread_block_graph",
            "grid_dim": self.xyz(op.grid),
            "block_dim": self.xyz(op.block),
            "forloop_range": op.num_iterations,
            "reduction_dimx": op.dimx,
            "smem_offset": 0,
            "operators": operators,
        }, bound

    def tb_op(self, op: Operation, graph: kn.CustomizedOp) -> dict[str, Any]:
        for name, cls in TB_UNARY.items():
            if type(op) is cls:
                return {"op_type": f"tb_{name}_op"}
        for name, cls in TB_BINARY.items():
            if type(op) is cls:
                return {"op_type": f"tb_{name}_op"}
        if isinstance(op, tb.MulScalarOp):
            return {"op_type": "tb_mul_scalar_op", "scalar": op.scalar.value.data}
        if isinstance(op, tb.ClampOp):
            return {"op_type": "tb_clamp_op", "min_val": op.min_value.value.data, "max_val": op.max_value.value.data}
        if isinstance(op, tb.ForloopAccumOp):
            return {"op_type": f"{self.accum_prefix}{op.accum_kind}_op"}
        if isinstance(op, tb.ReductionToDimxOp):
            d = op.reduce_dim
            return {"op_type": f"tb_reduction_{d}_to_dimx_op", "reduce_dim": d, "reduce_size": graph.dimx}
        if isinstance(op, tb.ReductionMaxOp):
            d = op.reduce_dim
            return {"op_type": f"tb_reduction_{d}_max_op", "reduce_dim": d, "reduce_size": -1}
        if isinstance(op, tb.ReductionOp):
            d = op.reduce_dim
            return {"op_type": f"tb_reduction_{d}_op", "reduce_dim": d, "reduce_size": 1}
        if isinstance(op, tb.ConcatOp):
            d = op.dim.value.data
            return {"op_type": f"tb_concat_{d}_op", "concat_dim": d}
        raise self.fail(f"operation {op.name} has no muGraph equivalent")


def export_mugraph(module: ModuleOp, era: str = "C") -> str:
    """Write `module` (one `func.func` per kernel graph) as a saved-muGraph JSON text.

    Raises:
        MugraphExportError: an op, type or structure without a muGraph equivalent.
    """
    exporter = _Exporter(era.upper() if isinstance(era, str) else era)
    graphs = []
    for gi, op in enumerate(module.ops):
        if not isinstance(op, FuncOp):
            raise MugraphExportError(f"top-level op {gi} ({op.name}) is not a func.func kernel graph")
        graphs.append(exporter.graph(gi, op))
    return json.dumps(graphs, indent=1, sort_keys=True)
