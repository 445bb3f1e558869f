"""Mirage saved-muGraph JSON files -> `kn`/`tb` IR (the schema: `mugraph_schema.py`; the
inverse: `mugraph_export.py`).

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

Every problem in the input raises `MugraphImportError` (a `ValueError`) with a one-line
message naming the file, the graph index, the operator index (and the threadblock
operator index) and the rule, e.g.
`rmsnorm_bs1.json: graph 3, op 2 (kn_customized_op), tb op 0 (tb_input_op): tile dim 1 ...`.

Why one module of ~650 lines: the importer walks both levels of a file with one guid table
and one error context (file, graph, op, tb op); its field readers and the schema tables are
already apart (`mugraph_fields.py`, `mugraph_schema.py`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FunctionType, ModuleOp, TensorType, UnitAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import kn, tb, tiling
from mirage_xdsl.dialects.kn import STRIDES_ATTR, element_type_of, int_array, shape_of
from mirage_xdsl.dialects.kn.graph_verify import verify_kernel_graphs
from mirage_xdsl.dialects.tb import STensorType
from mirage_xdsl.frontends.mugraph_fields import (
    RuleError,
    fmt_dims,
    json_field,
    json_int,
    json_int3,
    json_kind,
    json_list,
    json_number,
    json_object,
    show_name,
)
from mirage_xdsl.frontends.mugraph_schema import (
    CLAMP_KEYS,
    DEFAULT_CLAMP,
    DEFAULT_SCALAR,
    DTYPE_CODES,
    ERAS,
    KN_BINARY,
    KN_UNARY,
    MAX_INT,
    SCALAR_KEYS,
    TB_BINARY,
    TB_UNARY,
    MugraphImportError,
    detect_era,
)
from mirage_xdsl.frontends.nesting import nesting_error
from mirage_xdsl.target.device import MAX_FORLOOP_RANGE

_OP_NAME = re.compile(r"(kn|tb)_([a-z0-9_]+?)_op")


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
        """Parse the DTensor/STensor descriptor `value` (`what` names it): its guid, the first `num_dims` entries of `dim` as
        the shape (elements per dim), the era's element type for `data_type` and, for an STensor (`smem`), `after_accum`
        when present (else None).

        Raises:
            RuleError: a missing or mistyped field, num_dims outside 1..16, fewer `dim` entries than num_dims, a dim < 1,
                or a data_type unknown in this era.
        """
        obj = json_object(value, what)
        guid = json_int(json_field(obj, "guid", what), f"{what}.guid", -(2**63), 2**63)
        rank = json_int(json_field(obj, "num_dims", what), f"{what}.num_dims", 1, 16)
        dims = json_list(json_field(obj, "dim", what), f"{what}.dim")
        if len(dims) < rank:
            raise RuleError(f"{what}.dim has {len(dims)} entries for num_dims = {rank}")
        shape = tuple(json_int(d, f"{what}.dim[{i}]", 1) for i, d in enumerate(dims[:rank]))
        code = json_int(json_field(obj, "data_type", what), f"{what}.data_type")
        dtype = self.dtypes.get(code)
        if dtype is None:
            known = ", ".join(f"{c}={t}" for c, t in sorted(self.dtypes.items()))
            raise RuleError(f"{what}: unknown data_type {code} for era {self.era} (known: {known})")
        after = None
        if smem and "after_accum" in obj:
            after = obj["after_accum"]
            if not isinstance(after, bool):
                raise RuleError(f"{what}.after_accum must be true or false")
        return _Tensor(guid, shape, dtype, after)

    def tensors(self, op: dict[str, Any], key: str, count: int | None, smem: bool) -> list[_Tensor]:
        """The descriptors in list field `key` (`input_tensors` / `output_tensors`) of `op`; STensors when `smem`.

        Raises:
            RuleError: the field is missing or not a list, has other than `count` entries (unless None), or holds a
                malformed descriptor (`tensor`).
        """
        items = json_list(json_field(op, key), f"'{key}'")
        if count is not None and len(items) != count:
            raise RuleError(f"expects {count} {key}, got {len(items)}")
        return [self.tensor(t, f"{key}[{i}]", smem) for i, t in enumerate(items)]

    @staticmethod
    def check(desc: _Tensor, value: SSAValue, what: str, role: str) -> None:
        """The stored descriptor `desc` must describe `value` (shape, dtype, after_accum)."""
        shape = shape_of(value)
        if desc.shape != shape:
            raise RuleError(f"{what} (guid {desc.guid}): stored dims {fmt_dims(desc.shape)} but {role} {fmt_dims(shape)}")
        dtype = element_type_of(value)
        if desc.dtype != dtype:
            raise RuleError(f"{what} (guid {desc.guid}): stored data_type is {desc.dtype} but {role} {dtype}")
        typ = value.type
        if desc.after_accum is not None and isinstance(typ, STensorType) and desc.after_accum != typ.is_after_accum:
            raise RuleError(
                f"{what} (guid {desc.guid}): stored after_accum = {str(desc.after_accum).lower()} but {role} "
                f"after_accum = {str(typ.is_after_accum).lower()}"
            )

    def resolve(
        self, op: dict[str, Any], count: int | None, table: dict[int, SSAValue], smem: bool
    ) -> list[SSAValue]:
        """The values `op`'s `input_tensors` reference by guid in `table` (`count` of them unless None), each descriptor
        checked against its producer (shape, dtype, after_accum).

        Raises:
            RuleError: a malformed or miscounted entry, a guid no earlier operator produces, or a stored descriptor that
                differs from its producer.
        """
        values = []
        for i, desc in enumerate(self.tensors(op, "input_tensors", count, smem)):
            value = table.get(desc.guid)
            if value is None:
                raise RuleError(f"input_tensors[{i}] references guid {desc.guid}, which no earlier operator produces")
            self.check(desc, value, f"input_tensors[{i}]", "its producer has")
            values.append(value)
        return values

    def bind(self, op: dict[str, Any], values: Sequence[SSAValue], table: dict[int, SSAValue], smem: bool) -> None:
        """Check `op`'s `output_tensors` (one per value of `values`) against the recomputed results and map each guid to its
        value in `table`.

        Raises:
            RuleError: a malformed or miscounted entry, a descriptor that differs from its result, or a guid that an earlier
                operator already produces.
        """
        for i, desc in enumerate(self.tensors(op, "output_tensors", len(values), smem)):
            self.check(desc, values[i], f"output_tensors[{i}]", "the recomputed result has")
            if desc.guid in table:
                raise RuleError(f"output_tensors[{i}]: guid {desc.guid} is already produced by an earlier operator")
            table[desc.guid] = values[i]

    # -- scalar parameters ------------------------------------------------------------

    @staticmethod
    def scalar(op: dict[str, Any]) -> float:
        """The `mul_scalar` factor: the first key of SCALAR_KEYS present in `op`, else DEFAULT_SCALAR (0.0).

        Raises:
            RuleError: the value is not a number.
        """
        for key in SCALAR_KEYS:
            if key in op:
                return json_number(op[key], f"'{key}'")
        return DEFAULT_SCALAR

    @staticmethod
    def clamp_bounds(op: dict[str, Any]) -> tuple[float, float]:
        """The clamp (min, max) from the first key pair of CLAMP_KEYS with either key in `op`; a missing bound takes its
        DEFAULT_CLAMP (0.0, 1.0) value.

        Raises:
            RuleError: a bound is not a number.
        """
        for lo_key, hi_key in CLAMP_KEYS:
            if lo_key in op or hi_key in op:
                lo = json_number(op[lo_key], f"'{lo_key}'") if lo_key in op else DEFAULT_CLAMP[0]
                hi = json_number(op[hi_key], f"'{hi_key}'") if hi_key in op else DEFAULT_CLAMP[1]
                return lo, hi
        return DEFAULT_CLAMP

    @staticmethod
    def name_dim(match: re.Match[str], op: dict[str, Any], key: str, rank: int) -> int:
        """The dim written in the operator name (group 1 of `match`, e.g. `reduction_1`), checked against field `key` of `op`
        when present and against the operand's `rank`.

        Raises:
            RuleError: field `key` contradicts the name's dim, or the dim is not below `rank`.
        """
        dim = int(match.group(1))
        if key in op and op[key] != dim:
            raise RuleError(f"'{key}' = {json.dumps(op[key])[:20]} contradicts the dim {dim} in the operator name")
        if dim >= rank:
            raise RuleError(f"dim {dim} is not a dimension of a rank-{rank} tensor")
        return dim

    # -- files and graphs ---------------------------------------------------------------

    def module(self, data: Any) -> ModuleOp:
        """The module of the parsed file `data`: one `func.func @graph_<N>` per candidate kernel graph (an array of operator
        objects is one kernel graph).

        Raises:
            MugraphImportError: `data` or a graph is not a JSON array, or a graph does not import (`graph`).
        """
        if not isinstance(data, list):
            raise MugraphImportError(
                f"{self.name}: the top level must be a JSON array of kernel graphs, got {json_kind(data)}"
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
                    f"got {json_kind(graph)}"
                )
            funcs.append(self.graph(gi, graph))
        return ModuleOp(funcs)

    def graph(self, gi: int, ops: list[Any]) -> FuncOp:
        """Kernel graph `gi` (its operator list `ops`) as a verified `func.func @graph_<gi>`: `kn_input_op`s become arguments,
        `kn_output_op`s results (both with `kn.strides` attributes, result ones only when stored), the rest `kn.*` ops.

        Raises:
            MugraphImportError: a broken rule, a shape error or a failed verifier, located by graph and operator index.
        """
        block = Block()
        table: dict[int, SSAValue] = {}
        arg_strides: list[tuple[int, ...]] = []
        results: list[SSAValue] = []
        res_strides: list[tuple[int, ...] | None] = []
        for oi, op in enumerate(ops):
            op_type = op.get("op_type") if isinstance(op, dict) else None
            loc = f"graph {gi}, op {oi} ({show_name(op_type)})"
            try:
                if not isinstance(op, dict):
                    raise RuleError(f"an operator must be a JSON object, got {json_kind(op)}")
                if not isinstance(op_type, str):
                    raise RuleError("an operator needs a string field 'op_type'")
                if op_type == "kn_input_op":
                    self.tensors(op, "input_tensors", 0, False)
                    (desc,) = self.tensors(op, "output_tensors", 1, False)
                    strides = self.strides(op, "input_strides", len(desc.shape))
                    arg = block.insert_arg(TensorType(desc.dtype, desc.shape), len(block.args))
                    arg_strides.append(strides or tiling.row_major_strides(desc.shape))
                    if desc.guid in table:
                        raise RuleError(f"output_tensors[0]: guid {desc.guid} is already produced by an earlier operator")
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
            except RuleError as rule:
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
        """The strides (elements per dim) in list field `key` of `op`; () when the field is absent or empty.

        Raises:
            RuleError: the field is not a list, has other than `rank` entries, or holds an entry that is not an int >= 0.
        """
        if key not in op:
            return ()
        items = json_list(op[key], f"'{key}'")
        if items and len(items) != rank:
            raise RuleError(f"'{key}' has {len(items)} entries for a rank-{rank} tensor")
        return tuple(json_int(s, f"{key}[{i}]", 0) for i, s in enumerate(items))

    # -- kernel-level operators -------------------------------------------------------

    def kn_op(self, op: dict[str, Any], op_type: str, table: dict[int, SSAValue], loc: str) -> Operation:
        """The `kn.*` op of the kernel operator `op` of type `op_type`, its inputs resolved in `table`; a
        `kn_customized_op` goes to `customized` (`loc` locates its threadblock operators).

        Raises:
            RuleError: an unknown type, a malformed field, wrong arity, an unresolved or mismatched input, or a bad dim.
            tiling.ShapeError: the op's shape rules reject its operands (e.g. a chunk count that does not divide the dim).
        """
        match = _OP_NAME.fullmatch(op_type)
        body = match.group(2) if match and match.group(1) == "kn" else None
        if body is None:
            raise RuleError(f"unknown kernel operator type '{show_name(op_type)}'")
        if body == "customized":
            return self.customized(op, table, loc)
        if body in KN_UNARY:
            (x,) = self.resolve(op, 1, table, False)
            return KN_UNARY[body](x)
        if body == "mul_scalar":
            (x,) = self.resolve(op, 1, table, False)
            return kn.MulScalarOp(x, self.scalar(op))
        if body == "clamp":
            (x,) = self.resolve(op, 1, table, False)
            return kn.ClampOp(x, *self.clamp_bounds(op))
        if body in KN_BINARY:
            lhs, rhs = self.resolve(op, 2, table, False)
            return KN_BINARY[body](lhs, rhs)
        if body == "rms_norm":
            (x,) = self.resolve(op, 1, table, False)
            shape = shape_of(x)
            if "normalized_shape" in op:
                norm = tuple(
                    json_int(d, f"normalized_shape[{i}]", 1)
                    for i, d in enumerate(json_list(op["normalized_shape"], "'normalized_shape'"))
                )
            else:
                norm = shape[-1:]
            return kn.RmsNormOp(x, norm)
        if body in ("allreduce", "all_reduce"):
            (x,) = self.resolve(op, 1, table, False)
            inplace = op.get("inplace", False)
            if not isinstance(inplace, bool):
                raise RuleError("'inplace' must be true or false")
            return kn.AllReduceOp(x, inplace)
        if m := re.fullmatch(r"reduction_(\d)", body):
            (x,) = self.resolve(op, 1, table, False)
            dim = self.name_dim(m, op, "reduce_dim", len(shape_of(x)))
            size = json_int(op["reduce_size"], "'reduce_size'", 1) if "reduce_size" in op else 1
            return kn.ReductionOp(x, dim, size)
        if m := re.fullmatch(r"concat_(\d)", body):
            lhs, rhs = self.resolve(op, 2, table, False)
            return kn.ConcatOp(lhs, rhs, self.name_dim(m, op, "concat_dim", len(shape_of(lhs))))
        if m := re.fullmatch(r"chunk_(\d)", body):
            (x,) = self.resolve(op, 1, table, False)
            dim = self.name_dim(m, op, "chunk_dim", len(shape_of(x)))
            outs = json_list(json_field(op, "output_tensors"), "'output_tensors'")
            chunks = json_int(op["chunk_size"], "'chunk_size'", 1, 4096) if "chunk_size" in op else len(outs)
            if chunks < 1:
                raise RuleError("a chunk operator needs at least one output tensor")
            return kn.ChunkOp(x, chunks, dim)
        raise RuleError(f"unknown or unsupported kernel operator type '{show_name(op_type)}'")

    def customized(self, op: dict[str, Any], table: dict[int, SSAValue], loc: str) -> Operation:
        """The `kn.customized` op of a `kn_customized_op`: inputs resolved in `table`, `bgraph` as the body (block_dim
        defaults to (128, 1, 1), reduction_dimx to 64); the i-th `tb_input_op` loads block argument i and the i-th
        `tb_output_op` yields result i.  Tile and output shapes are recomputed and checked against the stored dims; `loc`
        prefixes the tb ops' locations for the verifier.  The op is marked `kn.SAVED_PLAN_ATTR`.

        Raises:
            RuleError: a malformed field, forloop_range above MAX_FORLOOP_RANGE, a `dtensor` whose guid or shape differs
                from the customized input/output it binds to, a tile that differs from the stored dims, or a tb
                input/output count that differs from the op's; errors of a tb operator name it in `sub`.
        """
        in_descs = self.tensors(op, "input_tensors", None, False)
        inputs = self.resolve(op, None, table, False)
        out_descs = self.tensors(op, "output_tensors", None, False)
        bgraph = json_object(json_field(op, "bgraph"), "'bgraph'")
        grid = json_int3(bgraph, "grid_dim", 1, 2**31 - 1)
        block_dim = json_int3(bgraph, "block_dim", 1, 2**31 - 1) if "block_dim" in bgraph else (128, 1, 1)
        forloop_range = json_int(json_field(bgraph, "forloop_range", "'bgraph'"), "forloop_range", 1, 2**31 - 1)
        if forloop_range > MAX_FORLOOP_RANGE:  # before the tiles are cut by it
            raise RuleError(
                f"forloop_range = {forloop_range} exceeds {MAX_FORLOOP_RANGE} (the most iterations the reference "
                "executor checks in seconds, target/device.py); take longer tiles per iteration"
            )
        dimx = json_int(bgraph.get("reduction_dimx", 64), "reduction_dimx", 1, 2**31 - 1)
        operators = json_list(json_field(bgraph, "operators", "'bgraph'"), "'bgraph.operators'")

        body = Block(arg_types=[v.type for v in inputs])
        stable: dict[int, SSAValue] = {}
        n_inputs = 0
        outputs: list[tuple[SSAValue, tuple[int, ...]]] = []
        for ti, top in enumerate(operators):
            top_type = top.get("op_type") if isinstance(top, dict) else None
            tloc = f"tb op {ti} ({show_name(top_type)})"
            try:
                if not isinstance(top, dict):
                    raise RuleError(f"an operator must be a JSON object, got {json_kind(top)}")
                if not isinstance(top_type, str):
                    raise RuleError("an operator needs a string field 'op_type'")
                if top_type == "tb_input_op":
                    if n_inputs >= len(inputs):
                        raise RuleError(f"more tb_input_op operators than the {len(inputs)} customized inputs")
                    arg = body.args[n_inputs]
                    dt = self.tensor(json_field(top, "dtensor"), "dtensor", False)
                    if dt.guid != in_descs[n_inputs].guid:
                        raise RuleError(
                            f"dtensor guid {dt.guid} differs from customized input {n_inputs} "
                            f"(guid {in_descs[n_inputs].guid}); tb inputs bind positionally"
                        )
                    self.check(dt, arg, "dtensor", f"customized input {n_inputs} has")
                    imap = json_int3(top, "input_map", -MAX_INT)
                    fdim = json_int(json_field(top, "forloop_dim"), "forloop_dim", -MAX_INT)
                    self.tensors(top, "input_tensors", 0, True)
                    tile = tiling.input_tile_shape(shape_of(arg), grid, imap, fdim, forloop_range)
                    (desc,) = self.tensors(top, "output_tensors", 1, True)
                    if desc.shape != tile:
                        raise RuleError(self.tile_mismatch(desc.shape, tile, shape_of(arg), grid, imap, fdim, forloop_range))
                    new: Operation = tb.InputOp(arg, imap, fdim, tile)
                    n_inputs += 1
                elif top_type == "tb_output_op":
                    (value,) = self.resolve(top, 1, stable, True)
                    self.tensors(top, "output_tensors", 0, True)
                    omap = json_int3(top, "output_map", -MAX_INT)
                    if "forloop_dim" in top and top["forloop_dim"] != -1:
                        raise RuleError(f"an output's forloop_dim must be -1, got {json.dumps(top['forloop_dim'])[:20]}")
                    shape = tiling.output_dtensor_shape(shape_of(value), grid, omap)
                    k = len(outputs)
                    if k >= len(out_descs):
                        raise RuleError(f"more tb_output_op operators than the {len(out_descs)} customized outputs")
                    dt = self.tensor(json_field(top, "dtensor"), "dtensor", False)
                    if dt.shape != shape:
                        raise RuleError(
                            f"dtensor dims {fmt_dims(dt.shape)} differ from the shape {fmt_dims(shape)} recomputed from "
                            f"tile {fmt_dims(shape_of(value))}, grid {fmt_dims(grid)}, output_map {fmt_dims(omap)}"
                        )
                    if dt.guid != out_descs[k].guid:
                        raise RuleError(
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
            except (RuleError, tiling.ShapeError, VerifyException) as err:
                raise RuleError(str(err), sub=tloc) from None
        if n_inputs != len(inputs):
            raise RuleError(f"bgraph has {n_inputs} tb_input_op operators for {len(inputs)} customized inputs")
        if len(outputs) != len(out_descs):
            raise RuleError(f"bgraph has {len(outputs)} tb_output_op operators for {len(out_descs)} customized outputs")
        result_types = [TensorType(element_type_of(v), shape) for v, shape in outputs]
        kernel = kn.CustomizedOp(
            inputs,
            result_types,
            body,
            grid_dim=grid,
            block_dim=block_dim,
            forloop_range=forloop_range,
            reduction_dimx=dimx,
        )
        kernel.attributes[kn.SAVED_PLAN_ATTR] = UnitAttr()  # a plan Mirage's search found
        return kernel

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
        """The message for a `tb_input_op` whose stored tile dims `stored` differ from the `tile` recomputed from the
        dtensor shape `dshape`, grid, input map, forloop_dim and forloop_range: the rank, else the first differing dim.
        """
        ctx = (
            f"(dtensor {fmt_dims(dshape)}, grid {fmt_dims(grid)}, input_map {fmt_dims(imap)}, forloop_dim {fdim}, "
            f"forloop_range {forloop_range}); stored dims {fmt_dims(stored)}"
        )
        if len(stored) != len(tile):
            return f"tile rank {len(tile)} (shape {fmt_dims(tile)}) differs from the stored rank {len(stored)} {ctx}"
        d = next(i for i, (a, b) in enumerate(zip(stored, tile)) if a != b)
        return f"tile dim {d} (size {tile[d]}) recomputed from the maps differs from the stored size {stored[d]} {ctx}"

    # -- threadblock-level operators ------------------------------------------------------

    def tb_op(self, op: dict[str, Any], op_type: str, table: dict[int, SSAValue], dimx: int) -> Operation:
        """The `tb.*` op of the threadblock operator `op` of type `op_type`, its inputs resolved in `table`; `dimx` is the
        graph's reduction_dimx (accumulators, `reduction_*_to_dimx`).  Both `tb_accum_*` and `tb_forloop_accum_*` names.

        Raises:
            RuleError: an unknown type or accumulator, a malformed field, wrong arity, an unresolved or mismatched input,
                or a bad dim.
            tiling.ShapeError: the op's shape rules reject its operands.
        """
        match = _OP_NAME.fullmatch(op_type)
        body = match.group(2) if match and match.group(1) == "tb" else None
        if body is None:
            raise RuleError(f"unknown threadblock operator type '{show_name(op_type)}'")
        if body in TB_UNARY:
            (x,) = self.resolve(op, 1, table, True)
            return TB_UNARY[body](x)
        if body == "mul_scalar":
            (x,) = self.resolve(op, 1, table, True)
            return tb.MulScalarOp(x, self.scalar(op))
        if body == "clamp":
            (x,) = self.resolve(op, 1, table, True)
            return tb.ClampOp(x, *self.clamp_bounds(op))
        if body in TB_BINARY:
            lhs, rhs = self.resolve(op, 2, table, True)
            return TB_BINARY[body](lhs, rhs)
        if m := re.fullmatch(r"(?:forloop_)?accum_([a-z_]+)", body):
            kind = m.group(1)
            if kind not in tiling.ACCUMULATOR_KINDS:
                raise RuleError(f"unknown accumulator '{show_name(op_type)}'")
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
        raise RuleError(f"unknown or unsupported threadblock operator type '{show_name(op_type)}'")


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
