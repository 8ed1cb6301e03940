"""The voices a server speaks in, by name, each conditioned once at start-up and kept.

- **Training speakers**: every speaker of the cache the run was trained on (``--data``, or the
  cache beside a ``myxtts demo`` run), in the voice of their first training utterance: the
  reference rule of training and ``eval`` (:func:`myxtts.speak.reference_from_mel`).
- **A voices folder** (``--voices DIR``): one folder of reference clips per voice, named by the
  folder (the layout wyoming-piper uses for cloned voices). The clips' audio is joined in name
  order and cut to the reference length training used. Only files inside DIR are read: a
  link that leads outside it is skipped, and a request names a voice, never a path.
- **neutral**: the model's voice with no reference (its learned latents alone).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from myxtts import speak
from myxtts.errors import UserError

NEUTRAL = "neutral"
CLIP_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3")


@dataclass(frozen=True)
class Voice:
    name: str
    source: str  # "training speaker", "voices folder", "no reference"
    reference: speak.Reference


def training_speakers(cache_path: Path, cfg, say) -> list[Voice]:
    """One voice per speaker of a prepared cache: its first training utterance as reference."""
    from myxtts.data.cache import Cache

    cache = Cache(cache_path)
    first: dict[int, int] = {}
    for i in cache.indices("train"):
        first.setdefault(int(cache.index.speaker[i]), int(i))
    return [Voice(cache.speakers[s], "training speaker",
                  speak.reference_from_cache(cache, i, cfg)) for s, i in sorted(first.items())]


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
        return True
    except ValueError:
        return False


def folder_voice(sub: Path, root: Path, cfg, say) -> Voice:
    """One voice folder (``sub``, inside ``root``) → its voice: the clips' audio joined in name
    order, cut to the reference length. A clip that cannot be used is skipped, saying why; a
    :class:`UserError` if none can."""
    clips = sorted(p for p in sub.iterdir() if p.suffix.lower() in CLIP_SUFFIXES and p.is_file() and _inside(p, root))
    refs = []
    for clip in clips:
        try:
            refs.append(speak.reference_from_file(clip, cfg))
        except UserError as e:
            say(f"note: {e}; clip skipped")
    if not refs:
        raise UserError(f"voice {sub.name} skipped: no usable clip ({', '.join(CLIP_SUFFIXES)}) in {sub}")
    emb = speak.mean_embedding([r.embedding for r in refs if r.embedding is not None])
    return Voice(sub.name, "voices folder", speak.reference_from_mel(torch.cat([r.mel for r in refs]), cfg,
                                                                      embedding=emb))


def folder_voices(folder: Path, cfg, say) -> list[Voice]:
    """One voice per sub-folder of ``folder`` holding readable clips; the rest are skipped, saying why."""
    root = folder.resolve()
    if not root.is_dir():
        raise UserError(f"--voices {folder}: not a folder")
    out = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        if not _inside(sub, root):
            say(f"note: voice {sub.name} skipped: it leads outside {folder}")
            continue
        try:
            out.append(folder_voice(sub, root, cfg, say))
        except UserError as e:
            say(f"note: {e}")
    return out


class Voices:
    """Name → :class:`Voice`; the first given under a name wins (a training speaker over a folder)."""

    def __init__(self, voices: list[Voice]):
        self.by_name: dict[str, Voice] = {}
        for v in voices:
            self.by_name.setdefault(v.name, v)

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in self.by_name

    def __getitem__(self, name: str) -> Voice:
        return self.by_name[name]

    def add(self, voice: Voice) -> None:
        """A voice made while serving (an upload), under a name not yet taken."""
        self.by_name.setdefault(voice.name, voice)

    @property
    def names(self) -> list[str]:
        return list(self.by_name)

    def listing(self, hop_seconds: float) -> list[dict]:
        return [{"name": v.name, "source": v.source,
                 "reference_seconds": round(v.reference.frames * hop_seconds, 2)} for v in self.by_name.values()]


def load_voices(model, cfg, cache: Path | None, folder: Path | None, say) -> Voices:
    """Training speakers (from ``cache``), then the folders of ``folder``, then ``neutral``, each
    with its conditioning latents computed once (:func:`myxtts.speak.with_latents`)."""
    found = training_speakers(cache, cfg, say) if cache is not None else []
    if folder is not None:
        found += folder_voices(folder, cfg, say)
    found.append(Voice(NEUTRAL, "no reference", speak.neutral(cfg)))
    return Voices([Voice(v.name, v.source, speak.with_latents(model, v.reference)) for v in found])
