"""Text front end: normalise, split into symbols (characters or phonemes), map to stable ids.

The vocabulary is built at prepare time from the corpus and stored with the cache; ids are the
position in a sorted symbol list after two reserved ids (0 = padding, 1 = end of sentence), so
the same corpus always yields the same ids. Symbols outside :data:`ALLOWED_PUNCT` that are not
letters are reported as unknown and dropped rather than learned as noise.
"""
from __future__ import annotations

import json
import shutil
import unicodedata
from collections import Counter

from myxtts.config import TextConfig
from myxtts.errors import UserError
from myxtts.text.normalize import normalize

PAD, EOS = "<pad>", "<eos>"
PAD_ID, EOS_ID = 0, 1
ALLOWED_PUNCT = set(" !'\"(),-.:;?")


class UnknownCharacterError(UserError):
    """Text holds symbols the model's vocabulary does not know."""


class PhonemizerMissing(UserError):
    pass


def _allowed(symbol: str) -> bool:
    return symbol in ALLOWED_PUNCT or unicodedata.category(symbol[0])[0] in ("L", "M")


class Vocabulary:
    def __init__(self, symbols: list[str]):
        if symbols[:2] != [PAD, EOS]:
            raise ValueError("a vocabulary starts with the padding and end-of-sentence symbols")
        self.symbols = list(symbols)
        self.index = {s: i for i, s in enumerate(self.symbols)}

    @classmethod
    def build(cls, symbol_counts: Counter) -> "Vocabulary":
        return cls([PAD, EOS] + sorted(s for s in symbol_counts if s not in (PAD, EOS)))

    def __len__(self) -> int:
        return len(self.symbols)

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocabulary) and self.symbols == other.symbols

    def to_json(self) -> str:
        return json.dumps(self.symbols, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "Vocabulary":
        return cls(json.loads(text))


class TextProcessor:
    """Normalised text → symbols → ids (with end-of-sentence appended)."""

    def __init__(self, cfg: TextConfig, vocab: Vocabulary | None = None):
        self.cfg, self.vocab = cfg, vocab
        self._phonemize = _phonemizer(cfg.language) if cfg.mode == "phonemes" else None

    def normalize(self, text: str) -> str:
        return normalize(text, lowercase=self.cfg.lowercase, expand_numbers=self.cfg.expand_numbers)

    def symbols(self, text: str) -> tuple[list[str], list[str]]:
        """Return (kept symbols, unknown symbols dropped) for one raw sentence."""
        norm = self.normalize(text)
        if self._phonemize is not None:
            norm = self._phonemize(norm)
        kept, unknown = [], []
        for ch in norm:
            (kept if _allowed(ch) else unknown).append(ch)
        # Dropping a symbol can leave doubled or edge spaces behind.
        return list(" ".join("".join(kept).split())), unknown

    def encode(self, text: str) -> list[int]:
        if self.vocab is None:
            raise RuntimeError("encode needs a vocabulary")
        syms, unknown = self.symbols(text)
        missing = sorted(set(unknown) | {s for s in syms if s not in self.vocab.index})
        if missing:
            raise UnknownCharacterError(
                f"text contains characters this model was not trained on: "
                f"{' '.join(repr(c) for c in missing)} in {text!r}")
        if not syms:
            raise UserError(f"text is empty after normalisation: {text!r}")
        return [self.vocab.index[s] for s in syms] + [EOS_ID]


def _phonemizer(language: str):
    """espeak-ng through phonemizer, or a clear error saying what to install."""
    try:
        from phonemizer.backend import EspeakBackend
    except ImportError:
        raise PhonemizerMissing("text.mode=phonemes needs the phonemizer package: "
                                "pip install 'myxtts[phonemes]'") from None
    if shutil.which("espeak-ng") is None and shutil.which("espeak") is None:
        raise PhonemizerMissing("text.mode=phonemes needs espeak-ng: apt-get install espeak-ng "
                                "(or brew install espeak-ng)")
    backend = EspeakBackend(language, preserve_punctuation=True, with_stress=True)
    return lambda text: backend.phonemize([text], strip=True)[0]
