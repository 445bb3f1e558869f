"""Cache integrity (issue #29 item 4): every cache entry is checked against its sidecar
(key, sha256, size), and a bad entry is rebuilt, never trusted; temporaries that killed
processes left behind are removed once stale.

nvcc is a small script that writes a deterministic "cubin" (its source, prefixed) and logs
its runs, so these tests need no CUDA toolkit.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import nvcc_runs as _runs

from mirage_xdsl.bench.cache import BenchCache
from mirage_xdsl.driver import disk_cache, nvcc
from mirage_xdsl.driver.disk_cache import clean_stale_temporaries, read_entry, sidecar_path, write_entry
from mirage_xdsl.driver.nvcc import compile_cuda


def _compile(source: str, cache: Path, fake: tuple[str, Path]) -> Path:
    return compile_cuda(source, "sm_90", cache_dir=cache, nvcc=fake[0])


# ---------------------------------------------------------------------------------------
# nvcc's cubin cache


def test_cubin_entry_has_a_sidecar(fake_nvcc: tuple[str, Path], tmp_path: Path) -> None:
    cubin = _compile("// a\n", tmp_path / "c", fake_nvcc)
    record = json.loads(sidecar_path(cubin).read_text())
    assert record["key"] == cubin.stem and record["size"] == len(b"CUBIN:// a\n")
    assert record["nvcc"].startswith("Cuda compilation tools") and record["arch"] == "sm_90"
    assert len(record["sha256"]) == 64


@pytest.mark.parametrize(
    "damage",
    [
        lambda cubin, other: cubin.write_bytes(b"\x7fELF garbage"),  # garbage
        lambda cubin, other: cubin.write_bytes(cubin.read_bytes()[:5]),  # truncated
        lambda cubin, other: cubin.write_bytes(cubin.read_bytes()[:-1] + b"X"),  # one byte flipped, same size
        lambda cubin, other: cubin.write_bytes(other.read_bytes()),  # another kernel's cubin
        lambda cubin, other: sidecar_path(cubin).unlink(),  # no sidecar (e.g. an old cache)
        lambda cubin, other: sidecar_path(cubin).write_text("{"),  # garbled sidecar
        lambda cubin, other: sidecar_path(cubin).write_text(sidecar_path(other).read_text()),  # another's sidecar
        lambda cubin, other: cubin.write_bytes(b""),  # empty
    ],
    ids=["garbage", "truncated", "flipped", "swapped-cubin", "no-sidecar", "bad-sidecar", "swapped-sidecar", "empty"],
)
def test_bad_cubin_entry_is_rebuilt(fake_nvcc: tuple[str, Path], tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    cache = tmp_path / "c"
    cubin = _compile("// a\n", cache, fake_nvcc)
    other = _compile("// b\n", cache, fake_nvcc)
    assert _runs(fake_nvcc[1]) == 2
    damage(cubin, other)
    again = _compile("// a\n", cache, fake_nvcc)
    assert again == cubin and _runs(fake_nvcc[1]) == 3  # rebuilt
    assert again.read_bytes() == b"CUBIN:// a\n"
    assert _compile("// a\n", cache, fake_nvcc) == cubin and _runs(fake_nvcc[1]) == 3  # and trusted again
    assert other.read_bytes() == b"CUBIN:// b\n"


def test_swapped_cubins_are_both_rebuilt(fake_nvcc: tuple[str, Path], tmp_path: Path) -> None:
    cache = tmp_path / "c"
    a = _compile("// a\n", cache, fake_nvcc)
    b = _compile("// b\n", cache, fake_nvcc)
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    assert _compile("// a\n", cache, fake_nvcc).read_bytes() == b"CUBIN:// a\n"
    assert _compile("// b\n", cache, fake_nvcc).read_bytes() == b"CUBIN:// b\n"
    assert _runs(fake_nvcc[1]) == 4


def test_other_nvcc_version_is_a_miss(tmp_path: Path) -> None:
    payload = tmp_path / "k.cubin"
    write_entry(payload, "k", b"data", {"nvcc": "release 12.8"})
    assert read_entry(payload, "k", {"nvcc": "release 12.8"}) == b"data"
    assert read_entry(payload, "k", {"nvcc": "release 13.0"}) is None
    assert read_entry(payload, "other-key", {"nvcc": "release 12.8"}) is None
    assert read_entry(tmp_path / "missing.cubin", "k") is None


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_stale_temporaries_removed_fresh_kept(fake_nvcc: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "c"
    cache.mkdir()
    stale_dir = cache / "mirage_nvcc_abc123"
    fresh_dir = cache / "mirage_nvcc_def456"
    for d in (stale_dir, fresh_dir):
        d.mkdir()
        (d / "x.cu").write_text("// left by a killed nvcc run\n")
    stale_tmp = cache / ".0123.cubin.k3j_x9a.tmp"
    fresh_tmp = cache / ".4567.cubin.q8w2ze1.tmp"
    stale_tmp.write_bytes(b"half")
    fresh_tmp.write_bytes(b"half")
    foreign_dir = cache / "someone_elses_dir"  # not our name pattern: never touched
    foreign_dir.mkdir()
    foreign_tmp = cache / "notes.tmp"
    foreign_tmp.write_text("x")
    for p in (stale_dir, stale_tmp, foreign_dir, foreign_tmp):
        _age(p, disk_cache.STALE_TEMP_S + 60)
    monkeypatch.setattr(nvcc, "_OPENED", set())
    _compile("// a\n", cache, fake_nvcc)  # opening the cache cleans
    assert not stale_dir.exists() and not stale_tmp.exists()
    assert fresh_dir.is_dir() and fresh_tmp.is_file()
    assert foreign_dir.is_dir() and foreign_tmp.is_file()
    assert not [p for p in cache.iterdir() if p.name.startswith("mirage_nvcc_") and p != fresh_dir]


def test_clean_stale_temporaries_recursive(tmp_path: Path) -> None:
    sub = tmp_path / "build" / "ab"
    sub.mkdir(parents=True)
    stale = sub / ".abcd.json.xyz123.tmp"
    stale.write_text("{")
    _age(stale, 7200)
    assert clean_stale_temporaries(tmp_path) == 0  # not recursive: the subfolder is left
    assert clean_stale_temporaries(tmp_path, recursive=True) == 1 and not stale.exists()


def test_interrupted_nvcc_run_leaves_nothing(fake_nvcc: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while nvcc runs: no cubin, no sidecar, no temporary folder."""
    cache = tmp_path / "c"

    def interrupted(cmd: list[str]) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(nvcc, "_run_nvcc", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _compile("// a\n", cache, fake_nvcc)
    assert list(cache.iterdir()) == []


# ---------------------------------------------------------------------------------------
# mirage-bench's build and reference cache


def _store_build(cache: BenchCache, key: str, tmp_path: Path, data: bytes) -> dict:  # type: ignore[type-arg]
    src = tmp_path / f"{key}.src.cubin"
    src.write_bytes(data)
    meta = {"graph": "graph_0", "plan_json": "{}", "kernels": 1, "build_s": 0.5, "error": None}
    return cache.store_build(key, meta, str(src))


def test_bench_build_entry_roundtrip_and_damage(tmp_path: Path) -> None:
    cache = BenchCache(tmp_path / "bench")
    key_a, key_b = "a" * 64, "b" * 64
    entry = _store_build(cache, key_a, tmp_path, b"CUBIN-A")
    _store_build(cache, key_b, tmp_path, b"CUBIN-B")
    loaded = cache.load_build(key_a)
    assert loaded is not None and Path(loaded["cubin"]).read_bytes() == b"CUBIN-A" and loaded["kernels"] == 1
    cubin = Path(entry["cubin"])
    cubin.write_bytes(b"CUBIN-")  # truncated cubin
    assert cache.load_build(key_a) is None
    entry = _store_build(cache, key_a, tmp_path, b"CUBIN-A")  # the rebuild overwrites it
    assert Path(entry["cubin"]).read_bytes() == b"CUBIN-A" and cache.load_build(key_a) is not None
    meta_a = cache.root / "build" / key_a[:2] / f"{key_a}.json"
    meta_b = cache.root / "build" / key_b[:2] / f"{key_b}.json"
    meta_a.write_bytes(meta_b.read_bytes())  # another candidate's entry under this key
    assert cache.load_build(key_a) is None
    meta_a.write_bytes(meta_b.read_bytes()[:-7])  # truncated
    assert cache.load_build(key_a) is None
    good = json.loads(meta_b.read_text())
    good["entry"]["kernels"] = 7  # edited without its hash
    meta_b.write_text(json.dumps(good))
    assert cache.load_build(key_b) is None


def test_bench_reference_entry_damage(tmp_path: Path) -> None:
    cache = BenchCache(tmp_path / "bench")
    refs = [np.arange(6, dtype=np.float64).reshape(2, 3)]
    cache.store_refs("k" * 64, 7, "[]", refs)
    got = cache.load_refs("k" * 64, 7, "[]")
    assert got is not None and np.array_equal(got[0], refs[0])
    (entry,) = (cache.root / "refs" / ("k" * 64)).glob("*.npz")
    entry.write_bytes(entry.read_bytes()[:40])  # truncated npz: a miss, not a crash
    assert cache.load_refs("k" * 64, 7, "[]") is None
    cache.store_refs("k" * 64, 7, "[]", refs)
    sidecar_path(entry).unlink()
    assert cache.load_refs("k" * 64, 7, "[]") is None


def test_bench_graph_count_checked(tmp_path: Path) -> None:
    src = tmp_path / "g.json"
    src.write_text("[]")
    other = tmp_path / "h.json"
    other.write_text("[1]")
    cache = BenchCache(tmp_path / "bench")
    cache.store_count(str(src), 3)
    cache.store_count(str(other), 5)
    assert cache.load_count(str(src)) == 3
    path_src, path_other = cache._count_path(str(src)), cache._count_path(str(other))
    assert path_src is not None and path_other is not None
    path_src.write_bytes(path_other.read_bytes())  # another file's count
    assert cache.load_count(str(src)) is None


def test_bench_cache_cleans_stale_temporaries(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    sub = root / "build" / "ab"
    sub.mkdir(parents=True)
    stale, fresh = sub / ".x.json.abc123.tmp", sub / ".y.json.def456.tmp"
    stale.write_text("{")
    fresh.write_text("{")
    _age(stale, disk_cache.STALE_TEMP_S + 60)
    BenchCache(root)
    assert not stale.exists() and fresh.exists()
