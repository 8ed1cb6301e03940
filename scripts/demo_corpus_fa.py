"""The Persian demo corpus's voices, word lists and grammar (``make_demo_corpus.py --language fa``).

Simple everyday sentences from word lists written for this project: subjects, verbs in the past
and present tense agreeing with them, objects, places, times, counted things and prices. Some
numbers are written as digits (Persian ``۰-۹`` or Western), so that a text front end has to
read them; the normalised column spells them in Persian words, as the audio says them. Plurals
and present-tense verbs carry the zero-width non-joiner (``کتاب‌ها``, ``می‌روم``); lists, a
vocative and questions use the Persian comma and question mark; reported speech ``« »``.
"""
from __future__ import annotations

import random

ZWNJ = "\u200c"
PERSIAN_DIGITS = str.maketrans("0123456789", "۰۱۲۳۴۵۶۷۸۹")

# (speaker, espeak-ng voice, pitch -p, speed -s in words per minute, description)
VOICES = [
    ("spk1", "fa", 50, 160, "espeak-ng fa (male), mid pitch, moderate rate"),
    ("spk2", "fa+f2", 85, 155, "espeak-ng fa with f2 variant (female), high pitch, slightly slow"),
    ("spk3", "fa+m3", 20, 170, "espeak-ng fa with m3 variant (male), low pitch, fast"),
]

# Number words, in the front end's spelling (myxtts.text.persian reads the digits the same way).
NUMBERS = {2: "دو", 3: "سه", 4: "چهار", 5: "پنج", 6: "شش", 7: "هفت", 8: "هشت", 9: "نه",
           10: "ده", 11: "یازده", 12: "دوازده", 15: "پانزده", 20: "بیست", 25: "بیست و پنج",
           30: "سی", 40: "چهل", 50: "پنجاه", 120: "صد و بیست", 250: "دویست و پنجاه",
           500: "پانصد"}
HOURS = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]

# person: 0-2 singular first to third, 3-5 plural first to third
PRONOUNS = [("من", 0), ("تو", 1), ("او", 2), ("ما", 3), ("شما", 4), ("آنها", 5)]
NAMES = ["علی", "مریم", "رضا", "سارا", "حسین", "زهرا", "امیر", "نرگس", "مهدی", "لیلا", "بهرام",
         "شیرین", "کاوه", "پروانه", "دایی من", "خواهرم", "همسایه‌ی ما", "معلم"]
PAST_ENDINGS = ["م", "ی", "", "یم", "ید", "ند"]
PRESENT_ENDINGS = ["م", "ی", "د", "یم", "ید", "ند"]
THINGS = ["کتاب", "نامه", "سیب", "نان", "قلم", "دفتر", "روزنامه", "گل", "لباس", "کیف", "پنجره",
          "ماشین", "دوچرخه", "بشقاب", "لیوان", "کفش", "فرش", "میز", "صندلی", "انار"]
# (word before the verb, past stem, present stem), all stems ending in a consonant
MOTION = [("", "رفت", "رو"), ("", "رسید", "رس"), ("", "دوید", "دو")]
# ... and the things a verb is said of
TRANSITIVE = [(("", "خرید", "خر"), THINGS), (("", "دید", "بین"), THINGS),
              (("", "آورد", "آور"), THINGS), (("پیدا ", "کرد", "کن"), THINGS),
              (("", "فروخت", "فروش"), [t for t in THINGS if t != "نامه"]),
              (("", "خواند", "خوان"), ["کتاب", "نامه", "روزنامه", "دفتر"]),
              (("", "نوشت", "نویس"), ["نامه", "دفتر"]),
              (("تمیز ", "کرد", "کن"), ["پنجره", "ماشین", "میز", "فرش", "کفش", "بشقاب", "لیوان"]),
              (("", "شست", "شوی"), ["بشقاب", "لیوان", "لباس", "سیب", "انار", "ماشین", "پنجره"]),
              (("", "پخت", "پز"), ["نان"])]
PLACES = ["مدرسه", "بازار", "پارک", "کتابخانه", "خانه", "دانشگاه", "بیمارستان", "ایستگاه",
          "نانوایی", "کوه", "دریا", "باغ", "کافه", "اداره", "فرودگاه", "موزه"]
PAST_TIMES = ["دیروز", "دیشب", "هفته‌ی گذشته", "پارسال", "امروز صبح", "دیروز عصر"]
PRESENT_TIMES = ["هر روز", "هر هفته", "فردا", "امروز", "امشب", "همیشه", "صبح‌ها", "شب‌ها"]
ADJECTIVES = ["بزرگ", "کوچک", "قشنگ", "تازه", "گرم", "سرد", "قدیمی", "سبز", "زیبا", "سنگین",
              "ارزان", "گران", "تمیز", "شلوغ"]
CONNECTORS = ["، اما", " و بعد", "، چون", "، ولی"]


def plural(noun: str) -> str:
    return noun + ZWNJ + "ها"


class Grammar:
    """Sentences as (raw text, normalised text), drawn with ``rng``."""

    def __init__(self, rng: random.Random):
        self.r = rng

    def c(self, seq):
        return self.r.choice(seq)

    def number(self, choices=tuple(NUMBERS)) -> tuple[str, str]:
        """A number as digits, Persian or Western, and as words."""
        n = self.c(choices)
        raw = str(n).translate(PERSIAN_DIGITS) if self.r.random() < 0.6 else str(n)
        return raw, NUMBERS[n]

    def subject(self) -> tuple[str, int]:
        return (self.c(NAMES), 2) if self.r.random() < 0.5 else self.c(PRONOUNS)

    def verb(self, v: tuple[str, str, str], person: int, past: bool) -> str:
        before, past_stem, present_stem = v
        if past:
            return before + past_stem + PAST_ENDINGS[person]
        return before + "می" + ZWNJ + present_stem + PRESENT_ENDINGS[person]

    def clause(self) -> list[tuple[str, str]]:
        """One clause as (raw, normalised) words."""
        who, p = self.subject()
        past = self.r.random() < 0.5
        when = self.c(PAST_TIMES if past else PRESENT_TIMES)
        k = self.r.randrange(5)
        if k == 0:
            return _same(who, when, "به", self.c(PLACES), self.verb(self.c(MOTION), p, past))
        verb, things = self.c(TRANSITIVE)
        thing = self.c(things)
        if k == 1:
            return _same(who, when, plural(thing) if self.r.random() < 0.5 else thing, "را",
                         self.verb(verb, p, past))
        if k == 2:
            return [*_same(who, "در", self.c(PLACES)), self.number(), *_same(
                thing, self.verb(verb, p, True))]
        if k == 3:
            return [*_same(who), ("ساعت", "ساعت"), self.number(HOURS),
                    *_same(self.c(["صبح", "عصر", "شب"]), "به", self.c(PLACES),
                           self.verb(self.c(MOTION), p, past))]
        return _same(who, when, "در", self.c(PLACES), "بود" + PAST_ENDINGS[p])

    def sentence(self) -> list[tuple[str, str]]:
        """One sentence; the last word carries its final punctuation."""
        k = self.r.random()
        if k < 0.12:  # a question, to someone by name
            return _same(self.c(NAMES[:14]) + "،", self.c(PRESENT_TIMES), "کجا",
                         self.verb(self.c(MOTION), 1, False) + "؟")
        if k < 0.2:  # a yes-no question
            words = self.clause()
            words[-1] = (words[-1][0] + "؟", words[-1][1] + "؟")
            return [("آیا", "آیا"), *words]
        if k < 0.3:  # a list: "نان، سیب و گل"
            verb, things = self.c([vt for vt in TRANSITIVE if len(vt[1]) >= 3])
            a, b, c = self.r.sample(things, 3)
            who, p = self.subject()
            return _same(who, "در", self.c(PLACES), a + "،", b, "و", c,
                         self.verb(verb, p, True) + ".")
        if k < 0.4:  # a price
            return [*_same("قیمت", "این", self.c(THINGS)), self.number((20, 25, 30, 40, 50, 120, 250, 500)),
                    *_same("هزار", "تومان", "است.")]
        if k < 0.5:
            return _same("این", self.c(THINGS), "خیلی", self.c(ADJECTIVES), "است.")
        if k < 0.57:  # reported speech
            place, motion = self.c(PLACES), self.verb(self.c(MOTION), 0, False)
            return _same(self.c(NAMES[:14]), "گفت", f"«{self.c(PRESENT_TIMES)}", "به", place,
                         f"{motion}».")
        words = self.clause()
        if self.r.random() < 0.25:
            conn = self.c(CONNECTORS)
            words[-1] = (words[-1][0] + conn[0].strip(), words[-1][1] + conn[0].strip())
            words += [*_same(conn.lstrip("، ")), *self.clause()]
        words[-1] = (words[-1][0] + ".", words[-1][1] + ".")
        return words

    def say(self) -> tuple[str, str]:
        words = self.sentence()
        return " ".join(w for w, _ in words), " ".join(n for _, n in words)


def _same(*words: str) -> list[tuple[str, str]]:
    """Words written as they are said."""
    return [(w, w) for w in words]


README = """# MyXTTS Persian demo corpus

A small multi-speaker Persian (fa) corpus bundled with MyXTTS so that the whole pipeline can be
exercised offline in another language than English (`myxtts demo --language fa`). It is
**synthetic speech** from espeak-ng's Persian voice, useful for smoke tests and demos; too small
and too robotic for a voice worth shipping.

## Contents

{contents}
```
data/demo-fa/
  metadata.csv      ID|raw text|normalized text|speaker|language
  wavs/ID.flac
  val.txt           held-out utterance ids, one per line
  README.md
```

`metadata.csv` is LJSpeech-style with a fourth column for the speaker and a fifth for the
language (`fa` on every row), no header and no quoting, UTF-8, one utterance per line:

```
{example}
```

* column 2: raw text, with numbers as Persian (`۳`) or Western (`3`) digits, `، ؟ « »` and
  the zero-width non-joiner (`کتاب‌ها`, `می‌روم`) as a text front end sees them
* column 3: normalised text: the same sentence with its numbers in Persian words. The audio was
  synthesised from this column, so it matches it word for word.

## Train / validation split

The last {val_per_spk} utterances of each speaker in metadata order are held out for validation;
their ids ({n_val} in all) are listed in `val.txt`, one per line.

## Voices

| speaker | engine | voice | settings |
|---|---|---|---|
{voice_rows}

## How it was generated

```
python scripts/make_demo_corpus.py --language fa   # writes data/demo-fa/ (overwrites it)
```

The sentences come from a template grammar and Persian word lists written for this project
(`scripts/demo_corpus_fa.py`), with a fixed random seed ({seed}). Each is synthesised by one
voice with espeak-ng, resampled to 22050 Hz with soxr, trimmed of leading/trailing silence
(keeping {pad_ms} ms), peak-normalised and written as FLAC; reproducible for a given espeak-ng
version (generated here with {versions}).

## Licence

The sentences and the corpus are generated by the MyXTTS project and are released under the
same licence as the project (Apache-2.0). The audio is the output of espeak-ng (a
GPL-3.0-or-later program). A program's licence does not normally extend to the output it
produces, so the project treats this audio as its own; check for yourself if redistribution
terms matter to you. No recordings of real people and no text from existing books or corpora
are included.
"""
