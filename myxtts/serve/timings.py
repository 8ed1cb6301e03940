"""When each word is spoken, from the alignment the model made the audio with.

``speak`` returns each sentence's alignment at the decoder's step rate (``attn`` (S, Tt), one row
per ``r`` frames): for the duration decoder it is the predicted durations themselves, one token
per step; for the autoregressive one, its attention, read through a running maximum so time
never goes back. A token starts at the first step that reaches it; a word is the tokens between
two spaces, and runs from its first token's start to the start of the token after its last.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Word:
    word: str
    start: float  # seconds from the start of the request's audio
    end: float

    def to_dict(self) -> dict:
        return {"word": self.word, "start": round(self.start, 3), "end": round(self.end, 3)}


def token_starts(attn: np.ndarray, n_frames: int, r: int) -> np.ndarray:
    """attn (S, Tt) → (Tt + 1,) the frame each token starts at, then ``n_frames``."""
    s, tt = attn.shape
    at = np.maximum.accumulate(attn.argmax(axis=1)) if s else np.zeros(0, dtype=np.int64)  # (S,)
    # first step whose token is at least k, for every k; a token never reached starts at the end
    first = np.searchsorted(at, np.arange(tt), side="left")  # (Tt,)
    starts = np.minimum(first * r, n_frames)
    return np.append(starts, n_frames)


def words(sentence: str, symbols: list[str], attn: np.ndarray, n_frames: int, r: int,
          frame_seconds: float, offset: float = 0.0) -> list[Word]:
    """The words of one spoken sentence with their times. ``symbols`` are the tokens read (ids
    mapped back, end of sentence included). A word is named from ``sentence`` when it splits
    into as many words as the tokens do (characters always; phonemes nearly always), else by its
    symbols."""
    starts = token_starts(attn, n_frames, r)
    groups, cur = [], []
    for k, sym in enumerate(symbols):
        if sym == " ":
            if cur:
                groups.append(cur)
            cur = []
        elif sym.isalpha():  # punctuation (a pause) and <eos> belong to no word
            cur.append(k)
    if cur:
        groups.append(cur)
    names = [w for w in sentence.split() if any(c.isalnum() for c in w)]
    if len(names) != len(groups):
        names = ["".join(symbols[k] for k in g) for g in groups]
    out = []
    for name, g in zip(names, groups):
        a, b = starts[g[0]], starts[g[-1] + 1]
        out.append(Word(name.strip(".,;:!?\"'()"), offset + a * frame_seconds, offset + max(a, b) * frame_seconds))
    return out
