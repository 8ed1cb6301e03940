"""The packed feature cache's format: its layout, its typed index, the shard writer.

One spec, read by the writer (``prepare``), the reader (:class:`myxtts.data.cache.Cache`) and
``cache verify`` (:mod:`myxtts.data.verify`); where each file lives is
:class:`myxtts.data.cachedir.CacheDir`'s.

A shard directory is built whole under a temporary name (:func:`myxtts.files.atomic_folder`), so
a shard that exists is complete; a half-written one is never taken as valid. Readers slice the
memory maps: no decoding, no DSP, just indexing.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np

from myxtts.config import Config
from myxtts.data.cachedir import CacheDir
from myxtts.files import atomic_folder, write_json

FORMAT_VERSION = 1
META_KEYS = ("format_version", "settings", "source", "vocab", "speakers", "shards")
# feature → (dtype, dimensions, Index columns giving each utterance's offset and length)
ARRAYS = {"mel": (np.float16, 2, "mel_offset", "n_frames"),
          "tokens": (np.int16, 1, "tok_offset", "n_tokens"),
          "wav": (np.int16, 1, "wav_offset", "n_samples")}
SPLITS = {"train": 0, "val": 1}
# Index columns added after caches were first written, with the value every row of an older
# cache, which has no such column, takes: its one language is the first of :func:`languages`.
ADDED_COLUMNS = {"language": 0}


@dataclasses.dataclass(frozen=True)
class Index:
    """index.json: one entry per utterance in every column, in cache order (a cache index ``i``
    is a row here). Text columns are lists; number columns int64 arrays."""

    id: list[str]
    text: list[str]
    audio: list[str]  # source audio path, relative to the corpus root
    shard: np.ndarray  # which of meta.json's shards holds the features
    mel_offset: np.ndarray  # first frame in the shard's mel.npy
    n_frames: np.ndarray
    tok_offset: np.ndarray  # first id in the shard's tokens.npy
    n_tokens: np.ndarray
    wav_offset: np.ndarray  # first sample in the shard's wav.npy (when stored)
    n_samples: np.ndarray
    speaker: np.ndarray  # position in meta.json's speakers
    val: np.ndarray  # SPLITS value: 0 train, 1 validation
    language: np.ndarray  # position in meta.json's languages (:func:`languages`)

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def required(cls) -> tuple[str, ...]:
        """The columns every cache's index.json holds (:data:`ADDED_COLUMNS` came later)."""
        return tuple(k for k in cls.columns() if k not in ADDED_COLUMNS)

    @classmethod
    def from_json(cls, cols: dict) -> Index:
        text = {"id", "text", "audio"}
        cols = {**{k: [v] * len(cols["id"]) for k, v in ADDED_COLUMNS.items()}, **cols}
        return cls(**{k: list(cols[k]) if k in text else np.asarray(cols[k], dtype=np.int64)
                      for k in cls.columns()})

    def to_json(self) -> dict:
        return {k: v if isinstance(v, list) else v.tolist()
                for k, v in ((k, getattr(self, k)) for k in self.columns())}

    def __len__(self) -> int:
        return len(self.id)


def languages(meta: dict) -> list[str]:
    """The languages of a cache's utterances (``Index.language`` is a position here): meta.json's
    ``languages``; a cache prepared before they were recorded is one of its ``text.language``."""
    return list(meta.get("languages") or [meta["settings"]["text"]["language"]])


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
    with atomic_folder(shard_dir) as tmp:
        _fill_shard(tmp, entries, mels, tokens, wavs, extra or {})


def _fill_shard(tmp: Path, entries: list[dict], mels, tokens, wavs, extra: dict) -> None:
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
        np.save(path, arr)
        checksums[name] = sha256(path)
    write_json(tmp / CacheDir.SHARD_INFO, {"entries": entries, "sha256": checksums, **extra})



# Content settings added after caches were first written, with the value an older cache, which
# does not record them, was made with.
ADDED_SETTINGS = {("data", "pseudo_speakers"): 0}


def settings_of(cfg: Config) -> dict:
    """The settings that decide a cache's content; a cache made with others is refused."""
    d = cfg.data
    return {"audio": vars(cfg.audio).copy(), "text": vars(cfg.text).copy(),
            "data": {"min_seconds": d.min_seconds, "max_seconds": d.max_seconds,
                     "store_wav": d.store_wav, "pseudo_speakers": d.pseudo_speakers}}


def recorded(have: dict, section: str, key: str, missing=None):
    """A cache's recorded content setting; one added later reads as what older caches were made with."""
    return have.get(section, {}).get(key, ADDED_SETTINGS.get((section, key), missing))


def settings_diff(have: dict, want: dict) -> list[str]:
    out = []
    for section in want:
        for key, value in want[section].items():
            old = recorded(have, section, key, "<missing>")
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
        have = json.loads(CacheDir(path).meta.read_text(encoding="utf-8"))["settings"]
    except (OSError, ValueError, KeyError, TypeError):
        return cfg, []
    changes = {section: {key: recorded(have, section, key) for key, value in values.items()
                         if f"{section}.{key}" not in pinned and recorded(have, section, key, value) != value}
               for section, values in settings_of(cfg).items()}
    taken = [f"{section}.{key}={value}" for section, kv in changes.items() for key, value in kv.items()]
    if not taken:
        return cfg, []
    return dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **kv)
                                       for section, kv in changes.items() if kv}), taken
