"""Text front end: normalise, split into symbols (characters or phonemes), map to stable ids.

The vocabulary is built at prepare time from the corpus and stored with the cache; ids are the
position in a sorted symbol list after two reserved ids (0 = padding, 1 = end of sentence), so
the same corpus always yields the same ids. Symbols outside :data:`ALLOWED_PUNCT` that are not
letters are reported as unknown and dropped rather than learned as noise.

At synthesis time a symbol the vocabulary lacks can be read as its nearest known one (see
:func:`nearest_known`) with a warning; only letters with no known base letter stay an error.
"""
from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Callable

from myxtts.config import TextConfig
from myxtts.errors import UserError
from myxtts.text.languages import language_of, normalize
from myxtts.text.persian import ZWNJ
from myxtts.text.phonemes import PhonemizerMissing, phonemes_missing, phonemizer  # noqa: F401

PAD, EOS = "<pad>", "<eos>"
PAD_ID, EOS_ID = 0, 1
ALLOWED_PUNCT = set(" !'\"(),-.:;?")
ECHO_CHARS = 80  # user text quoted back in messages is cut to about this many characters
# Punctuation the vocabulary lacks becomes a pause it knows, best match first.
_FULL_STOPS = set(".!?\u2026")
_SHORT_PAUSES = set(",:;")


class UnknownCharacterError(UserError):
    """Text holds symbols the model's vocabulary does not know."""


def _allowed(symbol: str) -> bool:
    # The zero-width non-joiner is a boundary inside a Persian word that espeak-ng hears, so in
    # character mode it is a symbol of its own.
    return (symbol in ALLOWED_PUNCT or symbol == ZWNJ
            or unicodedata.category(symbol[0])[0] in ("L", "M"))


def echo(text: str, limit: int = ECHO_CHARS) -> str:
    """User text as quoted back in a message: repr, cut to about ``limit`` characters."""
    return repr(text if len(text) <= limit else text[:limit - 3].rstrip() + "...")


def nearest_known(symbol: str, known) -> str | None:
    """The symbol to read in place of one the vocabulary lacks, or None if there is none.

    Punctuation becomes a pause the model knows (a full stop for ``!?``, a comma for ``:;``,
    dashes and brackets; a space for quotes and other signs; an apostrophe is dropped), an
    accented letter its base letter (``é`` → ``e``, by Unicode decomposition) when that is known.
    The result may be "" (read as nothing). Letters with no known base give None.
    """
    cat = unicodedata.category(symbol)
    if cat[0] == "M":  # a stray combining accent: the letter it sits on is read plain
        return ""
    if cat[0] in ("L", "N"):
        base = "".join(c for c in unicodedata.normalize("NFKD", symbol)
                       if not unicodedata.combining(c))
        return base if base and base != symbol and all(c in known for c in base) else None
    if symbol in "'\u2019":
        return ""
    if symbol in _FULL_STOPS:
        choices = (".", ",", " ")
    elif symbol in _SHORT_PAUSES or cat in ("Pd", "Ps", "Pe"):
        choices = (",", ".", " ")
    else:  # quotes, symbols, separators, emoji: a word break
        choices = (" ",)
    return next((c for c in choices if c in known), "")


class Vocabulary:
    def __init__(self, symbols: list[str]):
        if symbols[:2] != [PAD, EOS]:
            raise ValueError("a vocabulary starts with the padding and end-of-sentence symbols")
        self.symbols = list(symbols)
        self.index = {s: i for i, s in enumerate(self.symbols)}

    @classmethod
    def build(cls, symbol_counts: Counter) -> Vocabulary:
        return cls([PAD, EOS] + sorted(s for s in symbol_counts if s not in (PAD, EOS)))

    def __len__(self) -> int:
        return len(self.symbols)

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocabulary) and self.symbols == other.symbols

    def to_json(self) -> str:
        return json.dumps(self.symbols, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Vocabulary:
        return cls(json.loads(text))


class TextProcessor:
    """Normalised text → symbols → ids (with end-of-sentence appended).

    Each call may name the language of its text (``language``, an espeak-ng code such as
    ``"fa"``); by default it is ``text.language``. Which languages a model speaks is its
    :attr:`myxtts.infer.Synthesizer.languages`.
    """

    def __init__(self, cfg: TextConfig, vocab: Vocabulary | None = None):
        self.cfg, self.vocab = cfg, vocab
        self._phonemizers: dict[str, Callable[[str], str]] = {}
        language_of(cfg.language)  # an unknown code is one line now, not at the first sentence
        if cfg.mode == "phonemes":
            self._phonemizer(cfg.language)

    def _phonemizer(self, language: str) -> Callable[[str], str]:
        if language not in self._phonemizers:
            self._phonemizers[language] = phonemizer(language)
        return self._phonemizers[language]

    def normalize(self, text: str, language: str | None = None) -> str:
        return normalize(text, language or self.cfg.language, lowercase=self.cfg.lowercase,
                         expand_numbers=self.cfg.expand_numbers)

    def _raw_symbols(self, text: str, normalized: bool = False,
                     language: str | None = None) -> tuple[str, list[str]]:
        """(normalised text or its phonemes, symbols dropped before phonemizing). Symbols that
        are neither letters nor known punctuation never reach espeak-ng, which would read an
        emoji or a sign out by its name ("grinning face"); digits do where no reader here
        knows the language's number words. ``normalized``: ``text`` went through
        :meth:`normalize` already."""
        language = language or self.cfg.language
        norm = text if normalized else self.normalize(text, language)
        if self.cfg.mode != "phonemes":
            return norm, []
        said = _allowed
        if language_of(language).espeak_reads_digits:
            said = lambda ch: _allowed(ch) or ch in "0123456789"  # noqa: E731
        return (self._phonemizer(language)("".join(ch for ch in norm if said(ch))),
                [ch for ch in norm if not said(ch)])

    def symbols(self, text: str, normalized: bool = False,
                language: str | None = None) -> tuple[list[str], list[str]]:
        """Return (kept symbols, unknown symbols dropped) for one raw sentence."""
        raw, unknown = self._raw_symbols(text, normalized, language)
        kept = []
        for ch in raw:
            (kept if _allowed(ch) else unknown).append(ch)
        # Dropping a symbol can leave doubled or edge spaces behind.
        return list(" ".join("".join(kept).split())), unknown

    def encode(self, text: str, warn: Callable[[str], None] | None = None,
               normalized: bool = False, language: str | None = None) -> list[int]:
        """Ids of one sentence, end-of-sentence appended (``normalized``: as in :meth:`symbols`;
        ``language``: as in :meth:`symbols`).

        With ``warn`` (a callable taking a message), symbols the vocabulary lacks are read as
        their nearest known symbol and reported through it; letters with no known stand-in are
        still an error. Without it, any unknown symbol is an error.
        """
        if self.vocab is None:
            raise RuntimeError("encode needs a vocabulary")
        known = self.vocab.index
        if warn is None:
            syms, unknown = self.symbols(text, normalized, language)
            missing = sorted(set(unknown) | {s for s in syms if s not in known})
            read_as = {}
        else:
            syms, read_as, missing = substitute(self._raw_symbols(text, normalized, language)[0],
                                                known)
        if missing:
            raise UnknownCharacterError(
                f"text contains characters this model was not trained on: "
                f"{' '.join(repr(c) for c in missing)} in {echo(text)}")
        if not syms:
            raise UserError(f"text is empty after normalisation: {echo(text)}")
        if read_as:
            swaps = ", ".join(f"{c!r} as {r!r}" if r else f"{c!r} as nothing"
                              for c, r in read_as.items())
            warn(f"warning: not in the training text, so read {swaps} in {echo(text)}")
        return [known[s] for s in syms] + [EOS_ID]


def substitute(raw: str, known) -> tuple[list[str], dict, list[str]]:
    """Swap unknown symbols for their nearest known ones → (symbols, {swapped: stand-in},
    symbols with no stand-in)."""
    out, read_as, missing = [], {}, []
    pause_at_end = False  # the text so far ends in a pause we put there
    for ch in raw:
        if ch in known:
            out.append(ch)
            pause_at_end = pause_at_end and ch == " "
            continue
        sub = nearest_known(ch, known)
        if sub is None:
            missing.append(ch)
            continue
        read_as[ch] = sub
        if sub not in (",", "."):
            out.append(sub)
            continue
        while out and out[-1] == " ":
            out.pop()  # "a - b" reads "a, b"
        if out and out[-1] not in ",.!?;:":  # one pause is enough, and none before the first word
            out.append(sub)
            pause_at_end = sub == ","
        out.append(" ")
    text = " ".join("".join(out).split())
    if pause_at_end:  # "(as she said)" does not end on a comma
        text = text.rstrip(" ,")
    return list(text), read_as, sorted(set(missing))
