"""English text normalisation: Unicode, abbreviations, numbers, money, times, dates, ordinals,
units, signs, acronyms, e-mail addresses and web addresses: what an English reader expands.
Other languages are read by :mod:`myxtts.text.languages`, which sends English here.

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

# Abbreviations before a name: their period never ends a sentence ("Dr. Smith", "vs. Team B").
_TITLES = [("mrs", "missus"), ("mr", "mister"), ("dr", "doctor"), ("ms", "miz"),
           ("prof", "professor"), ("gen", "general"), ("capt", "captain"), ("lt", "lieutenant"),
           ("col", "colonel"), ("sgt", "sergeant"), ("rev", "reverend"), ("hon", "honorable"),
           ("mt", "mount"), ("vs", "versus")]
# Abbreviations after a word: their period also ends the sentence when the text ends there or
# a capitalised word follows ("on Cedar Ave. The next day" keeps the full stop).
_TRAILING = [("jr", "junior"), ("sr", "senior"), ("co", "company"), ("ltd", "limited"),
             ("etc", "et cetera"), ("ave", "avenue"), ("blvd", "boulevard")]
_TITLE_RE = [(re.compile(rf"\b{a}\.", re.IGNORECASE), full) for a, full in _TITLES]
_TRAILING_RE = [(re.compile(rf"\b{a}\.", re.IGNORECASE), full) for a, full in _TRAILING]
# "St.": "street" after a name ("Maple St."), "saint" before one ("in St. Louis", "St. John").
_ST = re.compile(r"\bSt\.")
_NUMBER_SIGN = re.compile(r"(?:\b[Nn]o\.|#)\s?(?=\d)")  # "No. 5" and "#5"; a sentence's "no." stays

_CURRENCY_SCALED = re.compile(r"([$\u00a3\u20ac])\s?(\d+(?:\.\d+)?)\s(thousand|million|billion|"
                              r"trillion)\b", re.IGNORECASE)
_CURRENCY = re.compile(r"([$\u00a3\u20ac])\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{1,2}))?")  # "$3," keeps its comma
_AM_PM = r"(?:\s?\b([ap])\.?\s?m\b\.?)?"
_TIME = re.compile(r"\b([01]?\d|2[0-3]):([0-5]\d)(?![:\d])" + _AM_PM, re.IGNORECASE)
_HOUR_AM_PM = re.compile(r"\b(1[0-2]|0?[1-9])\s?([ap])\.?\s?m\b\.?", re.IGNORECASE)
_DECADE = re.compile(r"\b(1[1-9]|20)(\d0)'?s\b")  # 1990s, 1990's
_SHORT_DECADE = re.compile(r"(?<![\w'])'?([1-9]0)'?s\b")  # '80s, 80s
_FRACTION = re.compile(r"(?<![\d/.])([1-9])/([2-9]|10)(?![\d/])")
_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b", re.IGNORECASE)
_DECIMAL = re.compile(r"\b(\d+)\.(\d+)\b")
_PERCENT = re.compile(r"(\d)\s?%")
_NUMBER = re.compile(r"\b\d[\d,]*\b")
_SPACES = re.compile(r"\s+")
# Before anything else reads their dots and letters as abbreviations or acronyms.
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s]*[^\s.,;:!?)\]'\"]")
_MONTH = re.compile(r"\b(Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.(?=\s*\d)")
_MONTHS = {"jan": "January", "feb": "February", "mar": "March", "apr": "April", "jun": "June",
           "jul": "July", "aug": "August", "sep": "September", "sept": "September",
           "oct": "October", "nov": "November", "dec": "December"}
_NUM = r"\d(?:[\d,]*\d)?(?:\.\d+)?"  # 3, 1,500, 2.5
_DEGREES = re.compile(rf"([-+\u2212])?({_NUM})\s?°\s?([CF])?\b")
_MINUS = re.compile(r"(?<![\w.,)])-(?=\d)")  # "-5", "(-3)"; not "3-5" or "2024-01-02"
_HOURS_MINUTES = re.compile(r"\b(\d+)\s?h\s?(\d+)\s?m(?:in)?\b")  # 3h 05m, 1h30min
# Units after a number (singular, plural). Single letters only when attached ("5s", "3m"), where
# nothing else is meant; "m" alone is metres.
_UNITS = {"km/h": ("kilometer per hour", "kilometers per hour"), "mph": ("mile per hour", "miles per hour"),
          "km": ("kilometer", "kilometers"), "cm": ("centimeter", "centimeters"),
          "mm": ("millimeter", "millimeters"), "kg": ("kilogram", "kilograms"),
          "mg": ("milligram", "milligrams"), "ml": ("milliliter", "milliliters"),
          "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"), "ft": ("foot", "feet"),
          "kb": ("kilobyte", "kilobytes"), "mb": ("megabyte", "megabytes"),
          "gb": ("gigabyte", "gigabytes"), "tb": ("terabyte", "terabytes"),
          "hz": ("hertz", "hertz"), "khz": ("kilohertz", "kilohertz"), "mhz": ("megahertz", "megahertz"),
          "ghz": ("gigahertz", "gigahertz"), "ms": ("millisecond", "milliseconds"),
          "sec": ("second", "seconds"), "secs": ("second", "seconds"), "min": ("minute", "minutes"),
          "mins": ("minute", "minutes"), "hr": ("hour", "hours"), "hrs": ("hour", "hours")}
_ATTACHED = {"h": ("hour", "hours"), "s": ("second", "seconds"), "m": ("meter", "meters"),
             "g": ("gram", "grams"), "l": ("liter", "liters")}
_UNIT = re.compile(rf"({_NUM})(?:\s?({'|'.join(sorted(map(re.escape, _UNITS), key=len, reverse=True))})"
                   rf"|({'|'.join(_ATTACHED)}))\b(?!/)", re.IGNORECASE)
# Capitals read letter by letter ("FBI", "GPUs", "HTTP"): two or three letters unless the token
# is a short English word typed for emphasis ("Don't STOP", "I said NO"), four only without a
# vowel; acronyms said as words are listed.
_ACRONYM = re.compile(r"\b([A-Z]{2,4})(s?)\b")
_SAID_AS_WORDS = {"RAM", "ROM", "PIN", "SIM", "GIF", "LAN", "WAN", "ZIP"}
_SHORT_WORDS = set("""AM AN AS AT BE BY DO GO HE HI IF IN IS IT ME MY NO OF OH OK ON OR SO TO UP
    WE YE ALL AND ANY ARE BAD BIG BUT CAN DID END FOR GET GOT HAD HAS HER HEY HIM HIS HOT HOW ITS
    LET MAY NEW NOT NOW OFF OLD ONE OUR OUT RUN SAW SAY SEE SHE THE TOO TOP TRY TWO WAS WAY WHO
    WHY WIN WON WOW YES YET YOU""".split())
_ROMAN = re.compile(r"^[IVXLCDM]+$")  # "World War II" keeps its numeral
_CURRENCY_NAMES = {"$": ("dollar", "cent"), "\u00a3": ("pound", "penny"), "\u20ac": ("euro", "cent")}


@lru_cache(maxsize=1)
def _engine():
    import inflect  # imported lazily: it takes ~0.3 s and only the English path needs it

    return inflect.engine()


def _words(n: int) -> str:
    return _engine().number_to_words(n, andword="").replace(",", "").replace("-", " ")


def _year(n: int) -> str:
    hi, lo = divmod(n, 100)
    if lo == 0:
        return _words(hi) + " hundred"
    if n % 1000 < 10 and n >= 2000:
        return _words(n)
    return f"{_words(hi)} {'oh ' if lo < 10 else ''}{_words(lo)}"


def _number(match: re.Match) -> str:
    raw = match.group(0).replace(",", "")
    n = int(raw)
    if 1100 <= n < 2100 and "," not in match.group(0) and len(raw) == 4:  # read as a year
        return _year(n)
    return _words(n)


def _plural(words: str) -> str:
    """"nineteen ninety" → "nineteen nineties": only the last word takes the plural."""
    head, _, last = words.rpartition(" ")
    return f"{head} {_engine().plural(last)}".strip()


def _ends_sentence(match: re.Match) -> bool:
    """Whether the period a match consumed also closed the sentence."""
    return match.group(0).endswith(".") and re.match(r"\s*(?:$|[A-Z\"(])",
                                                     match.string[match.end():]) is not None


def _trailing(full: str):
    return lambda m: full + ("." if _ends_sentence(m) else "")


def _saint_or_street(match: re.Match) -> str:
    words = match.string[:match.start()].split()
    # After a capitalised word that does not open a sentence ("on Maple St."), it is a street.
    after_name = (len(words) > 1 and words[-1][:1].isupper()
                  and not words[-2].endswith((".", "!", "?")))
    if after_name or not re.match(r"\s+[A-Z]", match.string[match.end():]):
        return "street" + ("." if _ends_sentence(match) else "")
    return "saint"


def _am_pm(letter: str | None, match: re.Match) -> str:
    if not letter:
        return ""
    said = " ay em" if letter.lower() == "a" else " pee em"  # spelled as said: "a m" reads "uh m"
    return said + ("." if _ends_sentence(match) else "")


def _time(match: re.Match) -> str:
    """10:05 → ten oh five, 7:30 → seven thirty, 12:00 → twelve o'clock, 14:00 → fourteen
    hundred; a following am/pm is read out."""
    h, m, ampm = int(match.group(1)), int(match.group(2)), match.group(3)
    if m == 0:
        said = _words(h) if ampm else (f"{_words(h)} o'clock" if 1 <= h <= 12
                                       else f"{_words(h)} hundred")
    else:
        said = f"{_words(h)} {'oh ' if m < 10 else ''}{_words(m)}"
    return said + _am_pm(ampm, match)


def _decimal(whole: str, frac: str) -> str:
    """"3", "14" → "three point one four"."""
    return _words(int(whole)) + "".join(f" {'point ' if i == 0 else ''}{_words(int(d))}"
                                        for i, d in enumerate(frac))


def _currency_scaled(match: re.Match) -> str:
    """$1.5 million → one point five million dollars."""
    unit = _CURRENCY_NAMES[match.group(1)][0]
    amount = _decimal(*match.group(2).partition(".")[::2])
    return f"{amount} {match.group(3).lower()} {unit}s"


def _currency(match: re.Match) -> str:
    unit, sub = _CURRENCY_NAMES[match.group(1)]
    whole = int(match.group(2).replace(",", ""))
    cents = int((match.group(3) or "0").ljust(2, "0"))
    parts = [f"{_words(whole)} {unit}{'' if whole == 1 else 's'}"] if whole or not cents else []
    if cents:
        parts.append(f"{_words(cents)} {sub if cents == 1 else ('pence' if sub == 'penny' else sub + 's')}")
    return " and ".join(parts)


def _fraction(match: re.Match) -> str:
    """1/2 → one half, 3/4 → three quarters, 2/3 → two thirds."""
    num, den = int(match.group(1)), int(match.group(2))
    name = {2: "half", 4: "quarter"}.get(den) or _engine().number_to_words(_engine().ordinal(den))
    return f"{_words(num)} {name if num == 1 else _engine().plural(name)}"


def _ordinal(match: re.Match) -> str:
    return _engine().number_to_words(_engine().ordinal(int(match.group(1))), andword="").replace(
        ",", "").replace("-", " ")


def _spoken_address(text: str) -> str:
    """"jane.doe@mail.example.com" → "jane dot doe at mail dot example dot com"."""
    text = re.sub(r"^https?://", "", text)
    for sign, word in (("@", " at "), (".", " dot "), ("/", " slash "), ("_", " underscore "),
                       ("-", " dash "), ("+", " plus ")):
        text = text.replace(sign, word)
    return text


def _amount(raw: str) -> tuple[str, bool]:
    """"2.5" → ("two point five", plural); "1" → ("one", singular)."""
    whole, _, frac = raw.replace(",", "").partition(".")
    said = _decimal(whole, frac) if frac else _words(int(whole))
    return said, not (whole == "1" and not frac)


def _degrees(match: re.Match) -> str:
    sign, (said, plural), scale = match.group(1), _amount(match.group(2)), match.group(3)
    return (("minus " if sign and sign != "+" else "") + said + (" degrees" if plural else " degree")
            + {"C": " Celsius", "F": " Fahrenheit"}.get(scale or "", ""))


def _unit(match: re.Match) -> str:
    said, plural = _amount(match.group(1))
    unit = (match.group(2) or "").lower()
    names = _UNITS[unit] if unit else _ATTACHED[match.group(3).lower()]
    return f"{said} {names[plural]}"


def _hours_minutes(match: re.Match) -> str:
    """"3h 05m" → "three hours five minutes"."""
    (h, hs), (m, ms) = _amount(match.group(1)), _amount(str(int(match.group(2))))
    return f"{h} hour{'s' * hs} {m} minute{'s' * ms}"


def _acronym(match: re.Match) -> str:
    letters, plural = match.group(1), match.group(2)
    word = (letters in _SAID_AS_WORDS or letters in _SHORT_WORDS or _ROMAN.match(letters)
            or (len(letters) == 4 and re.search("[AEIOUY]", letters)))
    if word:
        return match.group(0)
    return " ".join(letters) + ("'s" if plural else "")


def expand_english(text: str) -> str:
    """Spell out web and e-mail addresses, abbreviations, currency, clock times, temperatures,
    units, signs, decades, fractions, ordinals, decimals, percentages, numbers and acronyms."""
    text = _URL.sub(lambda m: _spoken_address(m.group(0)), text)
    text = _EMAIL.sub(lambda m: _spoken_address(m.group(0)), text)
    text = _MONTH.sub(lambda m: _MONTHS[m.group(1).lower()], text)
    text = _NUMBER_SIGN.sub("number ", text)
    for pattern, full in _TITLE_RE:
        text = pattern.sub(full, text)
    text = _ST.sub(_saint_or_street, text)
    for pattern, full in _TRAILING_RE:
        text = pattern.sub(_trailing(full), text)
    text = text.replace("&", " and ")
    text = _CURRENCY_SCALED.sub(_currency_scaled, text)
    text = _CURRENCY.sub(_currency, text)
    text = _PERCENT.sub(r"\1 percent", text)
    text = _TIME.sub(_time, text)
    text = _HOUR_AM_PM.sub(lambda m: _words(int(m.group(1))) + _am_pm(m.group(2), m), text)
    text = _DECADE.sub(lambda m: _plural(_year(int(m.group(1) + m.group(2)))), text)
    text = _SHORT_DECADE.sub(lambda m: _plural(_words(int(m.group(1)))), text)
    text = _FRACTION.sub(_fraction, text)
    text = _DEGREES.sub(_degrees, text)
    text = _HOURS_MINUTES.sub(_hours_minutes, text)
    text = _UNIT.sub(_unit, text)
    text = _MINUS.sub("minus ", text)
    text = _ORDINAL.sub(_ordinal, text)
    text = _DECIMAL.sub(lambda m: _decimal(m.group(1), m.group(2)), text)
    text = _NUMBER.sub(_number, text)
    # Only in text that is not all capitals: a shouted sentence is read as words.
    return _ACRONYM.sub(_acronym, text) if re.search(r"[a-z]", text) else text


def clean_unicode(text: str, keep: str = "") -> str:
    """NFKC-normalise, map typographic punctuation to ASCII, drop control and format characters
    except those in ``keep`` (a language's own, such as Persian's zero-width non-joiner)."""
    text = unicodedata.normalize("NFKC", text).translate(_PUNCT_MAP)
    text = "".join(c for c in text if unicodedata.category(c)[0] != "C" or c in keep)
    return _SPACES.sub(" ", text).strip()


def normalize(text: str, *, lowercase: bool = True, expand_numbers: bool = True) -> str:
    text = clean_unicode(text)
    if expand_numbers:
        text = expand_english(text)
    if lowercase:
        text = text.lower()
    return _SPACES.sub(" ", text).strip()
