"""Persian (fa) read aloud: numbers, ordinals, decimals, dates, times, money and percentages in
Persian words, and the Arabic code points a keyboard may type for Persian letters.

Runs on text whose digits are ASCII already (:mod:`myxtts.text.languages` converts ``۰-۹`` and
``٠-٩``, the Arabic decimal separator ``٫`` to ``.`` and the thousands separator ``٬`` to ``,``).
Cardinals come from num2words; its ordinals and decimals are not used, as it writes 30th as
"سیم" (not "سی‌ام") and reads 12.05 as "دوازده و نیم".
"""
from __future__ import annotations

import re

from myxtts.text.numbers import say_number

ZWNJ = "\u200c"  # zero-width non-joiner: "کتاب‌ها", a boundary inside a word that espeak-ng hears
# Arabic yeh, alef maksura and kaf typed (on an Arabic keyboard) for Persian's own letters.
LETTERS = {"\u064a": "\u06cc", "\u0649": "\u06cc", "\u0643": "\u06a9"}

_SOLAR_MONTHS = ["فروردین", "اردیبهشت", "خرداد", "تیر", "مرداد", "شهریور", "مهر", "آبان", "آذر",
                 "دی", "بهمن", "اسفند"]
_GREGORIAN_MONTHS = ["ژانویه", "فوریه", "مارس", "آوریل", "مه", "ژوئن", "ژوئیه", "اوت", "سپتامبر",
                     "اکتبر", "نوامبر", "دسامبر"]
_FRACTIONS = ["دهم", "صدم", "هزارم"]  # tenths, hundredths, thousandths
_CURRENCY = {"$": "دلار", "\u20ac": "یورو", "\u00a3": "پوند"}

_LETTER = "\u0600-\u06ff"
_AMOUNT = r"(?<![\d.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d])"
_DATE = re.compile(r"(?<!\d)(\d{4})/(\d{1,2})/(\d{1,2})(?!\d)")
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")
_MONEY_BEFORE = re.compile(rf"([$\u20ac\u00a3])\s?({_AMOUNT})")
_MONEY_AFTER = re.compile(rf"({_AMOUNT})\s?([$\u20ac\u00a3])")
_PERCENT = re.compile(rf"({_AMOUNT})\s?%")
# "۲۵م", "۳ام", "۲۰‌ام", "۱۰مین": a number with the ordinal suffix (and "ین" of the ordinal
# adjective); "ام" may stand apart, a lone "م" only attached.
_ORDINAL = re.compile(rf"(?<![\d.,])(\d+)(?:[\s{ZWNJ}]?ام|م)(ین)?(?![{_LETTER}])")
_MINUS = re.compile(r"(?<![\w)])-(?=\d)")
_NUMBER = re.compile(_AMOUNT)


def words(n: int) -> str:
    return say_number(n, "fa")


def ordinal(n: int) -> str:
    """3 → سوم, 30 → سی‌ام, 25 → بیست و پنجم."""
    said = words(n)
    if said.endswith("سه"):
        return said[:-2] + "سوم"
    if said.endswith("ی"):
        return said + ZWNJ + "ام"
    return said + "م"


def _fraction(frac: str) -> str:
    """Digits after the decimal point, of three at most: "5" → "نیم", "05" → "پنج صدم"."""
    return "نیم" if frac == "5" else f"{words(int(frac))} {_FRACTIONS[len(frac) - 1]}"


def amount(raw: str) -> str:
    """"1,250" → هزار و دویست و پنجاه, "3.5" → سه و نیم, "0.25" → بیست و پنج صدم; past
    thousandths, digit by digit after "ممیز" (point)."""
    whole, _, frac = raw.replace(",", "").partition(".")
    frac, said = frac.rstrip("0"), words(int(whole))
    if not frac:
        return said
    if len(frac) > len(_FRACTIONS):
        return f"{said} ممیز " + " ".join(words(int(d)) for d in frac)
    return _fraction(frac) if int(whole) == 0 else f"{said} و {_fraction(frac)}"


def _date(match: re.Match) -> str:
    """1403/05/12 → دوازدهم مرداد هزار و چهارصد و سه: a year before 1700 is a solar one."""
    year, month, day = (int(g) for g in match.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return match.group(0)
    months = _SOLAR_MONTHS if year < 1700 else _GREGORIAN_MONTHS
    return f"{ordinal(day)} {months[month - 1]} {words(year)}"


def _time(match: re.Match) -> str:
    """8:30 → هشت و سی دقیقه, 14:00 → چهارده."""
    h, m = int(match.group(1)), int(match.group(2))
    return words(h) if m == 0 else f"{words(h)} و {words(m)} دقیقه"


def expand(text: str) -> str:
    """Dates, clock times, money, percentages, ordinals, signs and numbers in Persian words."""
    text = _DATE.sub(_date, text)
    text = _TIME.sub(_time, text)
    text = _MONEY_BEFORE.sub(lambda m: f"{amount(m.group(2))} {_CURRENCY[m.group(1)]}", text)
    text = _MONEY_AFTER.sub(lambda m: f"{amount(m.group(1))} {_CURRENCY[m.group(2)]}", text)
    text = _PERCENT.sub(lambda m: f"{amount(m.group(1))} درصد", text)
    text = _ORDINAL.sub(lambda m: ordinal(int(m.group(1))) + (m.group(2) or ""), text)
    text = _MINUS.sub("منفی ", text)
    return _NUMBER.sub(lambda m: amount(m.group(0)), text)
