"""Semantic checks of a parsed TC definition: names, types, ranges, shapes, dependencies.

`check(program, name)` returns a `CheckedDef` (`checked_def.py`) (element types and symbolic shapes of every
tensor, and for each statement the range of every index) or raises a located `TcError`.
`bind_sizes(checked, sizes)` turns the symbolic shapes and ranges into ints for concrete
sizes and checks that every access stays in bounds.

Rules (each violation is a `TcError` naming the variable and the rule):
  * every assigned tensor is a declared output (a temporary that is neither input nor
    output is invalid), inputs are never assigned, and every output is assigned;
  * tensor dependencies form a DAG (a statement may update its own tensor in place);
  * a tensor is read only after a statement assigned it; an accumulating operator without
    `!` (`+=`, ...) needs an earlier assignment of its tensor, with the same reduction;
  * indices only on the right-hand side are reduction indices, which need an accumulating
    operator; an index's range comes from the tensor dims it subscripts (all of the same
    size) unless a `where` clause gives it; an index only used inside affine subscripts
    (`I(i + j)`) or only on the left-hand side needs a `where` clause;
  * accesses have one subscript per dim; the tensors read by one statement share one
    element type; function names and arities are those of `parser.FUNCTIONS`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from mirage_xdsl.frontends.tc.ast_nodes import Access, Binary, Call, Expr, Loc, Name, Number, Param, Program, Statement, TcDef, Unary
from mirage_xdsl.frontends.tc.checked_def import DTYPES, ZERO, BoundDef, CheckedDef, SizeExpr, StatementInfo, TensorInfo
from mirage_xdsl.frontends.tc.errors import TcError
from mirage_xdsl.frontends.tc.parser import FUNCTIONS

__all__ = ["bind_sizes", "check", "select_def"]


def accesses(expr: Expr) -> Iterator[Access]:
    """Every tensor access of an expression, left to right (nested ones included).

    Raises:
        nothing.
    """
    if isinstance(expr, Access):
        yield expr
    elif isinstance(expr, Call):
        for arg in expr.args:
            yield from accesses(arg)
    elif isinstance(expr, Unary):
        yield from accesses(expr.operand)
    elif isinstance(expr, Binary):
        yield from accesses(expr.lhs)
        yield from accesses(expr.rhs)


def _subexprs(expr: Expr) -> Iterator[Expr]:
    yield expr
    children: tuple[Expr, ...] = ()
    if isinstance(expr, Call):
        children = expr.args
    elif isinstance(expr, Unary):
        children = (expr.operand,)
    elif isinstance(expr, Binary):
        children = (expr.lhs, expr.rhs)
    for child in children:
        yield from _subexprs(child)


def select_def(program: Program, name: str | None) -> TcDef:
    """The definition called `name`, or the only one when `name` is None.

    Raises:
        TcError: duplicate definition names, no such name, or several defs and no name.
    """
    seen: dict[str, TcDef] = {}
    for d in program.defs:
        if d.name in seen:
            raise TcError(f"duplicate definition '{d.name}'", d.loc.line, d.loc.col, program.filename)
        seen[d.name] = d
    if name is None:
        if len(program.defs) > 1:
            first = program.defs[1].loc
            raise TcError(
                f"the source defines {', '.join(seen)}; choose one by name", first.line, first.col, program.filename
            )
        return program.defs[0]
    if name not in seen:
        loc = program.defs[0].loc
        raise TcError(f"no definition named '{name}' (defined: {', '.join(seen)})", loc.line, loc.col, program.filename)
    return seen[name]


@dataclass
class _Checker:
    tree: TcDef
    filename: str
    inputs: dict[str, TensorInfo] = field(default_factory=dict)
    outputs: dict[str, TensorInfo] = field(default_factory=dict)
    symbols: dict[str, Loc] = field(default_factory=dict)
    assigned: dict[str, Statement] = field(default_factory=dict)  # tensor -> latest statement
    edges: dict[str, set[str]] = field(default_factory=dict)  # tensor -> tensors that read it
    infos: list[StatementInfo] = field(default_factory=list)

    def fail(self, message: str, loc: Loc) -> TcError:
        """A `TcError` with `message` located at `loc` in this definition's file (returned, not raised).

        Raises:
            nothing.
        """
        return TcError(message, loc.line, loc.col, self.filename)

    # ---- signature
    def check_signature(self) -> None:
        """Check the inputs (`check_param`) and the declared outputs, recording them in `declared_outputs`.

        Raises:
            TcError: a bad input, an output that is also an input or is listed twice, or an output
                name that shadows a built-in function or clashes with a size symbol.
        """
        for param in self.tree.params:
            self.check_param(param)
        declared: dict[str, Loc] = {}
        for name, loc in self.tree.outputs:
            if name in self.inputs:
                raise self.fail(f"output '{name}' is also an input; inputs cannot be assigned", loc)
            if name in declared:
                raise self.fail(f"output '{name}' is listed twice", loc)
            self.check_tensor_name(name, loc)
            declared[name] = loc
        self.declared_outputs = declared

    def check_param(self, param: Param) -> None:
        """Check one input and record its size symbols and its `TensorInfo` (kernel-graph dtype, symbolic shape).

        Raises:
            TcError: a duplicate parameter name, a name clashing with a function or size symbol, an
                unknown element type, no dims (scalar input), an int dim below 1, or a size symbol
                named like a tensor.
        """
        if param.name in self.inputs:
            raise self.fail(f"duplicate parameter name '{param.name}'", param.loc)
        self.check_tensor_name(param.name, param.loc)
        if param.dtype not in DTYPES:
            raise self.fail(
                f"unknown element type '{param.dtype}' of input '{param.name}' (expected one of {', '.join(DTYPES)})",
                param.loc,
            )
        if not param.dims:
            raise self.fail(f"input '{param.name}' has no dimensions; scalar inputs are not supported", param.loc)
        for dim, loc in zip(param.dims, param.dim_locs):
            if isinstance(dim, int) and dim < 1:
                raise self.fail(f"dimension of input '{param.name}' must be positive, got {dim}", loc)
            if isinstance(dim, str):
                if dim in self.inputs or dim == param.name:
                    raise self.fail(f"size symbol '{dim}' clashes with tensor '{dim}'", loc)
                self.symbols.setdefault(dim, loc)
        self.inputs[param.name] = TensorInfo(DTYPES[param.dtype], tuple(SizeExpr.of(d) for d in param.dims))

    def check_tensor_name(self, name: str, loc: Loc) -> None:
        """Check that a tensor name is neither a built-in function nor a size symbol declared so far.

        Raises:
            TcError: the name shadows a function of `FUNCTIONS` or clashes with a size symbol.
        """
        if name in FUNCTIONS:
            raise self.fail(f"tensor name '{name}' shadows the built-in function '{name}'", loc)
        if name in self.symbols:
            raise self.fail(f"tensor name '{name}' clashes with size symbol '{name}'", loc)

    # ---- statements
    def check_statement(self, stmt: Statement) -> None:
        """Check one statement and record its output's shape and type, its dependencies and its `StatementInfo`.

        Raises:
            TcError: the first rule violation of the statement (target, names, accesses, indices,
                operator, ranges, element types, output shape, or a dependency cycle).
        """
        self.check_target(stmt)
        self.check_expr_names(stmt)
        for access in accesses(stmt.rhs):
            self.check_access(stmt, access)
        lhs = self.check_lhs_indices(stmt)
        reductions = self.reduction_indices(stmt, lhs)
        self.check_operator(stmt, reductions)
        ranges = self.infer_ranges(stmt, lhs, reductions)
        dtype = self.statement_dtype(stmt)
        self.record_output(stmt, lhs, ranges, dtype)
        self.add_dependencies(stmt)
        self.assigned[stmt.tensor] = stmt
        self.infos.append(StatementInfo(lhs, reductions, ranges, dtype))

    def check_target(self, stmt: Statement) -> None:
        """The assigned tensor is a declared output, and `+=` etc. continue its last reduction."""
        name = stmt.tensor
        if name in self.inputs:
            raise self.fail(f"cannot assign to input '{name}'; inputs are read-only", stmt.loc)
        if name in FUNCTIONS or name in self.symbols:
            self.check_tensor_name(name, stmt.loc)
        if name not in self.declared_outputs:
            raise self.fail(
                f"'{name}' is neither an input nor an output; TC allocates no temporaries, "
                f"so list '{name}' among the outputs",
                stmt.loc,
            )
        base = stmt.reduction_base
        if base and not stmt.initialises:
            previous = self.assigned.get(name)
            if previous is None:
                raise self.fail(
                    f"'{name}' is accumulated with '{stmt.op}' before any statement assigns it; "
                    f"use '{stmt.op}!' to start from the reduction's identity",
                    stmt.op_loc,
                )
            if previous.reduction_base and previous.reduction_base != base:
                raise self.fail(
                    f"reduction operators mixed on '{name}': '{stmt.op}' continues a '{previous.op}' reduction",
                    stmt.op_loc,
                )

    def check_expr_names(self, stmt: Statement) -> None:
        """Check every function call and every bare name of the statement's right-hand side.

        Raises:
            TcError: an unknown function or wrong arity (`check_call`), or a bare name that is not a
                size symbol (`check_value_name`).
        """
        lhs_names = {i for i, _ in stmt.indices}
        rhs_names = {n for a in accesses(stmt.rhs) for ix in a.indices for n in ix.names}
        for expr in _subexprs(stmt.rhs):
            if isinstance(expr, Call):
                self.check_call(expr)
            elif isinstance(expr, Name):
                self.check_value_name(expr, lhs_names | rhs_names)

    def check_call(self, call: Call) -> None:
        """Check that a call names a function of `FUNCTIONS` with its arity.

        Raises:
            TcError: a tensor called with non-affine subscripts, an unknown function, or the wrong
                number of arguments.
        """
        if call.func not in FUNCTIONS:
            if call.func in self.inputs or call.func in self.declared_outputs:
                raise self.fail(f"subscripts of '{call.func}' must be affine index expressions", call.loc)
            raise self.fail(f"unknown function '{call.func}' (known: {', '.join(FUNCTIONS)})", call.loc)
        arity = FUNCTIONS[call.func]
        if len(call.args) != arity:
            raise self.fail(f"function '{call.func}' takes {arity} argument(s), got {len(call.args)}", call.loc)

    def check_value_name(self, name: Name, indices: set[str]) -> None:
        """Check that a bare name in value position is a size symbol (`indices`: the statement's index names).

        Raises:
            TcError: the name is an index, a tensor without subscripts, or undefined.
        """
        if name.name in self.symbols:
            return
        if name.name in indices:
            raise self.fail(f"index '{name.name}' used as a value; indices may only subscript tensors", name.loc)
        if name.name in self.inputs or name.name in self.declared_outputs:
            raise self.fail(f"tensor '{name.name}' used without subscripts", name.loc)
        raise self.fail(f"undefined name '{name.name}' (not a size symbol)", name.loc)

    def tensor_info(self, name: str) -> TensorInfo | None:
        """The `TensorInfo` of an input or of an output assigned so far, else None."""
        return self.inputs.get(name) or self.outputs.get(name)

    def check_access(self, stmt: Statement, access: Access) -> None:
        """Check a tensor read: a known tensor, already assigned, one subscript per dim, no clashing index names.

        Raises:
            TcError: an undefined tensor, an output read before a statement assigns it, a subscript
                count other than the tensor's rank, or an index named like a size symbol or tensor.
        """
        name = access.tensor
        if name not in self.inputs and name not in self.declared_outputs:
            raise self.fail(f"undefined tensor '{name}'", access.loc)
        if name in self.declared_outputs and name not in self.assigned:
            what = "its own statement" if name == stmt.tensor else "any statement"
            raise self.fail(f"'{name}' is read before {what} assigns it", access.loc)
        info = self.tensor_info(name)
        assert info is not None  # assigned outputs are recorded
        if len(access.indices) != len(info.shape):
            raise self.fail(
                f"'{name}' has {len(info.shape)} dimension(s) but is accessed with {len(access.indices)} subscript(s)",
                access.loc,
            )
        for ix in access.indices:
            for index in ix.names:
                if index in self.symbols or index in self.inputs or index in self.declared_outputs:
                    raise self.fail(f"index '{index}' clashes with a size symbol or tensor of that name", ix.loc)

    def check_lhs_indices(self, stmt: Statement) -> tuple[str, ...]:
        """The left-hand side index names, in order.

        Raises:
            TcError: an index repeated on the left-hand side or named like a size symbol or tensor.
        """
        seen: set[str] = set()
        for index, loc in stmt.indices:
            if index in seen:
                raise self.fail(f"index '{index}' repeated on the left-hand side of '{stmt.tensor}'", loc)
            if index in self.symbols or index in self.inputs or index in self.declared_outputs:
                raise self.fail(f"index '{index}' clashes with a size symbol or tensor of that name", loc)
            seen.add(index)
        return tuple(i for i, _ in stmt.indices)

    @staticmethod
    def reduction_indices(stmt: Statement, lhs: tuple[str, ...]) -> tuple[str, ...]:
        """The indices read on the right-hand side but absent from `lhs`, in order of first use: the reduction indices."""
        found: list[str] = []
        for access in accesses(stmt.rhs):
            for ix in access.indices:
                found += [n for n in ix.names if n not in lhs and n not in found]
        return tuple(found)

    def check_operator(self, stmt: Statement, reductions: tuple[str, ...]) -> None:
        """Check that a statement with reduction indices uses an accumulating operator.

        Raises:
            TcError: there are reduction indices but the operator is `=`.
        """
        if reductions and stmt.reduction_base is None:
            raise self.fail(
                f"index '{reductions[0]}' appears only on the right-hand side, so it is a reduction index, "
                f"but '=' is not a reduction operator (use +=!, *=!, min=! or max=!)",
                stmt.op_loc,
            )

    # ---- ranges
    def where_ranges(self, stmt: Statement, used: set[str]) -> dict[str, tuple[SizeExpr, SizeExpr]]:
        """`index -> (lo, hi)` given by the statement's where clause, for indices in `used`.

        Raises:
            TcError: an index with two where ranges, a where index the statement does not use, or a
                bound that is not ints and size symbols combined with + and - (`size_expr`).
        """
        ranges: dict[str, tuple[SizeExpr, SizeExpr]] = {}
        for rng in stmt.ranges:
            if rng.index in ranges:
                raise self.fail(f"index '{rng.index}' has two where ranges", rng.loc)
            if rng.index not in used:
                raise self.fail(f"where clause binds index '{rng.index}', which the statement does not use", rng.loc)
            ranges[rng.index] = (self.size_expr(rng.lo), self.size_expr(rng.hi))
        return ranges

    def size_expr(self, expr: Expr) -> SizeExpr:
        """A where bound: ints and size symbols combined with + and -."""
        if isinstance(expr, Number) and expr.is_int:
            return SizeExpr((), int(expr.value))
        if isinstance(expr, Name) and expr.name in self.symbols:
            return SizeExpr.of(expr.name)
        if isinstance(expr, Binary) and expr.op in "+-":
            return self.size_expr(expr.lhs).combine(self.size_expr(expr.rhs), 1 if expr.op == "+" else -1)
        if isinstance(expr, Unary):
            return ZERO.combine(self.size_expr(expr.operand), -1)
        loc = expr.loc
        if isinstance(expr, Name):
            raise self.fail(f"undefined size symbol '{expr.name}' in where clause", loc)
        raise self.fail("where bounds must be ints and size symbols combined with + and -", loc)

    def infer_ranges(
        self, stmt: Statement, lhs: tuple[str, ...], reductions: tuple[str, ...]
    ) -> dict[str, tuple[SizeExpr, SizeExpr]]:
        """`index -> (lo, hi)`: where clauses first, else the size of every dim the index
        subscripts plainly (those sizes must agree); affine subscripts infer nothing."""
        used = set(lhs) | set(reductions)
        ranges = self.where_ranges(stmt, used)
        inferred: dict[str, tuple[SizeExpr, str]] = {}
        for access in accesses(stmt.rhs):
            info = self.tensor_info(access.tensor)
            assert info is not None
            for dim, (ix, size) in enumerate(zip(access.indices, info.shape)):
                index = ix.plain_name
                if index is None or index in ranges:
                    continue
                where = f"dim {dim} of '{access.tensor}'"
                if index in inferred and inferred[index][0] != size:
                    first_size, first_where = inferred[index]
                    raise self.fail(
                        f"inconsistent ranges for index '{index}': {first_where} has size {first_size} "
                        f"but {where} has size {size}",
                        ix.loc,
                    )
                inferred.setdefault(index, (size, where))
        for index, (size, _) in inferred.items():
            ranges.setdefault(index, (ZERO, size))
        for index in (*lhs, *reductions):
            if index not in ranges:
                raise self.fail(self.unbound_message(stmt, index, lhs), self.index_loc(stmt, index))
        for index, loc in stmt.indices:
            if ranges[index][0] != ZERO:
                raise self.fail(
                    f"not supported yet: left-hand side index '{index}' must range from 0 (it starts at {ranges[index][0]})",
                    loc,
                )
        return ranges

    @staticmethod
    def unbound_message(stmt: Statement, index: str, lhs: tuple[str, ...]) -> str:
        """The error message for an index without a range: only on the left-hand side, or only in affine subscripts."""
        if index in lhs and not any(index in ix.names for a in accesses(stmt.rhs) for ix in a.indices):
            return (
                f"index '{index}' of '{stmt.tensor}' is not bound: it appears only on the left-hand side; "
                f"add 'where {index} in lo:hi'"
            )
        return (
            f"ambiguous range for index '{index}': it only appears in affine subscripts; "
            f"add 'where {index} in lo:hi'"
        )

    @staticmethod
    def index_loc(stmt: Statement, index: str) -> Loc:
        """Where `index` first appears: on the left-hand side, else in a right-hand side subscript, else the statement."""
        for name, loc in stmt.indices:
            if name == index:
                return loc
        for access in accesses(stmt.rhs):
            for ix in access.indices:
                if index in ix.names:
                    return ix.loc
        return stmt.loc

    # ---- types, shapes, dependencies
    def statement_dtype(self, stmt: Statement) -> str:
        """The element type (kernel-graph dtype name) of the tensors the statement reads.

        A constant right-hand side takes the first input's type (float32 without inputs).

        Raises:
            TcError: two tensors read by the statement differ in element type.
        """
        first: tuple[str, str] | None = None
        for access in accesses(stmt.rhs):
            info = self.tensor_info(access.tensor)
            assert info is not None
            if first is None:
                first = (access.tensor, info.dtype)
            elif info.dtype != first[1]:
                raise self.fail(
                    f"type mismatch: '{first[0]}' is {first[1]} but '{access.tensor}' is {info.dtype}; "
                    f"kernel graphs have no casts",
                    access.loc,
                )
        if first is None:
            params = self.tree.params
            return DTYPES[params[0].dtype] if params else "float32"
        return first[1]

    def record_output(
        self, stmt: Statement, lhs: tuple[str, ...], ranges: dict[str, tuple[SizeExpr, SizeExpr]], dtype: str
    ) -> None:
        """Record the assigned tensor's `TensorInfo` (shape: its left-hand side ranges' upper bounds).

        Raises:
            TcError: a reassignment with another shape or element type than the first assignment.
        """
        info = TensorInfo(dtype, tuple(ranges[i][1] for i in lhs))
        previous = self.outputs.get(stmt.tensor)
        if previous is None:
            self.outputs[stmt.tensor] = info
            return
        if previous.shape != info.shape:
            shape = lambda t: "(" + ", ".join(map(str, t.shape)) + ")"  # noqa: E731
            raise self.fail(
                f"'{stmt.tensor}' reassigned with shape {shape(info)} but it was assigned with shape {shape(previous)}",
                stmt.loc,
            )
        if previous.dtype != dtype:
            raise self.fail(
                f"'{stmt.tensor}' reassigned with element type {dtype} but it was {previous.dtype}", stmt.loc
            )

    def add_dependencies(self, stmt: Statement) -> None:
        """Add read-by edges for the statement, failing on the first one that closes a cycle."""
        target = stmt.tensor
        for access in accesses(stmt.rhs):
            source = access.tensor
            if source == target:
                continue  # an in-place update reads the tensor's previous value
            path = self.path(target, source)
            if path is not None:
                chain = ", which depends on ".join(f"'{t}'" for t in reversed(path))
                raise self.fail(
                    f"cyclic dependency: '{target}' depends on {chain} (tensor dependencies must form a DAG)",
                    access.loc,
                )
            self.edges.setdefault(source, set()).add(target)

    def path(self, start: str, goal: str) -> list[str] | None:
        """Tensors from `start` to `goal` along read-by edges (depth first), or None."""
        stack: list[list[str]] = [[start]]
        seen = {start}
        while stack:
            walk = stack.pop()
            if walk[-1] == goal:
                return walk
            for nxt in sorted(self.edges.get(walk[-1], ())):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append([*walk, nxt])
        return None

    def check_outputs_assigned(self) -> None:
        """Check that some statement assigns every declared output.

        Raises:
            TcError: an output is never assigned.
        """
        for name, loc in self.tree.outputs:
            if name not in self.outputs:
                raise self.fail(f"output '{name}' is never assigned", loc)


def check(program: Program, name: str | None = None) -> CheckedDef:
    """Check one definition of `program` (the only one when `name` is None).

    Returns:
        the `CheckedDef` with inferred shapes (outputs: their left-hand side ranges) and ranges.

    Raises:
        TcError: the first rule violation found, located at the offending token.
    """
    tree = select_def(program, name)
    checker = _Checker(tree, program.filename)
    checker.check_signature()
    for stmt in tree.statements:
        checker.check_statement(stmt)
    checker.check_outputs_assigned()
    outputs = {n: checker.outputs[n] for n, _ in tree.outputs}
    return CheckedDef(tree, program.filename, checker.inputs, outputs, checker.infos, checker.symbols)


def bind_sizes(checked: CheckedDef, sizes: Mapping[str, int]) -> BoundDef:
    """Evaluate shapes and ranges for concrete `sizes` and check every access is in bounds.

    Args:
        checked: a checked definition.
        sizes: `{symbol: int}` for every size symbol of the inputs (extra symbols rejected).

    Returns:
        the `BoundDef` with int shapes per tensor and int ranges per statement.

    Raises:
        TcError: a missing, unknown or non-positive size, an empty range or a non-positive
            output dim, or an access whose subscript leaves its dim.
    """
    tree = checked.tree
    for sym in sizes:
        if sym not in checked.symbols:
            known = ", ".join(checked.symbols) or "none"
            raise checked.error(f"unknown size symbol '{sym}' (the program's sizes: {known})", tree.loc)
    values: dict[str, int] = {}
    for sym, loc in checked.symbols.items():
        if sym not in sizes:
            raise checked.error(f"missing size for '{sym}' (give it in sizes / --tc-sizes, e.g. {sym}=64)", loc)
        value = sizes[sym]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise checked.error(f"size '{sym}' must be a positive int, got {value!r}", loc)
        values[sym] = value
    shapes = {n: tuple(s.evaluate(values) for s in info.shape) for n, info in checked.inputs.items()}
    ranges = []
    for stmt, info in zip(tree.statements, checked.statements):
        bound = {i: (lo.evaluate(values), hi.evaluate(values)) for i, (lo, hi) in info.ranges.items()}
        for index, (lo, hi) in bound.items():
            if lo >= hi:
                raise checked.error(f"index '{index}' has an empty range {lo}:{hi}", _Checker.index_loc(stmt, index))
        shapes.setdefault(stmt.tensor, tuple(bound[i][1] for i in info.lhs))
        _check_bounds(checked, stmt, bound, shapes)
        ranges.append(bound)
    return BoundDef(checked, values, shapes, ranges)


def _check_bounds(
    checked: CheckedDef, stmt: Statement, ranges: dict[str, tuple[int, int]], shapes: dict[str, tuple[int, ...]]
) -> None:
    for access in accesses(stmt.rhs):
        for dim, (ix, size) in enumerate(zip(access.indices, shapes[access.tensor])):
            low = ix.const + sum(c * (ranges[n][0] if c > 0 else ranges[n][1] - 1) for n, c in ix.terms)
            high = ix.const + sum(c * (ranges[n][1] - 1 if c > 0 else ranges[n][0]) for n, c in ix.terms)
            if low < 0 or high >= size:
                raise checked.error(
                    f"subscript '{ix}' of '{access.tensor}' spans {low}..{high} but dim {dim} has size {size}",
                    ix.loc,
                )
