"""Checked entries of the on-disk caches (nvcc's cubins, `mirage-bench`'s builds and references).

An entry is a payload file plus a sidecar `<payload>.json` recording what the payload must be:

    {"key": <cache key>, "sha256": <hex of the payload bytes>, "size": <bytes>, ...extra}

The payload is written first and the sidecar after it, both atomically (a temporary file in
the same directory, then `os.replace`), so a reader sees either no sidecar, an old one that
no longer matches, or a sidecar whose payload is complete.  `read_entry` trusts a payload
only when its sidecar names the expected key and extra fields and the bytes hash to the
recorded sha256: a truncated, garbled or swapped payload, or a missing sidecar, is a miss,
and the caller rebuilds and overwrites the entry.

A process killed mid-write leaves its temporaries behind (`.<name>.<random>.tmp` files of
`atomic_write_bytes`, `mirage_nvcc_*` folders of nvcc runs); `clean_stale_temporaries`
removes those older than `STALE_TEMP_S` when a cache is opened.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "STALE_TEMP_S",
    "atomic_write_bytes",
    "clean_stale_temporaries",
    "read_entry",
    "sidecar_path",
    "write_entry",
]

STALE_TEMP_S = 3600.0
"""Age (seconds) after which a temporary of ours is debris of a killed process: no nvcc run
or write of ours takes that long (nvcc's own timeout is 900 s)."""

TEMP_FILE = re.compile(r"^\..+\.[A-Za-z0-9_]+\.tmp$")
"""Names `atomic_write_bytes` gives its temporary files (`tempfile.mkstemp` random part)."""

TEMP_DIR_PREFIX = "mirage_nvcc_"
"""Prefix of the temporary folders nvcc runs in (driver/nvcc.py)."""


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory and `os.replace`.

    Raises:
        OSError: the directory cannot be created or written (the temporary file is removed).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def sidecar_path(payload: Path) -> Path:
    """`<payload>.json`: where the record of `payload` lives."""
    return payload.with_name(payload.name + ".json")


def write_entry(payload: Path, key: str, data: bytes, extra: Mapping[str, Any] | None = None) -> None:
    """Store `data` at `payload`, then its sidecar (key, sha256, size in bytes, `extra`).

    Raises:
        OSError: a write failed (no temporary file is left; a sidecar is never written for a
            payload that was not).
    """
    atomic_write_bytes(payload, data)
    record = {"key": key, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), **(extra or {})}
    atomic_write_bytes(sidecar_path(payload), json.dumps(record, sort_keys=True).encode())


def read_entry(payload: Path, key: str, extra: Mapping[str, Any] | None = None) -> bytes | None:
    """The bytes of `payload` if its sidecar records `key`, every `extra` field, and the size
    and sha256 of those bytes; None otherwise (no entry, no sidecar, or a bad entry).

    Raises nothing: an unreadable entry is a miss.
    """
    try:
        record = json.loads(sidecar_path(payload).read_text())
        if not isinstance(record, dict) or record.get("key") != key:
            return None
        if any(record.get(name) != value for name, value in (extra or {}).items()):
            return None
        data = payload.read_bytes()
    except (OSError, ValueError):
        return None
    if len(data) != record.get("size") or hashlib.sha256(data).hexdigest() != record.get("sha256"):
        return None
    return data


def clean_stale_temporaries(directory: Path, max_age_s: float = STALE_TEMP_S, *, recursive: bool = False) -> int:
    """Remove our temporaries (`.<name>.<random>.tmp` files, `mirage_nvcc_*` folders) in
    `directory` (and its subfolders if `recursive`) last modified over `max_age_s` seconds
    ago; fresher ones may belong to a running process and stay.  Returns how many went.

    Raises nothing: a folder that cannot be listed or removed is left alone.
    """
    removed = 0
    cutoff = time.time() - max_age_s
    for root, dirs, files in os.walk(directory):
        here = Path(root)
        for name in [d for d in dirs if d.startswith(TEMP_DIR_PREFIX)]:
            dirs.remove(name)  # never walk into a temporary folder
            if _older(here / name, cutoff):
                shutil.rmtree(here / name, ignore_errors=True)
                removed += not (here / name).exists()
        for name in files:
            if TEMP_FILE.match(name) and _older(here / name, cutoff):
                try:
                    (here / name).unlink()
                    removed += 1
                except OSError:
                    pass
        if not recursive:
            break
    return removed


def _older(path: Path, cutoff: float) -> bool:
    try:
        return path.stat().st_mtime < cutoff
    except OSError:
        return False
