"""espeak-ng through phonemizer: one reader per language, and which languages it has a voice for.

espeak-ng marks a word it reads in another language with flags in the phoneme stream, ``(en)``
before it and ``(fa)`` after. Those letters and brackets are no sounds, and a model trained on
them learns them as such, so the flags are removed (``language_switch='remove-flags'``); what
stays between them is the word phonemised by espeak-ng in the language it took the word for
(an English word in Persian text reads in English phonemes), which is what a speaker of both says.
"""
from __future__ import annotations

import difflib
import re
import shutil
from collections.abc import Callable
from functools import lru_cache

from myxtts.errors import UserError

_DIGITS = re.compile(r"[0-9]")


class PhonemizerMissing(UserError):
    pass


class UnsupportedLanguage(UserError):
    """espeak-ng has no voice for the language asked for."""


def _load_espeak():
    """The phonemizer's espeak-ng backend class, pointed at the espeak-ng the wheel ships, or a
    clear error saying what to install."""
    try:
        from phonemizer.backend import EspeakBackend
        from phonemizer.backend.espeak.wrapper import EspeakWrapper
    except ImportError:
        raise PhonemizerMissing("text.mode=phonemes (the default) needs espeak-ng: "
                                "pip install 'myxtts[phonemes]' (GPL-3.0), or set "
                                "text.mode=characters") from None
    try:  # the espeak-ng library and data shipped in a wheel, so no system package is needed
        import espeakng_loader
        EspeakWrapper.set_library(espeakng_loader.get_library_path())
        EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
    except ImportError:
        espeakng_loader = None
    if espeakng_loader is None and shutil.which("espeak-ng") is None and shutil.which("espeak") is None:
        raise PhonemizerMissing("text.mode=phonemes (the default) needs espeak-ng: "
                                "pip install 'myxtts[phonemes]' (GPL-3.0) or apt-get install "
                                "espeak-ng, or set text.mode=characters")
    return EspeakBackend


@lru_cache(maxsize=1)
def espeak_voices() -> frozenset[str] | None:
    """The language codes espeak-ng has a voice for, or None where it is not installed."""
    try:
        return frozenset(_load_espeak().supported_languages())
    except PhonemizerMissing:
        return None


def phonemizer(language: str) -> Callable[[str], str]:
    """Text → its phonemes in ``language`` (an espeak-ng voice code), language-switch flags
    removed; one clear line where espeak-ng is missing or has no voice for the language."""
    backend_class = _load_espeak()
    voices = espeak_voices() or frozenset()
    if language not in voices:
        near = ([v for v in sorted(voices) if v.startswith(language.lower() + "-")][:3]
                or difflib.get_close_matches(language, sorted(voices), n=3))  # fr: fr-fr
        hint = f" (close: {', '.join(near)})" if near else ""
        raise UnsupportedLanguage(
            f"espeak-ng has no voice for language {language!r}{hint}: "
            f"set text.mode=characters to read it letter by letter")
    backend = backend_class(language, preserve_punctuation=True, with_stress=True,
                            language_switch="remove-flags")
    # phonemizer returns no line at all for an empty one. A digit in its output is the tail of
    # an espeak-ng phoneme name with no IPA of its own (Persian's "q1" for ق), not a sound.
    return lambda text: _DIGITS.sub("", backend.phonemize([text], strip=True)[0]) if text.strip() else ""


def phonemes_missing() -> str | None:
    """Why ``text.mode=phonemes`` cannot run on this machine (what to install), or None."""
    try:
        _load_espeak()
    except PhonemizerMissing as e:
        return str(e)
    return None
