"""Is a cache whole? Cheap structure checks (every open) and ``myxtts cache verify`` (checksums).

Both read the format of :mod:`myxtts.data.format`. A problem is ``(shard or file, what)``; what
``cache verify --fix`` can repair (by preparing those parts again) is returned, what it cannot
(no cache at all, another format version, a cache of 0 utterances) is a UserError.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from myxtts.data.cachedir import CacheDir
from myxtts.data.format import ARRAYS, FORMAT_VERSION, META_KEYS, Index, sha256
from myxtts.errors import UserError


def fix_hint(path: Path) -> str:
    return f"run `myxtts cache verify {path} --fix`"


def one_line(path: Path, problems: list[tuple[str, str]]) -> str:
    where, what = problems[0]
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    where = f"shard {where}" if where.isdigit() else where
    return f"{path}: {where}: {what}{more}; {fix_hint(path)}"


def _no_meta(path: Path) -> str:
    """Why a folder has no meta.json, and what to do about it."""
    if not path.exists():
        return f"{path}: no such folder"
    if not path.is_dir():
        return f"{path}: not a folder"
    if _found_nothing(path):
        return _nothing_usable(path)
    if CacheDir(path).recipe() is not None:
        return (f"{path}: prepare did not finish (no {CacheDir.META}); run the same `myxtts prepare` "
                "command again to resume")
    return f"{path}: not a prepared cache (no {CacheDir.META}); run `myxtts prepare`"


def _found_nothing(path: Path) -> bool:
    """prepare finished and kept no utterance (it then writes report.json but no meta.json)."""
    try:
        return json.loads(CacheDir(path).report.read_text()).get("utterances") == 0
    except (OSError, ValueError, AttributeError):
        return False


def _nothing_usable(path: Path) -> str:
    return (f"{path}: the cache holds 0 utterances: prepare found nothing usable in the corpus "
            f"(reasons in {CacheDir(path).report}); fix the corpus and run `myxtts prepare` again")


def _read_json(path: Path, name: str):
    try:
        return json.loads((path / name).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _Broken(name, "missing") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _Broken(name, f"unreadable ({e})") from None
    except json.JSONDecodeError as e:
        raise _Broken(name, f"unreadable (not JSON: {e.msg} at line {e.lineno})") from None


class _Broken(Exception):
    def __init__(self, where: str, what: str):
        super().__init__(where, what)
        self.where, self.what = where, what


def read_checked(path: Path) -> tuple[dict | None, Index | None, list[tuple[str, str]]]:
    """(meta, index, structural problems); meta and index are None when meta.json or index.json
    is itself the problem. Raises UserError for what --fix cannot repair: no cache at all,
    another format version, a cache with nothing in it."""
    if not CacheDir(path).meta.is_file():
        raise UserError(_no_meta(path))
    try:
        meta = _read_json(path, CacheDir.META)
        if not isinstance(meta, dict) or any(k not in meta for k in META_KEYS):
            raise _Broken(CacheDir.META, "incomplete (a field is missing)")
        if meta["format_version"] != FORMAT_VERSION:
            raise UserError(f"{path}: cache format {meta['format_version']} is not "
                            f"{FORMAT_VERSION}; prepare it again")
        if meta.get("utterances") == 0:
            raise UserError(_nothing_usable(path))
        index = _read_json(path, CacheDir.INDEX)
        if not isinstance(index, dict) or any(k not in index for k in Index.required()):
            raise _Broken(CacheDir.INDEX, "incomplete (a column is missing)")
        columns = [k for k in Index.columns() if k in index]  # a later column, where it has it
        if len({len(index[k]) for k in columns}) != 1:
            raise _Broken(CacheDir.INDEX, "columns of different lengths")
        if not index["id"]:
            raise UserError(_nothing_usable(path))
        try:
            index = Index.from_json(index)
        except (TypeError, ValueError):
            raise _Broken(CacheDir.INDEX, "a number column holds something else") from None
        return meta, index, _check_shards(path, meta, index)
    except _Broken as e:
        return None, None, [(e.where, e.what)]


def _npy_header(f: Path) -> tuple[tuple, np.dtype, int, int]:
    """(shape, dtype, bytes the header implies, bytes on disk) from a .npy header alone."""
    with open(f, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, _, dtype = read(fh)
        return shape, dtype, fh.tell() + math.prod(shape) * dtype.itemsize, os.fstat(fh.fileno()).st_size


def _check_shards(path: Path, meta: dict, index: Index) -> list[tuple[str, str]]:
    """Every array file present, whole, and as long as the index says: header reads and file
    sizes, no checksums (that is :func:`verify`), so opening a cache stays cheap."""
    names = meta["shards"]
    shard = index.shard
    if shard.size and (shard.min() < 0 or shard.max() >= len(names)):
        return [(CacheDir.INDEX, f"refers to a shard that {CacheDir.META} does not list ({len(names)} shards)")]
    feats = ["mel", "tokens"] + (["wav"] if meta["settings"].get("data", {}).get("store_wav") else [])
    n_mels = meta["settings"].get("audio", {}).get("n_mels")
    problems = []
    need = {}
    for feat in feats:  # rows each shard must hold: the end of its last utterance
        _, _, off, n = ARRAYS[feat]
        need[feat] = np.zeros(len(names), dtype=np.int64)
        np.maximum.at(need[feat], shard, getattr(index, off) + getattr(index, n))
    for si, name in enumerate(names):
        d = CacheDir(path).shard(name)
        if not d.is_dir():
            problems.append((name, "shard folder missing"))
            continue
        for feat in feats:
            dtype, ndim, _, _ = ARRAYS[feat]
            f = CacheDir(path).shard_array(name, feat)
            if not f.is_file():
                problems.append((name, f"{feat}.npy missing"))
                continue
            try:
                shape, dt, want, have = _npy_header(f)
            except (OSError, ValueError) as e:
                problems.append((name, f"{feat}.npy unreadable ({e})"))
                continue
            if have < want:
                problems.append((name, f"{feat}.npy truncated ({have} of {want} bytes)"))
            elif dt != dtype or len(shape) != ndim or (feat == "mel" and shape[1] != n_mels):
                problems.append((name, f"{feat}.npy holds {dt}{list(shape)}, not the cache's layout"))
            elif shape[0] < need[feat][si]:
                problems.append((name, f"{feat}.npy has {shape[0]} rows, {CacheDir.INDEX} needs "
                                       f"{need[feat][si]}"))
    return problems


def check_structure(path: str | Path) -> list[tuple[str, str]]:
    """Cheap checks of a cache: meta.json and index.json readable, every shard's array files
    present, whole, and as long as the index implies. Returns (shard or file, problem).
    Raises UserError where there is no cache to repair (see :func:`verify`)."""
    return read_checked(Path(path))[2]


def verify(path: str | Path) -> list[tuple[str, str]]:
    """Check structure, every shard's checksums and index/array consistency. Returns (shard or
    file, problem) for what ``cache verify --fix`` repairs by preparing those parts again.

    Raises UserError for what it cannot repair: a folder that does not exist or holds no
    cache, and a cache of 0 utterances (the corpus had nothing usable)."""
    path = Path(path)
    if not CacheDir(path).meta.is_file():
        if path.is_dir() and CacheDir(path).recipe() is not None and not _found_nothing(path):
            return [(CacheDir.META, "missing: the cache is incomplete (prepare did not finish)")]
        raise UserError(_no_meta(path))
    meta, index, problems = read_checked(path)
    if meta is None:
        return problems
    n_mels = meta["settings"]["audio"]["n_mels"]
    for si, name in enumerate(meta["shards"]):
        if any(p[0] == name for p in problems):
            continue
        try:
            info = json.loads(CacheDir(path).shard_info(name).read_text())
        except (OSError, json.JSONDecodeError) as e:
            problems.append((name, f"{CacheDir.SHARD_INFO} unreadable ({type(e).__name__})"))
            continue
        for feat, digest in info["sha256"].items():
            f = CacheDir(path).shard_array(name, feat)
            if not f.is_file():
                problems.append((name, f"{feat}.npy missing"))
            elif sha256(f) != digest:
                problems.append((name, f"{feat}.npy checksum mismatch (corrupted)"))
        if any(p[0] == name for p in problems):
            continue
        ents = info["entries"]
        mel = np.load(CacheDir(path).shard_array(name, "mel"), mmap_mode="r")
        tok = np.load(CacheDir(path).shard_array(name, "tokens"), mmap_mode="r")
        if mel.ndim != 2 or mel.shape[1] != n_mels:
            problems.append((name, f"mel has shape {mel.shape}, expected (*, {n_mels})"))
        if sum(e["n_frames"] for e in ents) != mel.shape[0]:
            problems.append((name, "mel frame count disagrees with the shard's entries"))
        if sum(e["n_tokens"] for e in ents) != tok.shape[0]:
            problems.append((name, "token count disagrees with the shard's entries"))
        in_index = np.flatnonzero(index.shard == si)
        if [index.id[i] for i in in_index] != [e["id"] for e in ents]:
            problems.append((name, f"{CacheDir.INDEX} disagrees with the shard's entries"))
    return problems
