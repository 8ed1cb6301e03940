"""The packed feature cache: shard writer, memory-mapped reader, and `myxtts cache verify`.

Layout of a cache directory::

    meta.json             format version, audio/text settings, source corpus, vocabulary,
                          speakers, shard list; written last, so its presence means "complete"
    index.json            one column per field over all utterances (see INDEX_FIELDS)
    report.json           what prepare kept and skipped, and why
    shards/NNNNN/         mel.npy (frames, n_mels) float16, tokens.npy (n,) int16,
                          wav.npy (samples,) int16 [optional], shard.json (entries + sha256)

A shard directory is built under a temporary name and renamed into place, so a shard that exists
is complete; a half-written one is never taken as valid. Readers slice the memory maps: no
decoding, no DSP, just indexing.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from myxtts.config import AudioConfig, Config, TextConfig
from myxtts.errors import UserError
from myxtts.text import Vocabulary

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


class Cache:
    """Read side of a prepared cache. Memory maps open lazily, per process (fork-safe)."""

    def __init__(self, path: str | Path, expect: Config | None = None):
        self.path = Path(path)
        meta_path = self.path / "meta.json"
        if not meta_path.is_file():
            raise UserError(f"{self.path}: not a prepared cache (no meta.json); run `myxtts prepare`")
        self.meta = json.loads(meta_path.read_text())
        if self.meta.get("format_version") != FORMAT_VERSION:
            raise UserError(f"{self.path}: cache format {self.meta.get('format_version')} is not "
                            f"{FORMAT_VERSION}; prepare it again")
        if expect is not None:
            diff = settings_diff(self.meta["settings"], settings_of(expect))
            if diff:
                raise UserError(f"{self.path} was prepared with other settings:\n  "
                                + "\n  ".join(diff)
                                + "\nprepare a new cache, or use the cache's settings")
        index = json.loads((self.path / "index.json").read_text())
        self.ids: list[str] = index["id"]
        self.texts: list[str] = index["text"]
        self.audio_paths: list[str] = index["audio"]
        for name in INDEX_FIELDS:
            setattr(self, name, np.asarray(index[name], dtype=np.int64))
        self.vocab = Vocabulary(self.meta["vocab"])
        self.speakers: list[str] = self.meta["speakers"]
        self.audio_cfg = AudioConfig(**self.meta["settings"]["audio"])
        self.text_cfg = TextConfig(**self.meta["settings"]["text"])
        self.has_wav = bool(self.meta["settings"]["data"]["store_wav"])
        self.shard_names: list[str] = self.meta["shards"]
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

    def _arrays(self, name: str) -> list[np.ndarray]:
        if self._maps is None:
            self._maps = {}
        if name not in self._maps:
            if name == "wav" and not self.has_wav:
                raise UserError(f"{self.path}: waveforms were not stored; prepare with "
                                "data.store_wav=true for vocoder training")
            self._maps[name] = [np.load(self.path / "shards" / s / f"{name}.npy", mmap_mode="r")
                                for s in self.shard_names]
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


# ----------------------------------------------------------------------------------- verify

def verify(path: str | Path) -> list[tuple[str, str]]:
    """Check every shard's checksums and index/array consistency. Returns (shard, problem)."""
    path = Path(path)
    if not (path / "meta.json").is_file():
        return [("meta.json", "missing: the cache is incomplete (prepare did not finish)")]
    try:
        meta = json.loads((path / "meta.json").read_text())
        index = json.loads((path / "index.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        return [("index", f"unreadable: {e}")]
    problems = []
    n_mels = meta["settings"]["audio"]["n_mels"]
    for si, name in enumerate(meta["shards"]):
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
