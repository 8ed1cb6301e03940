"""English text normalisation: Unicode, abbreviations, numbers, currency, ordinals, years.

Runs once per utterance at prepare time, and on every sentence at synthesis time, so training and
inference see text shaped the same way.
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_PUNCT_MAP = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "`": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"',
    "\u2013": "-", "\u2014": " - ", "\u2015": " - ", "\u2212": "-",
    "\u2026": "...", "\u00a0": " ", "\t": " ",
})

# Only unambiguous titles and units: "St." could be saint or street, so it is left alone.
_ABBREVIATIONS = [(re.compile(rf"\b{a}\.", re.IGNORECASE), full) for a, full in [
    ("mrs", "missus"), ("mr", "mister"), ("dr", "doctor"), ("ms", "miss"), ("prof", "professor"),
    ("jr", "junior"), ("sr", "senior"), ("gen", "general"), ("capt", "captain"), ("lt", "lieutenant"),
    ("col", "colonel"), ("sgt", "sergeant"), ("rev", "reverend"), ("hon", "honorable"),
    ("co", "company"), ("ltd", "limited"), ("vs", "versus"), ("etc", "et cetera"), ("no", "number"),
]]

_CURRENCY = re.compile(r"([$\u00a3\u20ac])\s?(\d[\d,]*)(?:\.(\d{1,2}))?")
_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b", re.IGNORECASE)
_DECIMAL = re.compile(r"\b(\d+)\.(\d+)\b")
_PERCENT = re.compile(r"(\d)\s?%")
_NUMBER = re.compile(r"\b\d[\d,]*\b")
_SPACES = re.compile(r"\s+")
_CURRENCY_NAMES = {"$": ("dollar", "cent"), "\u00a3": ("pound", "penny"), "\u20ac": ("euro", "cent")}


@lru_cache(maxsize=1)
def _engine():
    import inflect  # imported lazily: it takes ~0.3 s and only the English path needs it

    return inflect.engine()


def _words(n: int) -> str:
    return _engine().number_to_words(n, andword="").replace(",", "").replace("-", " ")


def _number(match: re.Match) -> str:
    raw = match.group(0).replace(",", "")
    n = int(raw)
    if 1100 <= n < 2100 and "," not in match.group(0) and len(raw) == 4:  # read as a year
        hi, lo = divmod(n, 100)
        if lo == 0:
            return _words(hi) + " hundred"
        if n % 1000 < 10 and n >= 2000:
            return _words(n)
        return f"{_words(hi)} {'oh ' if lo < 10 else ''}{_words(lo)}"
    return _words(n)


def _currency(match: re.Match) -> str:
    unit, sub = _CURRENCY_NAMES[match.group(1)]
    whole = int(match.group(2).replace(",", ""))
    cents = int((match.group(3) or "0").ljust(2, "0"))
    parts = [f"{_words(whole)} {unit}{'' if whole == 1 else 's'}"] if whole or not cents else []
    if cents:
        parts.append(f"{_words(cents)} {sub if cents == 1 else ('pence' if sub == 'penny' else sub + 's')}")
    return " and ".join(parts)


def _ordinal(match: re.Match) -> str:
    return _engine().number_to_words(_engine().ordinal(int(match.group(1))), andword="").replace(
        ",", "").replace("-", " ")


def expand_english(text: str) -> str:
    """Spell out abbreviations, currency, ordinals, decimals, percentages and numbers."""
    for pattern, full in _ABBREVIATIONS:
        text = pattern.sub(full, text)
    text = _CURRENCY.sub(_currency, text)
    text = _PERCENT.sub(r"\1 percent", text)
    text = _ORDINAL.sub(_ordinal, text)
    text = _DECIMAL.sub(lambda m: f"{_words(int(m.group(1)))} point "
                        + " ".join(_words(int(d)) for d in m.group(2)), text)
    return _NUMBER.sub(_number, text)


def clean_unicode(text: str) -> str:
    """NFKC-normalise, map typographic punctuation to ASCII, drop control characters."""
    text = unicodedata.normalize("NFKC", text).translate(_PUNCT_MAP)
    text = "".join(c for c in text if unicodedata.category(c)[0] != "C")
    return _SPACES.sub(" ", text).strip()


def normalize(text: str, *, lowercase: bool = True, expand_numbers: bool = True) -> str:
    text = clean_unicode(text)
    if expand_numbers:
        text = expand_english(text)
    if lowercase:
        text = text.lower()
    return _SPACES.sub(" ", text).strip()
