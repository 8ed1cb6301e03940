"""Word and character error rates, with one normalisation applied to both sides.

A transcript and its reference are compared after the project's own text normaliser
(``myxtts.text.normalize``: numbers, times, money and abbreviations spelt out, lowercase), so
"10:05" and "ten oh five" match, then with punctuation removed: apostrophes vanish ("don't" →
"dont"), any other mark becomes a space. Rates are corpus-level: total edits over total
reference length, so a long sentence weighs more than a short one, as in the usual WER.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from myxtts.text.normalize import normalize

_APOSTROPHES = re.compile(r"['\u2019]")
_NOT_WORD = re.compile(r"[^\w]+|_")


def normalize_for_scoring(text: str) -> str:
    """Text as words for scoring: spelt-out numbers, lowercase, no punctuation, single spaces."""
    text = normalize(text)
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


def word_errors(ref: str, hyp: str) -> ErrorRate:
    r, h = normalize_for_scoring(ref).split(), normalize_for_scoring(hyp).split()
    return ErrorRate(edit_distance(r, h), len(r))


def char_errors(ref: str, hyp: str) -> ErrorRate:
    """Characters of the normalised text, spaces included (one space between words)."""
    r, h = normalize_for_scoring(ref), normalize_for_scoring(hyp)
    return ErrorRate(edit_distance(r, h), len(r))


def wer(refs: Sequence[str], hyps: Sequence[str]) -> float | None:
    """Corpus word error rate (0 = perfect; above 1 when the hypotheses insert many words)."""
    return sum((word_errors(r, h) for r, h in zip(refs, hyps, strict=True)), ErrorRate()).rate


def cer(refs: Sequence[str], hyps: Sequence[str]) -> float | None:
    """Corpus character error rate."""
    return sum((char_errors(r, h) for r, h in zip(refs, hyps, strict=True)), ErrorRate()).rate
