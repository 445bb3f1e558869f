"""The tuning point (target/tuning.py) and mirage-transpile's option surface: seven options, a
tuned plan given as one `tuning` spec that reaches the passes making each choice."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_tool

from mirage_xdsl.target.tuning import TuningError, TuningPoint

REPO = Path(__file__).resolve().parents[2]
RMSNORM = REPO / "examples" / "rmsnorm_linear.mlir"


def test_spec_round_trip_names_only_what_differs() -> None:
    assert TuningPoint().spec() == ""
    point = TuningPoint(candidate=3, stages=5, grid_sum=False, late_finisher=0, reduce_partials=False)
    assert point.spec() == "candidate=3,stages=5,grid_sum=false,reduce_partials=false,late_finisher=0"
    assert TuningPoint.parse(point.spec()) == point
    assert TuningPoint.parse(" candidate=3  stages=5, grid-sum=off,reduce_partials=0 late-finisher=0 ") == point
    assert TuningPoint.parse("") == TuningPoint()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("candidate", "expected key=value"),
        ("tile=64", "unknown tuning option(s) tile; known: candidate, stages"),
        ("stages=three", "stages=three: expected an integer"),
        ("grid_sum=maybe", "grid_sum=maybe: expected true or false"),
    ],
)
def test_parse_rejects_bad_specs(text: str, needle: str) -> None:
    with pytest.raises(TuningError) as err:
        TuningPoint.parse(text)
    assert needle in str(err.value)


def test_from_options_checks_types() -> None:
    assert TuningPoint.from_options({"stages": 3}) == TuningPoint(stages=3)
    with pytest.raises(TuningError, match="grid_sum: expected bool"):
        TuningPoint.from_options({"grid_sum": 1})


def test_pipeline_options_are_what_a_user_sets() -> None:
    pytest.importorskip("xdsl")
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    assert [f.name for f in fields(MirageTranspilePass)] == [
        "fuse", "lift", "to_cute", "decide", "arch", "smem_limit", "time_limit_ms", "tuning",
    ]
    both = MirageTranspilePass.from_options({"to_cute": False, "stages": 6, "late_finisher": 0})
    assert (both.to_cute, both.tuning) == (False, "stages=6,late_finisher=0")
    with pytest.raises(TuningError, match="unknown tuning option"):
        MirageTranspilePass.from_options({"hopper_gmma": True})


def test_tuning_reaches_the_passes_that_choose() -> None:
    """`tuning` sets the ring depth of tb-plan-pipeline and the late finisher's shift; the
    default spec builds the same pass list as no spec."""
    pytest.importorskip("xdsl")
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    tuned = {p.name: p for p in MirageTranspilePass(tuning="stages=5,late_finisher=2").passes()}
    assert tuned["tb-plan-pipeline"].stages == 5  # type: ignore[attr-defined]
    assert tuned["cute-late-finisher"].shift == 2  # type: ignore[attr-defined]
    off = [p.name for p in MirageTranspilePass(tuning="late_finisher=0").passes()]
    assert "cute-late-finisher" not in off
    assert MirageTranspilePass().passes() == MirageTranspilePass(tuning="candidate=0").passes()


def test_mirage_opt_reports_a_bad_tuning_spec() -> None:
    proc = run_tool("mirage_xdsl.tools.mirage_opt", str(RMSNORM), "-p", 'mirage-transpile{tuning="stages=x"}')
    assert_one_line_error("mirage-opt", proc, 'mirage-transpile{tuning="stages=x"}: tuning option stages=x: expected an integer')
