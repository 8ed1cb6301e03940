"""A prepared cache's folder: where each thing in it lives. Layout::

    CACHE/meta.json             format version, audio/text settings, source corpus, vocabulary,
                                speakers, languages, shard list; written last, so its presence
                                means "complete"
    CACHE/index.json            one column per :class:`myxtts.data.format.Index` field over all utterances
    CACHE/report.json           what prepare kept and skipped, and why
    CACHE/recipe.json           how prepare makes it (corpus, settings, chunks, --match's model): a rerun
                                resumes from it, ``cache verify --fix`` prepares broken parts again with it
    CACHE/shards/NNNNN/         mel.npy (frames, n_mels) float16, tokens.npy (n,) int16,
                                wav.npy (samples,) int16 [optional], shard.json (entries + sha256)
    CACHE/speaker_embeddings.npy    one speaker embedding per utterance (data/embeddings.py)

What the files hold is :mod:`myxtts.data.format`'s; everything that reads or writes a cache
(prepare, :class:`myxtts.data.cache.Cache`, ``cache verify``) finds them through :class:`CacheDir`.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

from myxtts.files import Folder, below

_in_cache = partial(below, "CACHE")  # a path of the layout, below the folder


class CacheDir(Folder):
    META = "meta.json"
    INDEX = "index.json"
    REPORT = "report.json"
    RECIPE = "recipe.json"
    OLD_RECIPE = "plan.json"  # the recipe's name in caches prepared before it had one of its own
    SHARDS = "shards"
    SHARD_INFO = "shard.json"
    EMBEDDINGS = "speaker_embeddings.npy"

    meta = _in_cache(META)
    index = _in_cache(INDEX)
    report = _in_cache(REPORT)
    shards = _in_cache(SHARDS)
    embeddings = _in_cache(EMBEDDINGS)

    @staticmethod
    def shard_name(j: int) -> str:
        """The name of the shard that holds chunk ``j`` of prepare's recipe."""
        return f"{j:05d}"

    def shard(self, name: str) -> Path:
        """CACHE/shards/NAME/: one shard's folder."""
        return self.shards / name

    def shard_info(self, name: str) -> Path:
        return self.shard(name) / self.SHARD_INFO

    def shard_array(self, name: str, feature: str) -> Path:
        """The ``feature``.npy file of shard ``name`` (features: :data:`myxtts.data.format.ARRAYS`)."""
        return self.shard(name) / f"{feature}.npy"

    @property
    def new_recipe(self) -> Path:
        """Where prepare writes the recipe of a cache that has none yet."""
        return self.path / self.RECIPE

    def recipe(self) -> Path | None:
        """The cache's recipe file (``recipe.json``, or ``plan.json`` in an older cache); None."""
        for name in (self.RECIPE, self.OLD_RECIPE):
            if (self.path / name).is_file():
                return self.path / name
        return None
