"""Read side of a prepared cache (format: :mod:`myxtts.data.format`): memory-mapped features.

Readers slice the shard memory maps: no decoding, no DSP, just indexing. ``cache.index`` holds
the per-utterance columns (lengths, speaker, language, split), typed.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from myxtts.config import AudioConfig, Config, TextConfig
from myxtts.data.cachedir import CacheDir
from myxtts.data.format import SPLITS, Index, languages, settings_diff, settings_of
from myxtts.data.verify import fix_hint, one_line, read_checked
from myxtts.errors import UserError
from myxtts.text import Vocabulary


class Cache:
    """Read side of a prepared cache. Memory maps open lazily, per process (fork-safe).

    Opening checks the cache's structure (see :func:`myxtts.data.verify.check_structure`), so a deleted,
    truncated or unreadable file is one clear error here rather than a traceback mid-run."""

    def __init__(self, path: str | Path, expect: Config | None = None):
        self.path = Path(path)
        meta, index, problems = read_checked(self.path)
        if problems:
            raise UserError(one_line(self.path, problems))
        if expect is not None:
            diff = settings_diff(meta["settings"], settings_of(expect))
            if diff:
                raise UserError(f"{self.path} was prepared with other settings:\n  "
                                + "\n  ".join(diff)
                                + "\nprepare a new cache, or use the cache's settings")
        self.meta = meta
        self.index: Index = index
        self.vocab = Vocabulary(meta["vocab"])
        self.speakers: list[str] = meta["speakers"]
        self.languages: list[str] = languages(meta)  # an older cache: its text.language alone
        self.audio_cfg = AudioConfig(**meta["settings"]["audio"])
        self.text_cfg = TextConfig(**meta["settings"]["text"])
        self.has_wav = bool(meta["settings"]["data"]["store_wav"])
        self.shard_names: list[str] = meta["shards"]
        self._maps: dict | None = None

    def __len__(self) -> int:
        return len(self.index)

    def __getstate__(self):  # worker processes reopen the maps themselves
        state = self.__dict__.copy()
        state["_maps"] = None
        return state

    @property
    def source_root(self) -> Path:
        return Path(self.meta["source"]["root"])

    def shard_file(self, i: int, name: str) -> Path:
        """The ``name``.npy file holding utterance ``i``'s feature."""
        return CacheDir(self.path).shard_array(self.shard_names[self.index.shard[i]], name)

    def corrupted(self, i: int, name: str, what: str) -> UserError:
        """The error for utterance ``i``'s ``name`` feature found damaged while reading."""
        return UserError(f"{self.shard_file(i, name)}: utterance {self.index.id[i]} has {what} (the "
                         f"shard is corrupted); run `myxtts cache verify {self.path} --fix`")

    def _arrays(self, name: str) -> list[np.ndarray]:
        if self._maps is None:
            self._maps = {}
        if name not in self._maps:
            if name == "wav" and not self.has_wav:
                raise UserError(f"{self.path}: waveforms were not stored; prepare with "
                                "data.store_wav=true for vocoder training")
            maps = []
            for s in self.shard_names:
                f = CacheDir(self.path).shard_array(s, name)
                try:
                    maps.append(np.load(f, mmap_mode="r"))
                except (OSError, ValueError) as e:  # changed since the cache was opened
                    raise UserError(f"{f}: unreadable ({e}); {fix_hint(self.path)}") from None
            self._maps[name] = maps
        return self._maps[name]

    def mel(self, i: int) -> np.ndarray:
        """(n_frames, n_mels) float16 view into the shard's memory map."""
        o = self.index.mel_offset[i]
        return self._arrays("mel")[self.index.shard[i]][o:o + self.index.n_frames[i]]

    def tokens(self, i: int) -> np.ndarray:
        o = self.index.tok_offset[i]
        return self._arrays("tokens")[self.index.shard[i]][o:o + self.index.n_tokens[i]]

    def wav(self, i: int) -> np.ndarray:
        """(n_samples,) int16; divide by 32768 for [-1, 1]."""
        o = self.index.wav_offset[i]
        return self._arrays("wav")[self.index.shard[i]][o:o + self.index.n_samples[i]]

    def number_languages(self, table: list[str]) -> None:
        """Read utterances' languages as rows of ``table`` (a model's language table, which holds
        every language of this cache and may hold more: a model that learns a new language keeps
        the rows of those it knew), so the batches' ``language`` is what the model reads."""
        lacking = [lang for lang in self.languages if lang not in table]
        if lacking:
            raise UserError(f"{self.path}: utterances in {', '.join(lacking)}, which the model's "
                            f"languages ({', '.join(table)}) lack")
        rows = np.array([table.index(lang) for lang in self.languages], dtype=self.index.language.dtype)
        self.index = dataclasses.replace(self.index, language=rows[self.index.language])
        self.languages = list(table)

    def language(self, i: int) -> str:
        """The language utterance ``i`` was read in (an espeak-ng code)."""
        return self.languages[self.index.language[i]]

    def indices(self, split: str = "train") -> np.ndarray:
        return np.flatnonzero(self.index.val == SPLITS[split])

    def by_speaker(self) -> dict[int, list[int]]:
        """Speaker → its utterances, those of the training split first, each part in index order."""
        out: dict[int, list[int]] = {}
        for i in sorted(range(len(self)), key=lambda i: (int(self.index.val[i]), i)):
            out.setdefault(int(self.index.speaker[i]), []).append(i)
        return out

    def first_of_each_speaker(self) -> dict[int, int]:
        """Speaker → its first utterance (:meth:`by_speaker`'s first): a voice's reference, the
        held-out split's first for a voice held out whole."""
        return {s: utts[0] for s, utts in self.by_speaker().items()}

    def voices(self, split: str = "train") -> list[str]:
        """The speakers with utterances in ``split``: for ``train``, the voices a model trained on
        this cache heard (a voice held out whole is not one)."""
        return [self.speakers[s] for s in sorted(set(self.index.speaker[self.indices(split)].tolist()))]

    def seconds(self) -> float:
        return float(self.index.n_frames.sum()) * self.audio_cfg.hop_length / self.audio_cfg.sample_rate
