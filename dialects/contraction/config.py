"""Tensor-contraction configurations (seed 004, `docs/seeds/004_306408b5f8fb1a91.txt`).

A `Config` describes a binary contraction `A, B -> Out` as a list of *dimensions* (loop
indices).  Every per-dimension list (`dim_types`, `exec_types`, `dim_sizes`, and each
tensor's stride list) has one entry per dimension, outermost first.  `strides` holds three
lists, in the order `[A, B, Out]`; strides count elements (not bytes), and a stride of 0
means the dimension does not index that tensor.  With `prim_last = ELWISE_MUL` a fourth
tensor D, of the output's shape and layout (addressed with the output's strides), multiplies
the accumulated result elementwise before it is stored: Out = (A x B) * D.

* `generate_config` builds the basic config of an einsum (seed Task 2).
* `verify` checks the four executability rules of seed Task 3e.

Pure Python: nothing here imports xDSL, so the optimizer and the report tool can use it on
a machine without the compiler's IR.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

NUM_TENSORS = 3  # A, B and the output, in this order in `Config.strides`
TENSOR_NAMES = ("A", "B", "Out")


class DimType(enum.Enum):
    """How a dimension indexes the tensors (seed Task 1a).

    C: in A, B and the output (batch); M: in A and the output; N: in B and the output;
    K: in A and B only (contracted)."""

    M = "M"
    N = "N"
    K = "K"
    C = "C"


class ExecType(enum.Enum):
    """How a dimension is executed: SEQ (a loop inside one block), PAR (spread over the
    grid of blocks) or PRIM (a tile handled by the primitive) (seed Task 1a)."""

    SEQ = "SEQ"
    PAR = "PAR"
    PRIM = "PRIM"


class PrimType(enum.Enum):
    """The main primitive inside the kernel: GEMM or batched GEMM (seed Task 1a)."""

    GEMM = "GEMM"
    BGEMM = "BGEMM"


class LastType(enum.Enum):
    """Elementwise operation applied after the accumulation (seed Task 1a)."""

    NONE = "NONE"
    ELWISE_MUL = "ELWISE_MUL"


class FirstType(enum.Enum):
    """Initialisation of the accumulator (seed Task 1a)."""

    ZERO = "ZERO"


class DataType(enum.Enum):
    """Element type of the operands.  FLOAT16 and FLOAT32 are the seed's (Task 1a);
    BFLOAT16 is our extension."""

    FLOAT16 = "FLOAT16"
    FLOAT32 = "FLOAT32"
    BFLOAT16 = "BFLOAT16"

    @property
    def bytes(self) -> int:
        """Size of one element in bytes (IEEE half / single, bfloat16: 2, 4, 2)."""
        return 4 if self is DataType.FLOAT32 else 2


@dataclass
class Config:
    """One contraction configuration; exactly the fields of the seed's Task 1b table.

    Attributes:
        data_type: element type of the operands.
        prim_main: the (B)GEMM primitive used inside the kernel.
        prim_last: optional elementwise operation after the accumulation.
        prim_first: initialisation of the accumulator.
        dim_types: per dimension, its `DimType`.
        exec_types: per dimension, its `ExecType`.
        dim_sizes: per dimension, its extent (number of index values, >= 1).
        strides: one list per tensor, `[A, B, Out]`, each with one stride (in elements) per
            dimension; 0 where the dimension does not index that tensor.
    """

    data_type: DataType
    prim_main: PrimType
    prim_last: LastType
    prim_first: FirstType
    dim_types: list[DimType] = field(default_factory=list)
    exec_types: list[ExecType] = field(default_factory=list)
    dim_sizes: list[int] = field(default_factory=list)
    strides: list[list[int]] = field(default_factory=list)

    @property
    def num_dims(self) -> int:
        """Number of dimensions (length of every per-dimension list)."""
        return len(self.dim_types)

    def describe_dim(self, dim_id: int) -> str:
        """`dimension <i> (<type>, size <n>)`: how error messages name a dimension.

        Raises:
            IndexError: `dim_id` is not a dimension of the config.
        """
        return f"dimension {dim_id} ({self.dim_types[dim_id].value}, size {self.dim_sizes[dim_id]})"


# ---------------------------------------------------------------------------------------
# generate_config (seed Task 2)


@dataclass(frozen=True)
class Einsum:
    """A parsed binary einsum `a,b->out` (or `a,b,out->out`): the index letters of each tensor.

    `mul` is the index string of an elementwise factor, `""` when there is none; it always
    equals `out` (`a,b,out->out` is `(a x b) * factor`, `LastType.ELWISE_MUL`)."""

    lhs: str
    rhs: str
    out: str
    mul: str = ""


def _einsum_error(einsum: str, problem: str) -> ValueError:
    return ValueError(f"einsum {einsum!r}: {problem} (expected two inputs and an explicit output, e.g. 'cmk,ckn->cmn')")


def parse_einsum(einsum: str) -> Einsum:
    """Split a binary einsum string such as `'cmk,ckn->cmn'` into its three index strings.

    Spaces are ignored; indices are single ASCII letters.  A third input whose indices are
    exactly the output's, in the output's order (`'cmk,ckn,cmn->cmn'`), is an elementwise
    factor of the result: `Einsum.mul`, the contraction's ELWISE_MUL epilogue (our reading
    of seed 004's `LastType.ELWISE_MUL`, "an elementwise operation applied after the
    accumulation").

    Raises:
        ValueError: not of the form `<A>,<B>-><Out>` or `<A>,<B>,<Out>-><Out>`, an index that is not a letter, an index
            repeated within one tensor (traces/diagonals are not contractions), an output
            index found in neither input, or an index found in only one input and not in the
            output (a summed-away index of one operand: not a contraction, unsupported).
    """
    if not isinstance(einsum, str):
        raise ValueError(f"einsum must be a string, got {type(einsum).__name__}")
    text = einsum.replace(" ", "")
    if text.count("->") != 1:
        raise _einsum_error(einsum, "needs exactly one '->' (implicit outputs are not supported)")
    inputs, out = text.split("->")
    operands = inputs.split(",")
    if len(operands) == 3 and operands[2] != out:
        raise _einsum_error(
            einsum,
            f"has 3 input(s); a third input is only accepted as an elementwise factor (ELWISE_MUL) indexed exactly "
            f"like the output ({out!r}), got {operands[2]!r}",
        )
    if len(operands) not in (2, 3):
        raise _einsum_error(einsum, f"has {len(operands)} input(s); only binary contractions are supported")
    parsed = Einsum(operands[0], operands[1], out, operands[2] if len(operands) == 3 else "")
    _check_indices(einsum, parsed)
    return parsed


def _check_indices(einsum: str, parsed: Einsum) -> None:
    for name, indices in zip(TENSOR_NAMES, (parsed.lhs, parsed.rhs, parsed.out)):
        bad = [c for c in indices if not (c.isascii() and c.isalpha())]
        if bad:
            raise _einsum_error(einsum, f"tensor {name} has non-letter index {bad[0]!r}")
        repeated = sorted({c for c in indices if indices.count(c) > 1})
        if repeated:
            raise _einsum_error(einsum, f"index {repeated[0]!r} repeats within tensor {name}; traces are unsupported")
    for c in parsed.out:
        if c not in parsed.lhs and c not in parsed.rhs:
            raise _einsum_error(einsum, f"output index {c!r} appears in neither input")
    for name, mine, other in (("A", parsed.lhs, parsed.rhs), ("B", parsed.rhs, parsed.lhs)):
        for c in mine:
            if c not in other and c not in parsed.out:
                raise _einsum_error(
                    einsum,
                    f"index {c!r} appears only in input {name} and not in the output; reducing over one "
                    "operand alone is not a contraction and is unsupported (sum it out beforehand)",
                )


def classify_index(index: str, parsed: Einsum) -> DimType:
    """The `DimType` of one index of a parsed einsum (seed Task 2: by the tensors it is in).

    Raises:
        ValueError: the index is in no tensor, or only in one input (see `parse_einsum`).
    """
    where = (index in parsed.lhs, index in parsed.rhs, index in parsed.out)
    kinds = {
        (True, True, True): DimType.C,
        (True, False, True): DimType.M,
        (False, True, True): DimType.N,
        (True, True, False): DimType.K,
    }
    if where not in kinds:
        raise ValueError(f"index {index!r} is not a C, M, N or K index of {parsed}")
    return kinds[where]


def _index_sizes(einsum: str, parsed: Einsum, shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    inputs = 3 if parsed.mul else 2
    if not isinstance(shapes, (list, tuple)) or len(shapes) != inputs:
        count = len(shapes) if isinstance(shapes, (list, tuple)) else type(shapes).__name__
        raise ValueError(f"einsum {einsum!r} has {inputs} inputs but {count} shape(s) were given; pass one shape per input")
    sizes: dict[str, int] = {}
    for name, indices, shape in zip(("A", "B", "D"), (parsed.lhs, parsed.rhs, parsed.mul), shapes):
        shape = tuple(shape)
        if len(shape) != len(indices):
            raise ValueError(
                f"input {name} of {einsum!r} has {len(indices)} indices ({indices!r}) but its shape {shape} "
                f"has rank {len(shape)}; give one size per index"
            )
        for index, size in zip(indices, shape):
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(f"size of index {index!r} in input {name} must be a positive integer, got {size!r}")
            if sizes.setdefault(index, size) != size:
                raise ValueError(
                    f"index {index!r} has size {sizes[index]} in input A but {size} in input {name}; "
                    "an index must have one size in every tensor"
                )
    return sizes


def _dim_order(parsed: Einsum) -> list[str]:
    """Output indices in output order, then the contracted indices in their order in A."""
    return list(parsed.out) + [c for c in parsed.lhs if c not in parsed.out]


def row_major_strides_of(indices: str, sizes: dict[str, int]) -> dict[str, int]:
    """Row-major element strides of a tensor indexed by `indices` (last index stride 1).

    Raises:
        KeyError: an index has no size in `sizes`.
    """
    strides: dict[str, int] = {}
    step = 1
    for index in reversed(indices):
        strides[index] = step
        step *= sizes[index]
    return strides


def generate_config(einsum: str, shapes: Sequence[Sequence[int]]) -> Config:
    """The basic config of a binary einsum (seed Task 2).

    Dimensions are ordered as the output's indices, then the contracted (K) indices in their
    order in input A; e.g. `cmk,ckn->cmn` gives dims `[c, m, n, k]` of types `[C, M, N, K]`.
    Strides are row-major per tensor (0 where an index is absent); all exec types are SEQ;
    data type FLOAT16, primitive GEMM, last NONE (ELWISE_MUL for `a,b,out->out`: the third
    input is the output-shaped factor, addressed with the output's strides), first ZERO.

    Args:
        einsum: e.g. `'cmk,ckn->cmn'` (two inputs, explicit output) or `'cmk,ckn,cmn->cmn'`.
        shapes: the shapes of the inputs (one size per index); the output's is implied.

    Raises:
        ValueError: malformed einsum (see `parse_einsum`), not exactly two shapes, a shape
            whose rank differs from its index string, a non-positive size, or one index with
            two different sizes.
    """
    parsed = parse_einsum(einsum)
    sizes = _index_sizes(einsum, parsed, shapes)
    order = _dim_order(parsed)
    tensor_strides = [row_major_strides_of(ix, sizes) for ix in (parsed.lhs, parsed.rhs, parsed.out)]
    return Config(
        data_type=DataType.FLOAT16,
        prim_main=PrimType.GEMM,
        prim_last=LastType.ELWISE_MUL if parsed.mul else LastType.NONE,
        prim_first=FirstType.ZERO,
        dim_types=[classify_index(c, parsed) for c in order],
        exec_types=[ExecType.SEQ] * len(order),
        dim_sizes=[sizes[c] for c in order],
        strides=[[s.get(c, 0) for c in order] for s in tensor_strides],
    )


# ---------------------------------------------------------------------------------------
# verify (seed Task 3e)


class RuleViolation(ValueError):
    """A config breaks one or more executability rules of seed Task 3e.

    Attributes:
        rules: the numbers (1-4) of the violated rules, ascending.
    """

    def __init__(self, violations: list[tuple[int, str]]):
        self.rules = [rule for rule, _ in violations]
        super().__init__("; ".join(text for _, text in violations))


def check_structure(config: Config) -> None:
    """Check that a config is well formed: the per-dimension lists agree in length, there are
    three stride lists, sizes are positive, strides non-negative, enums of the right type.

    Raises:
        ValueError: naming the malformed field and what it should be.
    """
    n = len(config.dim_types)
    for name in ("exec_types", "dim_sizes"):
        if len(getattr(config, name)) != n:
            raise ValueError(f"malformed config: {name} has {len(getattr(config, name))} entries, dim_types has {n}")
    if len(config.strides) != NUM_TENSORS or any(len(s) != n for s in config.strides):
        raise ValueError(f"malformed config: strides must be {NUM_TENSORS} lists (A, B, Out) of {n} entries each")
    _check_enums(config)
    for i, size in enumerate(config.dim_sizes):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"malformed config: size of dimension {i} must be a positive integer, got {size!r}")
    for name, strides in zip(TENSOR_NAMES, config.strides):
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in strides):
            raise ValueError(f"malformed config: strides of tensor {name} must be non-negative integers, got {strides}")


def _check_enums(config: Config) -> None:
    scalars: tuple[tuple[str, type[enum.Enum]], ...] = (
        ("data_type", DataType),
        ("prim_main", PrimType),
        ("prim_last", LastType),
        ("prim_first", FirstType),
    )
    for name, enum_type in scalars:
        if not isinstance(getattr(config, name), enum_type):
            raise ValueError(f"malformed config: {name} must be a {enum_type.__name__}, got {getattr(config, name)!r}")
    for name, enum_type in (("dim_types", DimType), ("exec_types", ExecType)):
        for i, value in enumerate(getattr(config, name)):
            if not isinstance(value, enum_type):
                raise ValueError(f"malformed config: {name}[{i}] must be a {enum_type.__name__}, got {value!r}")


def _dims_of(config: Config, exec_type: ExecType) -> list[int]:
    return [i for i, e in enumerate(config.exec_types) if e is exec_type]


def _name_dims(config: Config, dims: Sequence[int]) -> str:
    return ", ".join(config.describe_dim(i) for i in dims)


def _is(dims: Sequence[int]) -> str:
    return "is" if len(dims) == 1 else "are"


def _lies(dims: Sequence[int]) -> str:
    return "lies" if len(dims) == 1 else "lie"


def _rule1(config: Config) -> str | None:
    bad = [i for i in _dims_of(config, ExecType.PAR) if config.dim_types[i] is DimType.K]
    if not bad:
        return None
    return (
        f"rule 1 violated (no K dimension may be PAR): {_name_dims(config, bad)} "
        f"{_is(bad)} PAR; contracted dimensions are reduced inside one block, make them SEQ or PRIM"
    )


def _ordering_rule(config: Config, rule: int, left: ExecType, right: ExecType) -> str | None:
    """Every `left` dimension must lie left of every `right` dimension."""
    rights = _dims_of(config, right)
    if not rights:
        return None
    bad = [i for i in _dims_of(config, left) if i > rights[0]]
    if not bad:
        return None
    return (
        f"rule {rule} violated (every {left.value} dimension must lie left of every {right.value} dimension): "
        f"{_name_dims(config, bad)} {_is(bad)} {left.value} but {_lies(bad)} right of {right.value} "
        f"{config.describe_dim(rights[0])}; permute the {left.value} dimensions in front of the "
        f"{right.value} ones (permute_dims)"
    )


def _rule4(config: Config) -> str | None:
    prims = _dims_of(config, ExecType.PRIM)
    head = "rule 4 violated (the rightmost dimensions must be PRIM and include an M, an N and a K dimension)"
    if not prims:
        return f"{head}: no dimension is PRIM; make the innermost M, N and K dimensions PRIM"
    trailing = [i for i in range(prims[0], config.num_dims) if i not in prims]
    if trailing:
        return (
            f"{head}: {_name_dims(config, trailing)} {_is(trailing)} not PRIM but {_lies(trailing)} right of PRIM "
            f"{config.describe_dim(prims[0])}; permute {'it' if len(trailing) == 1 else 'them'} left of the PRIM dimensions"
        )
    missing = [t.value for t in (DimType.M, DimType.N, DimType.K) if t not in {config.dim_types[i] for i in prims}]
    if missing:
        return (
            f"{head}: the PRIM dimensions ({_name_dims(config, prims)}) include no {' and no '.join(missing)} "
            f"dimension; make the innermost {'/'.join(missing)} dimension PRIM and move it to the right end"
        )
    return None


def verify(config: Config) -> None:
    """Check that a config is executable (seed Task 3e, rules 1-4):

    1. No K dimension is PAR.
    2. Every SEQ dimension lies left of every PRIM dimension.
    3. Every PAR dimension lies left of every SEQ dimension.
    4. The rightmost dimensions are PRIM, and the PRIM dimensions include at least one M,
       one N and one K dimension.

    Raises:
        ValueError: the config is malformed (see `check_structure`).
        RuleViolation: (a ValueError) naming every violated rule, the offending dimensions
            by index, type and size, and how to fix them; `.rules` lists the rule numbers.
    """
    check_structure(config)
    checks = (
        (1, _rule1(config)),
        (2, _ordering_rule(config, 2, ExecType.SEQ, ExecType.PRIM)),
        (3, _ordering_rule(config, 3, ExecType.PAR, ExecType.SEQ)),
        (4, _rule4(config)),
    )
    violations = [(rule, text) for rule, text in checks if text is not None]
    if violations:
        raise RuleViolation(violations)


def format_config(config: Config) -> list[str]:
    """The config as report lines, one field per line (the seed's Task 4 "Report").

    Raises:
        AttributeError: a field holds something other than the expected enum members.
    """
    return [
        f"data_type  = {config.data_type.name}",
        f"prim_main  = {config.prim_main.name}",
        f"prim_last  = {config.prim_last.name}",
        f"prim_first = {config.prim_first.name}",
        f"dim_types  = [{', '.join(t.name for t in config.dim_types)}]",
        f"exec_types = [{', '.join(t.name for t in config.exec_types)}]",
        f"dim_sizes  = {list(config.dim_sizes)}",
        f"strides    = {[list(s) for s in config.strides]}",
    ]


def total_size(config: Config, dim_type: DimType) -> int:
    """Product of the sizes (elements) of all dimensions of one type (1 if there are none).

    Raises:
        Nothing.
    """
    return math.prod(s for t, s in zip(config.dim_types, config.dim_sizes) if t is dim_type)
