"""Piper's phoneme ids for a MyXTTS vocabulary, and how much of what Piper says they cover.

Piper phonemizes with the espeak-ng inside its wheel into IPA, one Unicode codepoint (NFD) a
phoneme, punctuation kept, and looks each up in the voice's ``phoneme_id_map``. A MyXTTS model
in phoneme mode learned espeak-ng IPA codepoints too (:mod:`myxtts.text`), so most symbols map
to themselves. The rest are what another espeak-ng release or Piper's splitting emits that the
training text never held: those read as the model's nearest known symbol, by the rule synthesis
uses (:func:`myxtts.text.nearest_known`: an accented letter as its base, punctuation as a pause),
and a modifier letter (``ʲ``, newer espeak-ng's glide after ``i``) or a lone diacritic as
nothing, which is what the model heard where its own espeak-ng wrote none. Those read as
nothing get ids that the graph drops, as it drops Piper's pads.

Ids: ``_`` (pad) 0, ``^`` (BOS) 1, ``$`` (EOS) 2, as Piper's own voices have them, then the
model's symbols in vocabulary order, then the stand-ins.
"""
from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass, field

import torch

from myxtts.errors import UserError
from myxtts.text import EOS_ID, nearest_known

PAD_SYMBOL, BOS, EOS = "_", "^", "$"
DROPPED = -1  # the model token of an id the graph drops

# The IPA codepoints espeak-ng writes for its languages (its phoneme tables' output alphabet)
# and the punctuation Piper keeps: the symbols a map must be ready for beyond the model's own.
ESPEAK_IPA = (" !'(),-.:;?\"abcdefghijklmnopqrstuvwxyzæçðøħŋœǀǁǂǃɐɑɒɓɔɕɖɗɘəɚɛɜɞɟɠɡɢɣɤɥɦɧɨɪɫɬɭɮɯɰɱ"
              "ɲɳɴɵɶɸɹɺɻɽɾʀʁʂʃʄʈʉʊʋʌʍʎʏʐʑʒʔʕʘʙʛʜʝʟʡʢʲˈˌːˑ˞βθχᵻⱱ0123456789ʰˤʷɝʦ"
              "\u0303\u0327\u032a\u032f\u0329\u033a\u033b\u031d\u030a")


@dataclass
class PhonemeMap:
    """Piper phoneme → id, and each id's model token (``DROPPED``: read as nothing)."""

    ids: dict[str, int]
    tokens: list[int]  # by Piper id
    read_as: dict[str, str] = field(default_factory=dict)  # stand-ins: Piper phoneme → model symbol ("": nothing)

    @property
    def num_symbols(self) -> int:
        return len(self.tokens)

    def table(self) -> torch.Tensor:
        """(num_symbols,) long: Piper id → model token id, DROPPED for pads, BOS and silent ids."""
        return torch.tensor(self.tokens, dtype=torch.long)

    def piper_json(self) -> dict[str, list[int]]:
        return {p: [i] for p, i in self.ids.items()}

    def ids_of_tokens(self, tokens: list[int]) -> list[int]:
        """Model token ids (end of sentence last, as :meth:`TextProcessor.encode` gives them) →
        the Piper ids Piper would feed for the same phonemes."""
        first = {}
        for i, t in enumerate(self.tokens):
            first.setdefault(t, i)
        pad = self.ids[PAD_SYMBOL]
        return [self.ids[BOS], pad] + [x for t in tokens[:-1] for x in (first[t], pad)] + [self.ids[EOS]]

    def to_ids(self, phonemes: list[str]) -> list[int]:
        """Piper's own rule (``phonemes_to_ids``): BOS, pad, each known phoneme and a pad, EOS."""
        out = [self.ids[BOS], self.ids[PAD_SYMBOL]]
        for p in phonemes:
            if p in self.ids:
                out += [self.ids[p], self.ids[PAD_SYMBOL]]
        return out + [self.ids[EOS]]


def _stand_in(symbol: str, known) -> str | None:
    """A modifier or diacritic the model lacks reads as nothing (``ʰ`` is no ``h``), before
    nearest_known, whose compatibility decomposition would read it as a letter."""
    if unicodedata.category(symbol) in ("Lm", "Sk", "Mn"):
        return ""
    return nearest_known(symbol, known)


def build(symbols: list[str]) -> PhonemeMap:
    """The map for a phoneme-mode vocabulary (``symbols``: ids are positions, PAD and EOS first)."""
    clash = sorted({PAD_SYMBOL, BOS, EOS} & set(symbols))
    if clash:
        raise UserError(f"the model's vocabulary holds {', '.join(map(repr, clash))}, which Piper "
                        "reserves for its pad, start and end; it cannot be written as a Piper voice")
    ids = {PAD_SYMBOL: 0, BOS: 1, EOS: 2}
    tokens = [DROPPED, DROPPED, EOS_ID]
    for token, s in enumerate(symbols):
        if token > EOS_ID:
            ids[s] = len(tokens)
            tokens.append(token)
    known = set(symbols[EOS_ID + 1:])
    index = {s: i for i, s in enumerate(symbols)}
    read_as = {}
    for p in dict.fromkeys(ESPEAK_IPA):
        if p in ids:
            continue
        sub = _stand_in(p, known)
        if sub is None or len(sub) > 1:
            continue
        read_as[p] = sub
        ids[p] = len(tokens)
        tokens.append(index[sub] if sub else DROPPED)
    return PhonemeMap(ids, tokens, read_as)


@dataclass
class Coverage:
    """The share of the phonemes Piper emits for some texts that the map holds."""

    phonemizer: str  # whose espeak-ng phonemized the texts
    total: int
    missing: Counter  # phoneme → times Piper emitted it and the map lacks it
    read_as: Counter  # phoneme → times it was read as a stand-in

    @property
    def share(self) -> float:
        return 1.0 - sum(self.missing.values()) / self.total if self.total else 1.0

    def line(self) -> str:
        text = (f"phoneme map coverage: {100 * self.share:.1f} % of {self.total} phonemes "
                f"({self.phonemizer})")
        if self.missing:
            text += "; missing " + " ".join(f"{p!r}x{n}" for p, n in self.missing.most_common())
        if self.read_as:
            text += "; read as stand-ins " + " ".join(f"{p!r}x{n}" for p, n in self.read_as.most_common())
        return text


def piper_phonemizer(language: str):
    """Piper's own phonemizer (its espeak-ng, its clause splitting) where piper-tts is installed
    beside MyXTTS, else None. Not a dependency: only read to measure what a Piper user gets."""
    try:
        from piper.phonemize_espeak import EspeakPhonemizer
    except ImportError:
        return None
    ph = EspeakPhonemizer()
    return lambda text: [p for sentence in ph.phonemize(language, text) for p in sentence]


def coverage(pmap: PhonemeMap, texts: list[str], text_processor) -> Coverage:
    """What the map covers of the phonemes Piper emits for ``texts`` (normalised first, as Piper's
    users would type digits and abbreviations out). Where piper-tts is not installed, MyXTTS's
    own espeak-ng stands in for Piper's, split into codepoints as Piper splits."""
    phonemize = piper_phonemizer(text_processor.cfg.language)
    who = "Piper's espeak-ng"
    if phonemize is None:
        who = "MyXTTS's espeak-ng; install piper-tts to measure with Piper's"
        phonemize = lambda text: list(unicodedata.normalize("NFD", "".join(text_processor.symbols(text)[0])))
    total, missing, read_as = 0, Counter(), Counter()
    for t in texts:
        for p in phonemize(text_processor.normalize(t)):
            total += 1
            if p not in pmap.ids:
                missing[p] += 1
            elif p in pmap.read_as:
                read_as[p] += 1
    return Coverage(who, total, missing, read_as)

