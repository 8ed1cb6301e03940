"""Word and character error rates, with one normalisation, the sentence's language's, applied
to both sides.

A transcript and its reference are compared after the project's own text normaliser for their
language (``myxtts.text.normalize`` for English: numbers, times, money and abbreviations spelt
out, lowercase, so "10:05" and "ten oh five" match; :func:`myxtts.text.languages.normalize`
for any other: numbers in that language's words), then with punctuation removed: apostrophes
vanish ("don't" → "dont"), any other mark becomes a space. Before that, Arabic-script text is
folded to the one spelling a recogniser and a corpus may each write otherwise: Arabic yeh and
kaf as Persian's (ي ك → ی ک, as the Persian normaliser maps them anyway), short-vowel marks
(harakat, U+064B-U+0652) dropped, and the zero-width non-joiner read as the word boundary it is
heard as (a space: "کتاب‌ها" scores as "کتاب ها"). Rates are corpus-level: total edits over
total reference length, so a long sentence weighs more than a short one, as in the usual WER.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from myxtts.text import languages
from myxtts.text.normalize import normalize

_APOSTROPHES = re.compile(r"['\u2019]")
_NOT_WORD = re.compile(r"[^\w]+|_")
# Arabic script folded for scoring: the letter forms typed for Persian's, harakat (which
# Python's \w does not count as letters: left, they would split a word), the ZWNJ as a space.
ARABIC_SCRIPT_FOLD = str.maketrans({"\u064a": "\u06cc", "\u0643": "\u06a9", "\u200c": " ",
                                    **dict.fromkeys(map(chr, range(0x064B, 0x0653)))})


def normalize_for_scoring(text: str, language: str = "en-us") -> str:
    """Text as words for scoring: spelt-out numbers, lowercase, no punctuation, single spaces.
    English exactly as :func:`myxtts.text.normalize.normalize` reads it; any other language by
    its own normaliser, after the Arabic-script fold (the kashida its normaliser drops)."""
    if languages.language_of(language).name == "en":
        text = normalize(text)
    else:
        text = languages.normalize(text.translate(ARABIC_SCRIPT_FOLD), language)
    text = _APOSTROPHES.sub("", text)
    return " ".join(_NOT_WORD.sub(" ", text).split())


def edit_distance(ref: Sequence, hyp: Sequence) -> int:
    """Levenshtein distance (substitutions, deletions, insertions all cost 1)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


@dataclass
class ErrorRate:
    """Edits and reference length of one or many sentences; ``rate`` is their ratio."""

    edits: int = 0
    length: int = 0

    @property
    def rate(self) -> float | None:
        return self.edits / self.length if self.length else None

    def __add__(self, other: ErrorRate) -> ErrorRate:
        return ErrorRate(self.edits + other.edits, self.length + other.length)


def word_errors(ref: str, hyp: str, language: str = "en-us") -> ErrorRate:
    r, h = normalize_for_scoring(ref, language).split(), normalize_for_scoring(hyp, language).split()
    return ErrorRate(edit_distance(r, h), len(r))


def char_errors(ref: str, hyp: str, language: str = "en-us") -> ErrorRate:
    """Characters of the normalised text, spaces included (one space between words)."""
    r, h = normalize_for_scoring(ref, language), normalize_for_scoring(hyp, language)
    return ErrorRate(edit_distance(r, h), len(r))


def _each(language: str | Sequence[str], n: int) -> Sequence[str]:
    """One language for all ``n`` sentences, or one each."""
    return [language] * n if isinstance(language, str) else language


def wer(refs: Sequence[str], hyps: Sequence[str], language: str | Sequence[str] = "en-us") -> float | None:
    """Corpus word error rate (0 = perfect; above 1 when the hypotheses insert many words);
    ``language``: the sentences' language, or each sentence's."""
    return sum((word_errors(r, h, lang) for r, h, lang in zip(refs, hyps, _each(language, len(refs)), strict=True)),
               ErrorRate()).rate


def cer(refs: Sequence[str], hyps: Sequence[str], language: str | Sequence[str] = "en-us") -> float | None:
    """Corpus character error rate."""
    return sum((char_errors(r, h, lang) for r, h, lang in zip(refs, hyps, _each(language, len(refs)), strict=True)),
               ErrorRate()).rate
