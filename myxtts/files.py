"""Files written whole or not at all: :func:`atomic_write`, the one way MyXTTS replaces a file.

Every file a run, a cache or an export writes (model files, plans, ``summary.json``, the cache's
recipe and embeddings, a Piper voice) is written to a temporary name beside it, flushed to disk
and renamed over the old one, so a reader sees the old file or the new one, never a torn one,
and a process killed mid-write leaves the previous file where it was. The new file gets the
permissions the user's umask gives any new file, whatever the writer used (safetensors creates
its files readable by their owner only).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_write(path) -> Iterator[Path]:
    """``with atomic_write(path) as tmp:`` write ``tmp`` in any way (a library's save function
    included); on leaving the block it is synced and renamed to ``path``; on an error it is
    removed and ``path`` is left as it was. Parent folders are made."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~current_umask())  # what open() would have given it
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path, text: str) -> Path:
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path, obj, indent: int = 1, **kwargs) -> Path:
    """``obj`` as JSON (non-ASCII kept as it is), ending in a newline."""
    return write_text(path, json.dumps(obj, ensure_ascii=False, indent=indent, **kwargs) + "\n")


def current_umask() -> int:
    """This process's umask. Read from /proc on Linux: setting it to read it back (the only
    portable way) briefly changes it for every thread of the process."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
