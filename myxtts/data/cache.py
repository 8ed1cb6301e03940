"""The packed feature cache: shard writer, memory-mapped reader, and `myxtts cache verify`.

Layout of a cache directory::

    meta.json             format version, audio/text settings, source corpus, vocabulary,
                          speakers, shard list; written last, so its presence means "complete"
    index.json            one column per field over all utterances (see INDEX_FIELDS)
    report.json           what prepare kept and skipped, and why
    recipe.json           how prepare makes it (corpus, settings, chunks): a rerun resumes from it,
                          ``cache verify --fix`` prepares broken parts again with it
    shards/NNNNN/         mel.npy (frames, n_mels) float16, tokens.npy (n,) int16,
                          wav.npy (samples,) int16 [optional], shard.json (entries + sha256)

A shard directory is built under a temporary name and renamed into place, so a shard that exists
is complete; a half-written one is never taken as valid. Readers slice the memory maps: no
decoding, no DSP, just indexing.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np

from myxtts.config import AudioConfig, Config, TextConfig
from myxtts.errors import UserError
from myxtts.text import Vocabulary

RECIPE = "recipe.json"  # how prepare makes this cache: corpus, settings, chunks (a rerun resumes)
OLD_RECIPE = "plan.json"  # its name in caches prepared before it had one of its own

FORMAT_VERSION = 1
FEATURES = ("mel", "tokens", "wav")
INDEX_FIELDS = ("shard", "mel_offset", "n_frames", "tok_offset", "n_tokens", "wav_offset",
                "n_samples", "speaker", "val")
SPLITS = {"train": 0, "val": 1}


def write_json(path: Path, obj) -> None:
    """Atomic JSON write: a reader sees the old file or the new one, never a torn one."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_shard(shard_dir: Path, entries: list[dict], mels: list[np.ndarray],
                tokens: list[np.ndarray], wavs: list[np.ndarray] | None,
                extra: dict | None = None) -> None:
    """Concatenate one shard's features and move the finished directory into place."""
    tmp = shard_dir.with_name(f"tmp.{shard_dir.name}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    n_mels = mels[0].shape[1] if mels else 0
    arrays = {
        # Row-major so one utterance's frames are one contiguous run of bytes to slice.
        "mel": np.ascontiguousarray(np.concatenate(mels), dtype=np.float16) if mels
        else np.zeros((0, n_mels), np.float16),
        "tokens": np.concatenate(tokens).astype(np.int16) if tokens else np.zeros(0, np.int16),
    }
    if wavs is not None:
        arrays["wav"] = np.concatenate(wavs).astype(np.int16) if wavs else np.zeros(0, np.int16)
    checksums = {}
    for name, arr in arrays.items():
        path = tmp / f"{name}.npy"
        with open(path, "wb") as f:
            np.save(f, arr)
            f.flush()
            os.fsync(f.fileno())
        checksums[name] = sha256(path)
    write_json(tmp / "shard.json", {"entries": entries, "sha256": checksums, **(extra or {})})
    shutil.rmtree(shard_dir, ignore_errors=True)
    os.rename(tmp, shard_dir)


def settings_of(cfg: Config) -> dict:
    """The settings that decide a cache's content; a cache made with others is refused."""
    d = cfg.data
    return {"audio": vars(cfg.audio).copy(), "text": vars(cfg.text).copy(),
            "data": {"min_seconds": d.min_seconds, "max_seconds": d.max_seconds,
                     "store_wav": d.store_wav}}


def settings_diff(have: dict, want: dict) -> list[str]:
    out = []
    for section in want:
        for key, value in want[section].items():
            old = have.get(section, {}).get(key, "<missing>")
            if old != value:
                out.append(f"{section}.{key}: cache has {old!r}, requested {value!r}")
    return out


def with_cache_settings(cfg: Config, path: str | Path, pinned: set[str]) -> tuple[Config, list[str]]:
    """``cfg`` with the content settings (:func:`settings_of`) that the cache at ``path`` was
    prepared with, except the ``section.key`` names in ``pinned``; and each change, as
    ``section.key=value``. A model must read its cache's features and tokens, so a setting the
    user did not pin is taken from the cache rather than refused. A pinned one that differs is
    still refused when the cache opens, and so is a missing or broken cache."""
    try:
        have = json.loads((Path(path) / "meta.json").read_text(encoding="utf-8"))["settings"]
    except (OSError, ValueError, KeyError, TypeError):
        return cfg, []
    changes = {section: {key: have[section][key] for key, value in values.items()
                         if f"{section}.{key}" not in pinned and have.get(section, {}).get(key, value) != value}
               for section, values in settings_of(cfg).items()}
    taken = [f"{section}.{key}={value}" for section, kv in changes.items() for key, value in kv.items()]
    if not taken:
        return cfg, []
    return dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **kv)
                                       for section, kv in changes.items() if kv}), taken


class Cache:
    """Read side of a prepared cache. Memory maps open lazily, per process (fork-safe).

    Opening checks the cache's structure (see :func:`check_structure`), so a deleted,
    truncated or unreadable file is one clear error here rather than a traceback mid-run."""

    def __init__(self, path: str | Path, expect: Config | None = None):
        self.path = Path(path)
        meta, index, problems = _open(self.path)
        if problems:
            raise UserError(_one_line(self.path, problems))
        if expect is not None:
            diff = settings_diff(meta["settings"], settings_of(expect))
            if diff:
                raise UserError(f"{self.path} was prepared with other settings:\n  "
                                + "\n  ".join(diff)
                                + "\nprepare a new cache, or use the cache's settings")
        self.meta = meta
        self.ids: list[str] = index["id"]
        self.texts: list[str] = index["text"]
        self.audio_paths: list[str] = index["audio"]
        for name in INDEX_FIELDS:
            setattr(self, name, np.asarray(index[name], dtype=np.int64))
        self.vocab = Vocabulary(meta["vocab"])
        self.speakers: list[str] = meta["speakers"]
        self.audio_cfg = AudioConfig(**meta["settings"]["audio"])
        self.text_cfg = TextConfig(**meta["settings"]["text"])
        self.has_wav = bool(meta["settings"]["data"]["store_wav"])
        self.shard_names: list[str] = meta["shards"]
        self._maps: dict | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def __getstate__(self):  # worker processes reopen the maps themselves
        state = self.__dict__.copy()
        state["_maps"] = None
        return state

    @property
    def source_root(self) -> Path:
        return Path(self.meta["source"]["root"])

    def shard_file(self, i: int, name: str) -> Path:
        """The ``name``.npy file holding utterance ``i``'s feature."""
        return self.path / "shards" / self.shard_names[self.shard[i]] / f"{name}.npy"

    def _arrays(self, name: str) -> list[np.ndarray]:
        if self._maps is None:
            self._maps = {}
        if name not in self._maps:
            if name == "wav" and not self.has_wav:
                raise UserError(f"{self.path}: waveforms were not stored; prepare with "
                                "data.store_wav=true for vocoder training")
            maps = []
            for s in self.shard_names:
                f = self.path / "shards" / s / f"{name}.npy"
                try:
                    maps.append(np.load(f, mmap_mode="r"))
                except (OSError, ValueError) as e:  # changed since the cache was opened
                    raise UserError(f"{f}: unreadable ({e}); {_fix(self.path)}") from None
            self._maps[name] = maps
        return self._maps[name]

    def mel(self, i: int) -> np.ndarray:
        """(n_frames, n_mels) float16 view into the shard's memory map."""
        o = self.mel_offset[i]
        return self._arrays("mel")[self.shard[i]][o:o + self.n_frames[i]]

    def tokens(self, i: int) -> np.ndarray:
        o = self.tok_offset[i]
        return self._arrays("tokens")[self.shard[i]][o:o + self.n_tokens[i]]

    def wav(self, i: int) -> np.ndarray:
        """(n_samples,) int16; divide by 32768 for [-1, 1]."""
        o = self.wav_offset[i]
        return self._arrays("wav")[self.shard[i]][o:o + self.n_samples[i]]

    def indices(self, split: str = "train") -> np.ndarray:
        return np.flatnonzero(self.val == SPLITS[split])

    def seconds(self) -> float:
        return float(self.n_frames.sum()) * self.audio_cfg.hop_length / self.audio_cfg.sample_rate


# -------------------------------------------------------------------------------- structure

META_KEYS = ("format_version", "settings", "source", "vocab", "speakers", "shards")
# feature → (dtype, dimensions, index columns giving each utterance's offset and length)
ARRAYS = {"mel": (np.float16, 2, "mel_offset", "n_frames"),
          "tokens": (np.int16, 1, "tok_offset", "n_tokens"),
          "wav": (np.int16, 1, "wav_offset", "n_samples")}


def _fix(path: Path) -> str:
    return f"run `myxtts cache verify {path} --fix`"


def _one_line(path: Path, problems: list[tuple[str, str]]) -> str:
    where, what = problems[0]
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    where = f"shard {where}" if where.isdigit() else where
    return f"{path}: {where}: {what}{more}; {_fix(path)}"


def recipe_path(cache: Path) -> Path | None:
    """The cache's recipe file (``recipe.json``, or ``plan.json`` in an older cache); None."""
    for name in (RECIPE, OLD_RECIPE):
        if (cache / name).is_file():
            return cache / name
    return None


def _no_meta(path: Path) -> str:
    """Why a folder has no meta.json, and what to do about it."""
    if not path.exists():
        return f"{path}: no such folder"
    if not path.is_dir():
        return f"{path}: not a folder"
    if _found_nothing(path):
        return _nothing_usable(path)
    if recipe_path(path) is not None:
        return (f"{path}: prepare did not finish (no meta.json); run the same `myxtts prepare` "
                "command again to resume")
    return f"{path}: not a prepared cache (no meta.json); run `myxtts prepare`"


def _found_nothing(path: Path) -> bool:
    """prepare finished and kept no utterance (it then writes report.json but no meta.json)."""
    try:
        return json.loads((path / "report.json").read_text()).get("utterances") == 0
    except (OSError, ValueError, AttributeError):
        return False


def _nothing_usable(path: Path) -> str:
    return (f"{path}: the cache holds 0 utterances: prepare found nothing usable in the corpus "
            f"(reasons in {path / 'report.json'}); fix the corpus and run `myxtts prepare` again")


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


def _open(path: Path) -> tuple[dict | None, dict | None, list[tuple[str, str]]]:
    """(meta, index, structural problems). Raises UserError for what --fix cannot repair: no
    cache at all, another format version, a cache with nothing in it."""
    if not (path / "meta.json").is_file():
        raise UserError(_no_meta(path))
    try:
        meta = _read_json(path, "meta.json")
        if not isinstance(meta, dict) or any(k not in meta for k in META_KEYS):
            raise _Broken("meta.json", "incomplete (a field is missing)")
        if meta["format_version"] != FORMAT_VERSION:
            raise UserError(f"{path}: cache format {meta['format_version']} is not "
                            f"{FORMAT_VERSION}; prepare it again")
        if meta.get("utterances") == 0:
            raise UserError(_nothing_usable(path))
        index = _read_json(path, "index.json")
        columns = ("id", "text", "audio") + INDEX_FIELDS
        if not isinstance(index, dict) or any(k not in index for k in columns):
            raise _Broken("index.json", "incomplete (a column is missing)")
        if len({len(index[k]) for k in columns}) != 1:
            raise _Broken("index.json", "columns of different lengths")
        if not index["id"]:
            raise UserError(_nothing_usable(path))
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


def _check_shards(path: Path, meta: dict, index: dict) -> list[tuple[str, str]]:
    """Every array file present, whole, and as long as the index says: header reads and file
    sizes, no checksums (that is :func:`verify`), so opening a cache stays cheap."""
    names = meta["shards"]
    shard = np.asarray(index["shard"], dtype=np.int64)
    if shard.size and (shard.min() < 0 or shard.max() >= len(names)):
        return [("index.json", f"refers to a shard that meta.json does not list ({len(names)} shards)")]
    feats = ["mel", "tokens"] + (["wav"] if meta["settings"].get("data", {}).get("store_wav") else [])
    n_mels = meta["settings"].get("audio", {}).get("n_mels")
    problems = []
    need = {}
    for feat in feats:  # rows each shard must hold: the end of its last utterance
        _, _, off, n = ARRAYS[feat]
        need[feat] = np.zeros(len(names), dtype=np.int64)
        np.maximum.at(need[feat], shard, np.asarray(index[off], np.int64) + np.asarray(index[n], np.int64))
    for si, name in enumerate(names):
        d = path / "shards" / name
        if not d.is_dir():
            problems.append((name, "shard folder missing"))
            continue
        for feat in feats:
            dtype, ndim, _, _ = ARRAYS[feat]
            f = d / f"{feat}.npy"
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
                problems.append((name, f"{feat}.npy has {shape[0]} rows, index.json needs "
                                       f"{need[feat][si]}"))
    return problems


def check_structure(path: str | Path) -> list[tuple[str, str]]:
    """Cheap checks of a cache: meta.json and index.json readable, every shard's array files
    present, whole, and as long as the index implies. Returns (shard or file, problem).
    Raises UserError where there is no cache to repair (see :func:`verify`)."""
    return _open(Path(path))[2]


# ----------------------------------------------------------------------------------- verify

def verify(path: str | Path) -> list[tuple[str, str]]:
    """Check structure, every shard's checksums and index/array consistency. Returns (shard or
    file, problem) for what ``cache verify --fix`` repairs by preparing those parts again.

    Raises UserError for what it cannot repair: a folder that does not exist or holds no
    cache, and a cache of 0 utterances (the corpus had nothing usable)."""
    path = Path(path)
    if not (path / "meta.json").is_file():
        if path.is_dir() and recipe_path(path) is not None and not _found_nothing(path):
            return [("meta.json", "missing: the cache is incomplete (prepare did not finish)")]
        raise UserError(_no_meta(path))
    meta, index, problems = _open(path)
    if meta is None:
        return problems
    n_mels = meta["settings"]["audio"]["n_mels"]
    for si, name in enumerate(meta["shards"]):
        if any(p[0] == name for p in problems):
            continue
        d = path / "shards" / name
        try:
            info = json.loads((d / "shard.json").read_text())
        except (OSError, json.JSONDecodeError) as e:
            problems.append((name, f"shard.json unreadable ({type(e).__name__})"))
            continue
        for feat, digest in info["sha256"].items():
            f = d / f"{feat}.npy"
            if not f.is_file():
                problems.append((name, f"{feat}.npy missing"))
            elif sha256(f) != digest:
                problems.append((name, f"{feat}.npy checksum mismatch (corrupted)"))
        if any(p[0] == name for p in problems):
            continue
        ents = info["entries"]
        mel = np.load(d / "mel.npy", mmap_mode="r")
        tok = np.load(d / "tokens.npy", mmap_mode="r")
        if mel.ndim != 2 or mel.shape[1] != n_mels:
            problems.append((name, f"mel has shape {mel.shape}, expected (*, {n_mels})"))
        if sum(e["n_frames"] for e in ents) != mel.shape[0]:
            problems.append((name, "mel frame count disagrees with the shard's entries"))
        if sum(e["n_tokens"] for e in ents) != tok.shape[0]:
            problems.append((name, "token count disagrees with the shard's entries"))
        in_index = [i for i, s in enumerate(index["shard"]) if s == si]
        if [index["id"][i] for i in in_index] != [e["id"] for e in ents]:
            problems.append((name, "index.json disagrees with the shard's entries"))
    return problems
