"""Prepare's text pass: each utterance's symbols, read in its own language, and the cache's
vocabulary.

An utterance's language is the one its row names (:mod:`myxtts.data.manifest`), else the
corpus's: ``prepare --language``, which is the cache's ``text.language``. A code nobody here
knows, or one espeak-ng has no voice for in phoneme mode, skips that utterance with the one
line :mod:`myxtts.text.languages` gives; the rest of the corpus goes on.

All text is read before any audio: the vocabulary must exist before a shard stores token ids.
Without a trained model to match, it is the corpus's symbols, sorted (:meth:`Vocabulary.build`).
With one (``prepare --match``, to fine-tune it on this corpus, :class:`Match`), the model's
symbols keep their ids, and what an utterance does with a symbol the model lacks depends on its
language:

- in a language the model learnt (the first part of its ``text.language``: ``en-gb`` for an
  ``en-us`` model), it is read as its nearest known symbol, as synthesis would read it, and an
  utterance with a letter that has none is skipped: a new voice keeps the meaning of the
  symbols the model knows;
- in another language, it is kept: the symbols the model lacks are appended after its ids
  (sorted), and ``train --init-from`` grows the model's embedding table for them
  (:func:`myxtts.train.finetune.load`).
"""
from __future__ import annotations

import dataclasses
from collections import Counter

from myxtts.data.manifest import Problem, Utterance
from myxtts.errors import UserError
from myxtts.text import TextProcessor, Vocabulary, substitute
from myxtts.text.languages import language_of

SHOWN = 20  # appended symbols named in the report's note


@dataclasses.dataclass(frozen=True)
class Match:
    """A trained model's vocabulary and the language it learnt it in (its ``text.language``)."""

    vocab: Vocabulary
    language: str

    def knows(self, language: str) -> bool:
        """Text in ``language`` reads in the model's symbols (the same language, any accent)."""
        return language_of(language).name == language_of(self.language).name

    def record(self) -> dict:
        """What a cache's recipe keeps of it: the cache's vocabulary begins with the model's
        ``symbols``, and the language it learnt them in (``cache verify --fix`` prepares again with it)."""
        return {"symbols": len(self.vocab), "language": self.language}

    @classmethod
    def of_recipe(cls, recipe: dict, cache) -> Match | None:
        """The match a cache was prepared with, from its recipe's vocabulary and :meth:`record`;
        None for a plain cache. A recipe written before the match was recorded has none; its
        vocabulary then tells: a plain one is sorted (:meth:`Vocabulary.build`), a matched one
        cannot be rebuilt (UserError)."""
        if recipe.get("match"):
            return cls(Vocabulary(recipe["vocab"][:recipe["match"]["symbols"]]), recipe["match"]["language"])
        rest = recipe.get("vocab", [])[2:]  # after padding and end of sentence
        if "match" not in recipe and rest != sorted(rest):
            raise UserError(f"{cache}: prepared with `myxtts prepare --match` before caches recorded "
                            "the matched model, so it cannot be prepared again with its vocabulary; "
                            "run that prepare command again into a new --out")
        return None


def text_pass(utts: list[Utterance], tp: TextProcessor, match: Match | None = None):
    """→ (kept [(utterance with its language set, symbols)], problems, unknown characters
    dropped, vocabulary)."""
    kept, problems, unknown = [], [], Counter()
    for u in utts:
        language = u.language or tp.cfg.language
        try:
            syms, bad = tp.symbols(u.text, language=language)
        except UserError as e:  # a code nobody knows, or no espeak-ng voice for it
            problems.append(Problem(u.id, str(e)))
            continue
        unknown.update(bad)
        if not syms:
            why = "empty text" if not u.text.strip() else \
                f"no usable characters in text (unknown: {''.join(sorted(set(bad)))!r})"
            problems.append(Problem(u.id, why))
            continue
        if match is not None and match.knows(language):
            syms = _read_as_known(u, syms, match.vocab, problems)
            if syms is None:
                continue
        kept.append((dataclasses.replace(u, language=language), syms))
    return kept, problems, unknown, _vocabulary(kept, match, problems)


def _read_as_known(u: Utterance, syms: list[str], vocab: Vocabulary, problems: list[Problem]):
    """``syms`` with each symbol ``vocab`` lacks read as its nearest known one; None (and a
    problem) where a letter has none."""
    syms, read_as, missing = substitute("".join(syms), vocab.index)
    if missing or not syms:
        problems.append(Problem(u.id, "symbols the matched model's vocabulary lacks: "
                                + " ".join(repr(c) for c in missing or read_as)))
        return None
    if read_as:
        problems.append(Problem(u.id, "not in the matched model's vocabulary, so read "
                                + ", ".join(f"{c!r} as {r!r}" for c, r in read_as.items()),
                                kept=True))
    return syms


def _vocabulary(kept: list, match: Match | None, problems: list[Problem]) -> Vocabulary:
    counts = Counter(s for _, syms in kept for s in syms)
    if match is None:
        return Vocabulary.build(counts)
    new = sorted(s for s in counts if s not in match.vocab.index)
    if new:
        more = f" and {len(new) - SHOWN} more" if len(new) > SHOWN else ""
        langs = ", ".join(sorted({u.language for u, _ in kept if not match.knows(u.language)}))
        problems.append(Problem("vocabulary", f"{len(new)} symbol(s) of {langs} the matched model "
                                f"lacks, appended after its {len(match.vocab)}: "
                                + " ".join(repr(s) for s in new[:SHOWN]) + more, kept=True))
    return Vocabulary(match.vocab.symbols + new)
