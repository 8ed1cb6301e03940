"""Files written whole or not at all: :func:`atomic_write`, the one way MyXTTS replaces a file,
and :func:`atomic_folder`, the one way it replaces a folder; :class:`Folder`, what the layouts
of a run's and a cache's folder (:class:`~myxtts.rundir.RunDir`, :class:`~myxtts.data.cachedir.CacheDir`)
have in common.

Every file a run, a cache or an export writes (model files, plans, the run's summary, samples and
tuned settings, the cache's recipe and embeddings, a Piper voice) is written to a temporary name
beside it, flushed to disk and renamed over the old one, so a reader sees the old file or the new
one, never a torn one, and a process killed mid-write leaves the previous file where it was. A
folder that is read as one thing (a checkpoint, a cache shard) is built the same way, whole under
a temporary name, so one that exists is complete. The new file gets the permissions the user's
umask gives any new file, whatever the writer used (safetensors creates its files readable by
their owner only). Logs that only grow (the run's metrics, TensorBoard's events, a compiler's
output) are appended to instead, and their readers skip a line cut short.
"""
from __future__ import annotations

import json
import os
import shutil
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
    tmp = temporary(path)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~current_umask())  # what open() would have given it
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def atomic_folder(path) -> Iterator[Path]:
    """``with atomic_folder(path) as tmp:`` fill the empty folder ``tmp``; on leaving the block
    its files are synced and it takes the place of ``path`` (a folder already there is removed
    first); on an error it is removed and ``path`` is left as it was. Parent folders are made."""
    path = Path(path)
    tmp = temporary(path)
    shutil.rmtree(tmp, ignore_errors=True)  # a dead process's of the same pid
    tmp.mkdir(parents=True)
    try:
        yield tmp
        for f in sorted(tmp.rglob("*")):
            if f.is_file():
                with open(f, "rb+") as fh:
                    os.fsync(fh.fileno())
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def temporary(path: Path) -> Path:
    """The name a file or folder is written under before it replaces ``path``: hidden, beside
    it, and one per process, so two writers never share one."""
    return path.with_name(f".{path.name}{TEMP_MARK}{os.getpid()}")


TEMP_MARK = ".tmp-"


def remove_stale_temporaries(folder: Path) -> None:
    """Removes what writers killed mid-write left in ``folder`` (:func:`temporary`'s names)."""
    for p in Path(folder).glob(f".*{TEMP_MARK}*"):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def write_text(path, text: str) -> Path:
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path, obj, indent: int = 1, **kwargs) -> Path:
    """``obj`` as JSON (non-ASCII kept as it is), ending in a newline."""
    return write_text(path, json.dumps(obj, ensure_ascii=False, indent=indent, **kwargs) + "\n")


def user_cache(*parts: str) -> Path:
    """A folder below the user's cache (``$XDG_CACHE_HOME``, else ``~/.cache``): what MyXTTS
    builds once and reuses from run to run."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").joinpath(*parts)


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


class Folder:
    """A folder whose layout a subclass names, each path a :func:`below` property."""

    def __init__(self, path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"


def below(root: str, *parts: str) -> property:
    """A path of a :class:`Folder`'s layout, ``parts`` below its folder (``root`` names the folder
    in the docs: RUN, CACHE)."""
    return property(lambda self: self.path.joinpath(*parts), doc=f"{root}/{'/'.join(parts)}")
