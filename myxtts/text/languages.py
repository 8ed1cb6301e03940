"""Text read in its own language: the one registry of languages the text front end reads.

A language code is an espeak-ng voice code (``en-us``, ``fa``, ``de``); its first part names the
reader. English keeps its own normaliser (:mod:`myxtts.text.normalize`) exactly. Every other
language gets, in order:

- Unicode cleaned as for English, but keeping the format characters the language hears
  (Persian's zero-width non-joiner: espeak-ng reads "کتاب‌ها" with a boundary inside the word, stress
  on both parts, where "کتابها" is one word);
- its script's punctuation as the ASCII pause or tone it marks (``، ؛ ؟`` → ``, ; ?``, ``。、``
  → ``. ,``): espeak-ng drops ``،`` and ``؟`` unread, and the vocabulary keeps ASCII marks only;
- digits of any script (``۰-۹``, ``٠-٩``) as ASCII ones, so one number reader serves them all;
- numbers (and, for the languages with a module of their own, dates, times, money, ordinals,
  abbreviations) in the language's words: :mod:`myxtts.text.persian`, :mod:`myxtts.text.german`,
  and num2words' cardinals for any other language it knows (:mod:`myxtts.text.numbers`). Where
  num2words knows no words for the language, digits stay digits and espeak-ng reads them in its
  voice (phoneme mode only).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from myxtts.errors import UserError
from myxtts.text import german, persian
from myxtts.text.normalize import clean_unicode, expand_english
from myxtts.text.normalize import normalize as normalize_english
from myxtts.text.numbers import ascii_digits, cardinals, num2words_name
from myxtts.text.phonemes import espeak_voices

# Punctuation of other scripts as the ASCII mark of the same pause or tone. NFKC (run first)
# already maps the full-width forms ，？！：； to ASCII and ｡ ､ to 。、.
SCRIPT_PUNCT = {
    "\u060c": ",", "\u061b": ";", "\u061f": "?", "\u06d4": ".",  # Arabic script: ، ؛ ؟ ۔
    "\u066a": "%", "\u066b": ".", "\u066c": ",",  # Arabic percent, decimal and thousands signs
    "\u0640": None,  # the kashida only stretches a word on the page
    "\u3002": ".", "\u3001": ",",  # CJK full stop and enumeration comma: 。、
    "\u300c": '"', "\u300d": '"', "\u300e": '"', "\u300f": '"',  # CJK quotes 「」『』
}
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Language:
    """How one language's text is read before it becomes symbols or phonemes."""

    name: str  # the first part of the code: "fa" for "fa", "en" for "en-us"
    expand: Callable[[str], str] | None  # numbers etc. in words, on text with ASCII digits
    letters: dict = field(default_factory=dict)  # letter forms typed for the language's own
    keep: str = ""  # format characters (Unicode Cf) the language's reader hears

    @property
    def espeak_reads_digits(self) -> bool:
        """Digits are left for espeak-ng: no reader here knows the language's number words."""
        return self.expand is None and self.name != "en"


_REGISTRY = {
    "en": Language("en", expand_english),
    "fa": Language("fa", persian.expand, letters=persian.LETTERS, keep=persian.ZWNJ),
    "de": Language("de", german.expand),
}


@lru_cache(maxsize=64)
def language_of(code: str) -> Language:
    """The reader of language ``code``, or one line naming a code nobody here knows."""
    base = code.replace("_", "-").split("-")[0].lower()
    if base in _REGISTRY:
        return _REGISTRY[base]
    name = num2words_name(code)
    if name is not None:
        return Language(base, cardinals(name))
    if code in (espeak_voices() or ()):
        return Language(base, None)
    raise UserError(f"unknown language code {code!r}: neither espeak-ng nor the "
                    f"number reader knows it; give a code such as 'en-us', 'fa' or 'de'")


def normalize(text: str, language: str = "en-us", *, lowercase: bool = True,
              expand_numbers: bool = True) -> str:
    """``text`` as its language's reader says it, before symbols or phonemes are taken."""
    lang = language_of(language)
    if lang.name == "en":  # exactly the English normaliser, abbreviations, acronyms and all
        return normalize_english(text, lowercase=lowercase, expand_numbers=expand_numbers)
    text = clean_unicode(text, keep=lang.keep)
    text = text.translate(str.maketrans({**SCRIPT_PUNCT, **lang.letters}))
    if expand_numbers:
        text = ascii_digits(text)
        if lang.expand is not None:
            text = lang.expand(text)
    if lowercase:
        text = text.lower()
    return _SPACES.sub(" ", text).strip()
