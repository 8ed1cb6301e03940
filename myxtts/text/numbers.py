"""Numbers in a language's words, through num2words (LGPL-2.1), for every language but English
(whose reader, :mod:`myxtts.text.normalize`, keeps inflect).

A number of more than 15 digits is read digit by digit, as a long account or serial number is
said: num2words refuses some (an ``OverflowError`` from 10^27 in Spanish, 10^10 in Telugu) and
misreads others (Persian drops the digits past its largest named power); so is one it fails on.
Its Amharic is not used: it fails from 10^6 and does not return from 10^7.
"""
from __future__ import annotations

import re
import unicodedata

_DIGIT = re.compile(r"\d")
_LONGEST = 15  # digits said as one number: up to the hundreds of trillions
_BROKEN = {"am"}


def say_number(n: int, lang: str, to: str = "cardinal") -> str:
    """``n`` in words of num2words' language ``lang`` (``to``: cardinal, ordinal or year)."""
    from num2words import num2words  # imported on first use: only non-English text needs it

    if len(str(n)) <= _LONGEST:
        try:
            return num2words(n, lang=lang, to=to)
        except (ArithmeticError, LookupError, TypeError, ValueError, NotImplementedError):
            pass
    return " ".join(num2words(int(d), lang=lang) for d in str(n))


def num2words_name(code: str) -> str | None:
    """num2words' name for a language code ("pt-br" → "pt_BR", "fr-fr" → "fr", "ar" → "ar"),
    or None where it has no words for it."""
    from num2words import CONVERTER_CLASSES

    base, _, region = code.replace("_", "-").partition("-")
    for name in (f"{base.lower()}_{region.upper()}" if region else "", base.lower()):
        if name in CONVERTER_CLASSES and name not in _BROKEN:
            return name
    return None


def cardinals(lang: str):
    """A reader of every run of digits as its cardinal in num2words' language ``lang``."""
    return lambda text: re.sub(r"\d+", lambda m: say_number(int(m.group(0)), lang), text)


def ascii_digits(text: str) -> str:
    """"۱۴۰۳" and "١٤٠٣" → "1403": digits of every script read as numbers alike."""
    return _DIGIT.sub(lambda m: str(unicodedata.digit(m.group(0))), text)
