"""A voice to speak in, by name: the one rule for each way a voice is given.

- **A folder of clips** (``serve --voices DIR``'s sub-folders, ``export --voice NAME=FOLDER``):
  every readable clip in name order, each conditioned as training audio is
  (:func:`myxtts.speak.reference_from_file`); their mels joined and cut to the reference length
  training used, and, for a model conditioned on GE2E embeddings, the mean of the clips'
  embeddings. A clip that cannot be used is skipped with a note; a folder with none is no voice.
- **A cache's speaker** (``serve --data``, ``export --data``): its first utterance, the training
  split's first (:meth:`myxtts.data.cache.Cache.first_of_each_speaker`). A voice the cache holds
  out whole is included, from its first held-out utterance, and its source says the model never
  heard it.
- **A voices folder** (``serve --voices DIR``): one voice per sub-folder, by the folder rule.
- **neutral**: no reference; the resampler's learned latents alone.

So the same folder is the same voice in ``serve``, ``synthesize`` and an export, and a loaded
run lists the same voices for each (:meth:`myxtts.infer.Synthesizer.voices`), one of which
``synthesize --voice NAME`` names (:func:`named`). A cache's speaker speaks, unless asked otherwise,
the language its clips were read in (:func:`default_language`).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import torch

from myxtts import speak
from myxtts.errors import UserError

NEUTRAL = "neutral"
CLIP_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3")
TRAINING_SPEAKER = "training speaker"
HELD_OUT_SPEAKER = "held-out speaker (never heard in training)"


@dataclass(frozen=True)
class Voice:
    name: str
    source: str  # where it came from, said in listings and logs
    reference: speak.Reference
    language: str | None = None  # what its clips were read in (a cache's speaker); None: not known


def inside(path: Path, root: Path) -> bool:
    """``path``, links resolved, lies within ``root`` (itself resolved)."""
    try:
        path.resolve().relative_to(root)
        return True
    except ValueError:
        return False


def clips(folder: Path, root: Path | None = None) -> list[Path]:
    """The sound files of ``folder`` in name order (only those inside ``root``, where given)."""
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in CLIP_SUFFIXES and p.is_file()
                  and (root is None or inside(p, root)))


def from_folder(name: str, folder: Path, cfg, say, source: str = "voices folder",
                root: Path | None = None) -> Voice | None:
    """The voice of a folder of clips (see the module docstring); None, said, where no clip is usable."""
    refs = []
    for clip in clips(folder, root):
        try:
            refs.append(speak.reference_from_file(clip, cfg))
        except UserError as e:
            say(f"note: {e}; clip skipped")
    if not refs:
        say(f"note: voice {name} skipped: no usable clip ({', '.join(CLIP_SUFFIXES)}) in {folder}")
        return None
    emb = speak.mean_embedding([r.embedding for r in refs if r.embedding is not None])
    return Voice(name, source, speak.reference_from_mel(torch.cat([r.mel for r in refs]), cfg, embedding=emb))


def folder_voices(folder: Path, cfg, say) -> list[Voice]:
    """A voices folder (``serve --voices DIR``): one voice per sub-folder holding readable clips,
    named by the sub-folder; only files inside ``folder`` are read (a link leading out of it is
    skipped, said), and the rest are skipped, saying why."""
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


def cache_voices(cache, cfg) -> list[Voice]:
    """Every speaker of a prepared cache, in the voice of its first utterance (see the module
    docstring), in speaker order."""
    heard = set(cache.voices("train"))
    return [Voice(cache.speakers[s], TRAINING_SPEAKER if cache.speakers[s] in heard else HELD_OUT_SPEAKER,
                  speak.reference_from_cache(cache, i, cfg), cache.language(i))
            for s, i in sorted(cache.first_of_each_speaker().items())]


def default_language(voice, languages: list[str]) -> str:
    """The language ``voice`` speaks when none is asked for: the one its clips were read in where
    the model speaks it (a Persian speaker of a model of English and Persian speaks Persian), else
    the model's own, the first of ``languages``."""
    own = getattr(voice, "language", None)
    return own if own in languages else languages[0]


def neutral(cfg) -> Voice:
    return Voice(NEUTRAL, "no reference", speak.neutral(cfg))


def named(voices: list[Voice], name: str) -> Voice:
    """The voice called ``name`` among ``voices``; where there is none, a :class:`UserError`
    listing their names, the closest to ``name`` first (a misspelt name's voice leads)."""
    for v in voices:
        if v.name == name:
            return v
    names = sorted((v.name for v in voices), key=lambda n: -difflib.SequenceMatcher(None, name, n).ratio())
    raise UserError(f"unknown voice {name!r}; the run's voices, closest first: {', '.join(names)}")
