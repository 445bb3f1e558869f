"""Random Tensor Comprehensions definitions (`bench/fuzz_tc.py`, the fuzzer's `tc` family):
the lowering agrees with the TC interpreter, and the compiled graphs with the reference."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mirage_xdsl.bench.fuzz_tc import random_tc_program
from mirage_xdsl.frontends.tc import check_source, tc
from mirage_xdsl.frontends.tc.interpret import interpret
from mirage_xdsl.reference.executor import run_reference
from mirage_xdsl.runtime.host_emulator import find_cxx


@pytest.mark.parametrize("index", range(120))
def test_lowering_matches_the_interpreter(index: int) -> None:
    """Graph `index` of tc seed 1: every output of the lowered kernel graph (float64 reference
    executor) equals the interpreter's (float64 over the TC source), on inputs in +-0.5."""
    source, sizes, _ = random_tc_program(random.Random(f"tc:1:{index}"), f"t{index}")
    checked = check_source(source)
    rng = np.random.default_rng(index)
    inputs = [rng.uniform(-0.5, 0.5, tuple(s.evaluate(sizes) for s in info.shape)) for info in checked.inputs.values()]
    expected = interpret(checked, sizes, inputs)
    got = run_reference(tc(source, sizes=sizes), inputs)
    assert len(got) == len(expected)
    for (name, want), have in zip(expected.items(), got):
        have = np.asarray(have, dtype=np.float64).reshape(want.shape)  # reduced outputs keep size-1 dims
        np.testing.assert_allclose(have, want, rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(want).max())), err_msg=f"{name}\n{source}")


@pytest.mark.skipif(find_cxx() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("index", [0, 3, 7, 12, 21, 40])
def test_compiled_programs_match_the_reference(index: int) -> None:
    """Graphs of tc seed 2 (a contraction after RMSNorm's scaling, statistics, a down
    projection among them) compiled by the default pipeline and run in the host emulator."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    case = fuzz.case_of(2, index, "tc")
    out = fuzz_check.check_emulated(case, seed=fuzz._input_seed(2, index))
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}\n{case.options['tc']}"
