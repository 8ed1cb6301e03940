"""Split normalised text into sentences short enough for the decoder to finish.

Synthesis speaks each sentence on its own and joins them with a short pause. An
autoregressive decoder is trained on single utterances of a few seconds and cut off at
``model.max_decoder_steps``, so for it a sentence longer than ``max_chars`` is split further:
at clause punctuation first, between words only where a clause alone is longer.
"""
from __future__ import annotations

import re

# A sentence ends at . ! ? (and any run of them), optionally followed by closing quotes or
# brackets, then whitespace.
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*(?=\s)")
_CLAUSE_END = re.compile(r"[,;:]+[\"')\]]*(?=\s)")


def _cut_after(text: str, pattern: re.Pattern, keep) -> list[str]:
    """Cut ``text`` after each match for which ``keep(text, match)`` holds."""
    parts, start = [], 0
    for m in pattern.finditer(text):
        if keep(text, m):
            parts.append(text[start:m.end()].strip())
            start = m.end()
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _real_sentence_end(text: str, m: re.Match) -> bool:
    # "j. smith", "u.s. army": a period after a lone letter is an initial, not a sentence end.
    word = text[:m.start()].rsplit(maxsplit=1)[-1] if text[:m.start()].strip() else ""
    return not (text[m.start()] == "." and re.fullmatch(r"(?:\w\.)*\w", word))


def _pack(pieces: list[str], max_chars: int) -> list[str]:
    """Join neighbouring pieces while the result stays within ``max_chars``; a piece with
    nothing to say (a lone dash) always joins its neighbour."""
    out: list[str] = []
    for piece in pieces:
        mute = not any(c.isalnum() for c in piece)
        if out and (mute or len(out[-1]) + 1 + len(piece) <= max_chars):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


def split_sentences(text: str, max_chars: int | None = None) -> list[str]:
    """Normalised text → its sentences, each at most ``max_chars`` characters where that can be
    done between words (a single longer word is kept whole); None: sentences are kept whole."""
    parts: list[str] = []
    for sentence in _cut_after(text.strip(), _SENTENCE_END, _real_sentence_end):
        if max_chars is None or len(sentence) <= max_chars:
            parts.append(sentence)
            continue
        clauses = _pack(_cut_after(sentence, _CLAUSE_END, lambda t, m: True), max_chars)
        for clause in clauses:
            parts += [clause] if len(clause) <= max_chars else _pack(clause.split(), max_chars)
    return parts
