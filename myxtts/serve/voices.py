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

import dataclasses
from pathlib import Path

from myxtts import speak
from myxtts.serve.schemas import VoiceInfo
from myxtts.voice import CLIP_SUFFIXES, NEUTRAL, Voice

__all__ = ["CLIP_SUFFIXES", "NEUTRAL", "Voice", "Voices", "load_voices"]


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

    def listing(self, hop_seconds: float) -> list[VoiceInfo]:
        return [VoiceInfo.of(v, hop_seconds) for v in self.by_name.values()]


def load_voices(synth, data: Path | None, folder: Path | None) -> Voices:
    """The voices of the run ``synth`` (:meth:`myxtts.infer.Synthesizer.voices`: cache speakers,
    the folders of ``folder``, ``neutral``), each with its conditioning latents computed once
    (:func:`myxtts.speak.with_latents`)."""
    return Voices([dataclasses.replace(v, reference=speak.with_latents(synth.model, v.reference))
                   for v in synth.voices(data, folder)])
