"""The voices a server speaks in, by name, each conditioned once at start-up and kept.

- **Cache speakers**: every speaker of the cache the run was trained on (``--data``, or the one
  the run recorded), each in the voice of its first utterance (:func:`myxtts.voice.cache_voices`).
- **A voices folder** (``--voices DIR``): one folder of reference clips per voice, named by the
  folder (the layout wyoming-piper uses for cloned voices), made by the one folder rule
  (:func:`myxtts.voice.from_folder`). Only files inside DIR are read: a link that leads outside
  it is skipped, and a request names a voice, never a path.
- **neutral**: the model's voice with no reference (its learned latents alone).
"""
from __future__ import annotations

from pathlib import Path

from myxtts import speak
from myxtts.errors import UserError
from myxtts.voice import CLIP_SUFFIXES, NEUTRAL, Voice, cache_voices, from_folder, inside, neutral

__all__ = ["CLIP_SUFFIXES", "NEUTRAL", "Voice", "Voices", "folder_voices", "load_voices", "training_speakers"]


def training_speakers(cache_path: Path, cfg, say=None) -> list[Voice]:
    """One voice per speaker of the prepared cache at ``cache_path``."""
    from myxtts.data.cache import Cache

    return cache_voices(Cache(cache_path), cfg)


def folder_voices(folder: Path, cfg, say) -> list[Voice]:
    """One voice per sub-folder of ``folder`` holding readable clips; the rest are skipped, saying why."""
    root = folder.resolve()
    if not root.is_dir():
        raise UserError(f"--voices {folder}: not a folder")
    out = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        if not inside(sub, root):
            say(f"note: voice {sub.name} skipped: it leads outside {folder}")
            continue
        v = from_folder(sub.name, sub, cfg, say, root=root)
        if v is not None:
            out.append(v)
    return out


class Voices:
    """Name → :class:`Voice`; the first given under a name wins (a cache speaker over a folder)."""

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
    """Cache speakers (from ``cache``), then the folders of ``folder``, then ``neutral``, each
    with its conditioning latents computed once (:func:`myxtts.speak.with_latents`)."""
    found = training_speakers(cache, cfg, say) if cache is not None else []
    if folder is not None:
        found += folder_voices(folder, cfg, say)
    found.append(neutral(cfg))
    return Voices([Voice(v.name, v.source, speak.with_latents(model, v.reference)) for v in found])
