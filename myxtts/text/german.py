"""German (de) read aloud: abbreviations, dates, clock times, money, percentages, ordinals,
decimals and numbers in German words.

German writes a decimal comma and a thousands point (3,5; 1.250) and an ordinal as a number with
a point (am 3. Mai). An ordinal's ending follows its article; only the two commonest are told
apart: "der 3. Mai" → "der dritte Mai", everywhere else "-en" (am, vom, zum, den, dem: "am
dritten Mai"), which is also how a date heading a letter is read.
"""
from __future__ import annotations

import re

from myxtts.text.numbers import say_number

_MONTHS = ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September",
           "Oktober", "November", "Dezember"]
_ABBREVIATIONS = [("z. B.", "zum Beispiel"), ("d. h.", "das heißt"), ("u. a.", "unter anderem"),
                  ("usw.", "und so weiter"), ("bzw.", "beziehungsweise"), ("ca.", "circa"),
                  ("Nr.", "Nummer"), ("Dr.", "Doktor"), ("Prof.", "Professor"),
                  ("Str.", "Straße"), ("evtl.", "eventuell"), ("inkl.", "inklusive"),
                  ("ggf.", "gegebenenfalls"), ("vgl.", "vergleiche")]
# "z. B." and "z.B." alike.
_ABBREVIATION_RE = [(re.compile(r"(?<!\w)" + r"\s?".join(map(re.escape, short.split()))
                                + r"(?=\s|$|[,;:!?)])"), full) for short, full in _ABBREVIATIONS]
_CURRENCY = {"\u20ac": ("Euro", "Cent"), "EUR": ("Euro", "Cent"), "Euro": ("Euro", "Cent"),
             "$": ("Dollar", "Cent"), "Dollar": ("Dollar", "Cent"), "\u00a3": ("Pfund", "Pence")}
_UNIT = "|".join(map(re.escape, sorted(_CURRENCY, key=len, reverse=True)))
_WHOLE = r"(?<![\d.,])(\d{1,3}(?:\.\d{3})+|\d+)"  # 5, 1.250
_MONEY_AFTER = re.compile(rf"{_WHOLE}(?:,(\d\d|-{{1,2}}))?\s?({_UNIT})(?!\w)")
_MONEY_BEFORE = re.compile(rf"([\u20ac$\u00a3])\s?{_WHOLE}(?:,(\d\d|-{{1,2}}))?(?![\d,])")
_DATE = re.compile(r"(?<![\d.])(\d{1,2})\.(\d{1,2})\.(\d{4})?(?!\d)")
_DAY_MONTH = re.compile(rf"(?<![\d.])(\d{{1,2}})\.\s?(?=(?:{'|'.join(_MONTHS)})\b)")
_ARTICLE_ORDINAL = re.compile(r"\b(der|die|das|den|dem|des|am|im|zum|vom|beim)\s(\d+)\.(?=\s)",
                              re.IGNORECASE)
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])(?:\s?Uhr\b)?")
_PERCENT = re.compile(r"(?<![\d.,])(\d+(?:,\d+)?)\s?%")
_DECIMAL = re.compile(r"(?<![\d.,])(\d+),(\d+)(?![\d,])")
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:\.\d{3})+(?![\d,]|\.\d)")
_YEAR = re.compile(r"(?<![\d.,])1[1-9]\d\d(?![\d,]|\.\d)")  # 1990: neunzehnhundertneunzig
_MINUS = re.compile(r"(?<![\w)])-(?=\d)")
_NUMBER = re.compile(r"\d+")


def words(n: int, to: str = "cardinal") -> str:
    return say_number(n, "de", to)


def _before_noun(n: int) -> str:
    """A count before a noun: "eins" is "ein" there (ein Euro, ein Uhr, hundertein Euro)."""
    said = words(n)
    return said[:-1] if said.endswith("eins") else said


def ordinal(n: int, article: str = "") -> str:
    """3 after "der", "die", "das" → dritte; after anything else → dritten."""
    said = words(n, to="ordinal")
    return said if article.lower() in ("der", "die", "das") else said + "n"


def _article_before(match: re.Match) -> str:
    before = match.string[:match.start()].split()
    return before[-1] if before else ""


def _date(match: re.Match) -> str:
    """03.05.2024 → dritten Mai zweitausendvierundzwanzig."""
    day, month, year = int(match.group(1)), int(match.group(2)), match.group(3)
    if not (1 <= day <= 31 and 1 <= month <= 12):
        return match.group(0)
    said = f"{ordinal(day, _article_before(match))} {_MONTHS[month - 1]}"
    return f"{said} {words(int(year), to='year')}" if year else said


def _time(match: re.Match) -> str:
    """14:30 → vierzehn Uhr dreißig, 1:00 Uhr → ein Uhr."""
    h, m = int(match.group(1)), int(match.group(2))
    return f"{_before_noun(h)} Uhr" + (f" {words(m)}" if m else "")


def _money(whole: str, cents: str | None, unit: str) -> str:
    """"5", "50", "€" → fünf Euro und fünfzig Cent."""
    name, sub = _CURRENCY[unit]
    said = f"{_before_noun(int(whole.replace('.', '')))} {name}"
    if cents and cents.isdigit() and int(cents):
        said += f" und {_before_noun(int(cents))} {sub}"
    return said


def _decimal(whole: str, frac: str) -> str:
    """"3", "14" → drei Komma eins vier."""
    return words(int(whole)) + " Komma " + " ".join(words(int(d)) for d in frac)


def _amount(raw: str) -> str:
    """"2,5" → zwei Komma fünf, "12" → zwölf."""
    whole, _, frac = raw.partition(",")
    return _decimal(whole, frac) if frac else words(int(whole))


def _abbreviation(full: str):
    # At the end of the text the abbreviation's point was also the full stop.
    return lambda m: full + ("." if m.end() == len(m.string) and m.group(0).endswith(".") else "")


def expand(text: str) -> str:
    """Abbreviations, dates, clock times, money, percentages, ordinals, decimals, signs and
    numbers in German words."""
    for pattern, full in _ABBREVIATION_RE:
        text = pattern.sub(_abbreviation(full), text)
    text = text.replace("&", " und ")
    text = _DATE.sub(_date, text)
    text = _DAY_MONTH.sub(lambda m: ordinal(int(m.group(1)), _article_before(m)) + " ", text)
    text = _ARTICLE_ORDINAL.sub(lambda m: f"{m.group(1)} {ordinal(int(m.group(2)), m.group(1))}",
                                text)
    text = _TIME.sub(_time, text)
    text = _MONEY_AFTER.sub(lambda m: _money(m.group(1), m.group(2), m.group(3)), text)
    text = _MONEY_BEFORE.sub(lambda m: _money(m.group(2), m.group(3), m.group(1)), text)
    text = _PERCENT.sub(lambda m: _amount(m.group(1)) + " Prozent", text)
    text = _DECIMAL.sub(lambda m: _decimal(m.group(1), m.group(2)), text)
    text = _THOUSANDS.sub(lambda m: words(int(m.group(0).replace(".", ""))), text)
    text = _YEAR.sub(lambda m: words(int(m.group(0)), to="year"), text)
    text = _MINUS.sub("minus ", text)
    return _NUMBER.sub(lambda m: words(int(m.group(0))), text)
