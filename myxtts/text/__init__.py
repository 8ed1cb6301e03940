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
import shutil
import unicodedata
from collections import Counter
from collections.abc import Callable

from myxtts.config import TextConfig
from myxtts.errors import UserError
from myxtts.text.normalize import normalize

PAD, EOS = "<pad>", "<eos>"
PAD_ID, EOS_ID = 0, 1
ALLOWED_PUNCT = set(" !'\"(),-.:;?")
ECHO_CHARS = 80  # user text quoted back in messages is cut to about this many characters
# Punctuation the vocabulary lacks becomes a pause it knows, best match first.
_FULL_STOPS = set(".!?\u2026")
_SHORT_PAUSES = set(",:;")


class UnknownCharacterError(UserError):
    """Text holds symbols the model's vocabulary does not know."""


class PhonemizerMissing(UserError):
    pass


def _allowed(symbol: str) -> bool:
    return symbol in ALLOWED_PUNCT or unicodedata.category(symbol[0])[0] in ("L", "M")


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
    """Normalised text → symbols → ids (with end-of-sentence appended)."""

    def __init__(self, cfg: TextConfig, vocab: Vocabulary | None = None):
        self.cfg, self.vocab = cfg, vocab
        self._phonemize = _phonemizer(cfg.language) if cfg.mode == "phonemes" else None

    def language(self, language: str | None = None) -> str:
        """The language text is read in: ``language`` where given, which must be the one the
        model was trained on (``text.language``, the only one a run has today)."""
        if language is not None and language != self.cfg.language:
            raise UserError(f"language {language}: this model reads {self.cfg.language} only")
        return self.cfg.language

    def normalize(self, text: str, language: str | None = None) -> str:
        self.language(language)
        return normalize(text, lowercase=self.cfg.lowercase, expand_numbers=self.cfg.expand_numbers)

    def _raw_symbols(self, text: str, normalized: bool = False) -> tuple[str, list[str]]:
        """(normalised text or its phonemes, symbols dropped before phonemizing). Symbols that
        are neither letters nor known punctuation never reach espeak-ng, which would read an
        emoji or a sign out by its name ("grinning face"). ``normalized``: ``text`` went
        through :meth:`normalize` already."""
        norm = text if normalized else self.normalize(text)
        if self._phonemize is None:
            return norm, []
        return (self._phonemize("".join(ch for ch in norm if _allowed(ch))),
                [ch for ch in norm if not _allowed(ch)])

    def symbols(self, text: str, normalized: bool = False) -> tuple[list[str], list[str]]:
        """Return (kept symbols, unknown symbols dropped) for one raw sentence."""
        raw, unknown = self._raw_symbols(text, normalized)
        kept = []
        for ch in raw:
            (kept if _allowed(ch) else unknown).append(ch)
        # Dropping a symbol can leave doubled or edge spaces behind.
        return list(" ".join("".join(kept).split())), unknown

    def encode(self, text: str, warn: Callable[[str], None] | None = None,
               normalized: bool = False, language: str | None = None) -> list[int]:
        """Ids of one sentence, end-of-sentence appended (``normalized``: as in :meth:`symbols`;
        ``language``: as in :meth:`language`).

        With ``warn`` (a callable taking a message), symbols the vocabulary lacks are read as
        their nearest known symbol and reported through it; letters with no known stand-in are
        still an error. Without it, any unknown symbol is an error.
        """
        if self.vocab is None:
            raise RuntimeError("encode needs a vocabulary")
        self.language(language)
        known = self.vocab.index
        if warn is None:
            syms, unknown = self.symbols(text, normalized)
            missing = sorted(set(unknown) | {s for s in syms if s not in known})
            read_as = {}
        else:
            syms, read_as, missing = substitute(self._raw_symbols(text, normalized)[0], known)
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


def phonemes_missing(language: str = "en-us") -> str | None:
    """Why ``text.mode=phonemes`` cannot run on this machine (what to install), or None."""
    try:
        _phonemizer(language)
    except PhonemizerMissing as e:
        return str(e)
    return None


def _phonemizer(language: str):
    """espeak-ng through phonemizer, or a clear error saying what to install."""
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
    backend = EspeakBackend(language, preserve_punctuation=True, with_stress=True)
    # phonemizer returns no line at all for an empty one
    return lambda text: backend.phonemize([text], strip=True)[0] if text.strip() else ""
