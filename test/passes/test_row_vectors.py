"""`cute.row_chain_vectors` (cute-row-chains, passes/cute/row_chains.py): the pass decides
whether a row chain moves each global tensor as 16-byte vectors and writes the choice on the
tensor's copy; the CUDA printer only reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects.builtin import BoolAttr, ModuleOp
from xdsl.parser import Parser

from mirage_xdsl.codegen.cuda_syntax import CudaEmitError
from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.row_chains import ROW_CHAIN_GLOBAL, ROW_CHAIN_VECTORS
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.passes.cute.row_chains import clear_row_chains, row_vectors
from mirage_xdsl.passes.pipeline import MirageTranspilePass

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def lowered_ntrans() -> ModuleOp:
    """examples/ntrans.mlir through mirage-transpile: one fp16 chain over a 4096-wide row on
    512 threads (8 consecutive elements, one 16-byte vector, per thread)."""
    module = Parser(make_context(), (EXAMPLES / "ntrans.mlir").read_text()).parse_module()
    MirageTranspilePass().apply(make_context(), module)
    return module


def global_copies(module: ModuleOp) -> list[cute.CopyG2SOp | cute.CopyS2GOp]:
    """The copies a chain replaces with its own global loads and stores."""
    return [op for op in module.walk() if isinstance(op, (cute.CopyG2SOp, cute.CopyS2GOp)) and ROW_CHAIN_GLOBAL in op.attributes]


def test_ntrans_copies_move_as_vectors() -> None:
    """H, X, alpha in and the output out: every copy carries the decision, all `true`."""
    copies = global_copies(lowered_ntrans())
    assert sum(isinstance(c, cute.CopyG2SOp) for c in copies) == 3 and sum(isinstance(c, cute.CopyS2GOp) for c in copies) == 1
    assert all(c.attributes[ROW_CHAIN_VECTORS] == BoolAttr.from_bool(True) for c in copies)


def test_row_vectors_rules() -> None:
    """A fp16 row of 4096 elements, unit stride, `vec` 8: runs of 8 or 16 elements are whole
    16-byte vectors; no runs (0), half vectors (4 elements, 8 bytes) or runs that do not
    divide the row (24 elements: 48 bytes, but 4096 % 24 != 0) are not."""
    load = next(c for c in global_copies(lowered_ntrans()) if isinstance(c, cute.CopyG2SOp))
    assert row_vectors(load, 8) and row_vectors(load, 16)
    assert not any(row_vectors(load, run) for run in (0, 4, 24))


def test_printer_follows_the_mark() -> None:
    """With every mark `false` the same chain loads and stores element by element."""
    module = lowered_ntrans()
    vectors = emit_cuda(module).source
    for copy in global_copies(module):
        copy.attributes[ROW_CHAIN_VECTORS] = BoolAttr.from_bool(False)
    elements = emit_cuda(module).source
    assert vectors.count("mx::load_row<8>(") == 3 and "mx::store_row<8>(" in vectors
    assert "mx::load_row<" not in elements and "mx::store_row<" not in elements
    assert elements.count("from global memory") == 3  # still straight from global memory


def test_missing_mark_is_an_error() -> None:
    """A chain's copy without the mark: the printer names the attribute and the pass."""
    module = lowered_ntrans()
    del global_copies(module)[0].attributes[ROW_CHAIN_VECTORS]
    with pytest.raises(CudaEmitError, match="cute.row_chain_vectors.*cute-row-chains"):
        emit_cuda(module)


def test_clear_row_chains_clears_the_mark() -> None:
    module = lowered_ntrans()
    for kernel in [op for op in module.walk() if isinstance(op, cute.KernelOp)]:
        clear_row_chains(kernel)
    assert not any(ROW_CHAIN_VECTORS in op.attributes for op in module.walk())
