"""Run the lit/FileCheck suite (test/filecheck) as one pytest test per sub-directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FILECHECK_DIR = Path(__file__).parents[1] / "filecheck"
SUITES = sorted(p.name for p in FILECHECK_DIR.iterdir() if p.is_dir() and any(p.rglob("*.mlir")))


@pytest.mark.parametrize("suite", SUITES)
def test_lit_suite(suite: str) -> None:
    env = dict(os.environ)
    # the venv's console scripts (mirage-opt, filecheck) must be visible without activation
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, lit.main; sys.exit(lit.main.main())", "-q", str(FILECHECK_DIR / suite)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_pass_has_a_lit_test_named_after_it() -> None:
    """Issue #28 item 5: `<pass-name>.mlir` somewhere under test/filecheck for every pass
    `mirage-opt -p` knows, so that a reader finds a pass's IR contract by its name."""
    from mirage_xdsl.passes import get_all_passes

    files = {p.stem for p in FILECHECK_DIR.rglob("*.mlir")}
    assert sorted(name for name in get_all_passes() if name not in files) == []
