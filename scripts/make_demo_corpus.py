#!/usr/bin/env python3
"""Regenerate a bundled demo corpus: English in ``data/demo/``, Persian in ``data/demo-fa/``.

The corpus is small, multi-speaker and LJSpeech-shaped, and is made entirely by
this script: the sentences come from a seeded template grammar (word lists
written here, not copied from any book or corpus), and the audio is
synthesised with espeak-ng and flite, resampled to 22050 Hz with soxr, trimmed
of long leading/trailing silence, peak-normalised and written as 16-bit mono
FLAC.

Output (everything under the output directory is rewritten on each run)::

    data/demo/metadata.csv      ID|raw text|normalized text|speaker
    data/demo/wavs/ID.flac      mono, 22050 Hz, PCM_16 FLAC
    data/demo/val.txt           held-out ids (last VAL_PER_SPEAKER of each speaker)
    data/demo/README.md         description, voices, licence, split convention

Requirements: Python 3.11, numpy, soundfile, soxr, inflect, and the Debian
packages ``espeak-ng`` and ``flite`` on PATH (``--language fa``: espeak-ng only, with its
Persian voice). The Persian corpus's voices, word lists and grammar are in
``demo_corpus_fa.py``; its metadata names the language in a fifth column.

Usage::

    python scripts/make_demo_corpus.py [--language en|fa] [--out data/demo] [--jobs 2]

The text is fully deterministic (fixed seed). The audio is deterministic for a
given espeak-ng / flite version.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

import demo_corpus_fa
import inflect
import numpy as np
import soundfile as sf
import soxr

SEED = 20240611
SAMPLE_RATE = 22050
UTTS_PER_SPEAKER = 100
VAL_PER_SPEAKER = 4
# Sentences are dealt to the speakers in blocks of BLOCK, so raising UTTS_PER_SPEAKER adds
# clips without changing any existing one (the repository keeps its old audio as is).
BLOCK = 40
PEAK = 0.5  # peak-normalise to about -6 dBFS (quieter = smaller FLAC)
TRIM_DB = 40.0  # frames quieter than peak - TRIM_DB are "silence" at the edges
TRIM_PAD_S = 0.08  # silence kept at each end after trimming
MIN_WORDS, MAX_WORDS = 4, 25

# --------------------------------------------------------------------------- #
# Voices
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Voice:
    speaker: str
    engine: str  # "espeak-ng" or "flite"
    voice: str
    pitch: int | None = None  # espeak-ng -p (0-99)
    speed: int | None = None  # espeak-ng -s (words per minute)
    stretch: float | None = None  # flite duration_stretch (<1 = faster)
    description: str = ""


VOICES: list[Voice] = [
    Voice("spk1", "espeak-ng", "en-us", pitch=55, speed=175,
          description="espeak-ng en-us (male), mid pitch, moderate rate"),
    Voice("spk2", "espeak-ng", "en-gb+f3", pitch=90, speed=170,
          description="espeak-ng en-gb with f3 variant (female), high pitch"),
    Voice("spk3", "espeak-ng", "en-us+m7", pitch=8, speed=165,
          description="espeak-ng en-us with m7 variant (male), very low pitch, slightly slow"),
    Voice("spk4", "espeak-ng", "en-gb-scotland+f2", pitch=82, speed=185,
          description="espeak-ng en-gb-scotland with f2 variant (female), very high pitch, fast"),
    Voice("spk5", "flite", "slt", stretch=1.0, description="flite slt (US female, clustergen)"),
    Voice("spk6", "flite", "kal16", stretch=0.92, description="flite kal16 (US male, 16 kHz diphone)"),
    Voice("spk7", "flite", "awb", stretch=0.9, description="flite awb (Scottish male, clustergen)"),
    Voice("spk8", "flite", "rms", stretch=0.88, description="flite rms (US male, clustergen)"),
]

# --------------------------------------------------------------------------- #
# Sentence grammar (word lists written for this project)
# --------------------------------------------------------------------------- #

FIRST_NAMES = ["Alice", "Ben", "Clara", "Daniel", "Elena", "Frank", "Grace", "Henry",
               "Iris", "Jonah", "Karen", "Leo", "Maya", "Nathan", "Olivia", "Peter",
               "Rosa", "Samuel", "Tara", "Victor", "Wendy", "Yusuf", "Zoe", "Marcus"]
SURNAMES = ["Baker", "Carter", "Dalton", "Ellis", "Fisher", "Garcia", "Hughes", "Jensen",
            "Keller", "Lambert", "Moreno", "Novak", "Owens", "Palmer", "Quinn", "Russo",
            "Stone", "Turner", "Walsh", "Young"]
TITLES = {"Dr.": "Doctor", "Mr.": "Mister", "Mrs.": "Missus", "Ms.": "Miz", "Prof.": "Professor"}
ADJECTIVES = ["quiet", "bright", "old", "narrow", "heavy", "gentle", "broken", "tiny",
              "enormous", "green", "cold", "warm", "strange", "careful", "busy", "empty",
              "wooden", "shiny", "distant", "rusty", "fresh", "noisy", "patient", "clever",
              "muddy", "golden", "crowded", "silent", "curious", "lucky"]
NOUNS = ["lamp", "river", "garden", "letter", "bicycle", "window", "teacher", "kettle",
         "bridge", "market", "engine", "blanket", "station", "painter", "notebook",
         "harbor", "ladder", "basket", "village", "sailor", "clock", "bakery", "tower",
         "farmer", "museum", "violin", "orchard", "tunnel", "kitchen", "parrot", "canoe",
         "library", "pencil", "mountain", "doctor", "umbrella", "carpet", "island",
         "camera", "wagon"]
COUNT_NOUNS = ["apple", "book", "chair", "ticket", "candle", "stone", "bottle", "coin",
               "envelope", "shirt", "orange", "brick", "feather", "spoon", "box", "key",
               "map", "cup", "plate", "glove"]
VERBS_PAST_INTRANS = ["waited", "laughed", "shivered", "disappeared", "returned",
                      "whispered", "paused", "wandered", "slept", "shouted", "arrived",
                      "vanished", "smiled", "hesitated", "listened"]
VERBS_PAST_TRANS = ["painted", "repaired", "carried", "found", "cleaned", "opened",
                    "borrowed", "sold", "measured", "noticed", "dropped", "followed",
                    "described", "hid", "polished", "counted", "wrapped", "moved"]
VERBS_BASE = ["open", "check", "close", "clean", "find", "move", "carry", "paint",
              "fix", "count", "bring", "wrap", "label", "measure", "visit"]
PREPOSITIONS = ["near", "behind", "beside", "under", "across", "inside", "above", "past",
                "around", "toward"]
ADVERBS = ["slowly", "quietly", "suddenly", "carefully", "happily", "again", "early",
           "late", "twice", "at last"]
TIMES = ["this morning", "last night", "on Monday", "before dinner", "after lunch",
         "yesterday", "at dawn", "on Friday evening", "in the spring", "last winter",
         "every Sunday", "later today"]
CITIES = ["Springfield", "Riverton", "Oakdale", "Millbrook", "Fairview", "Ashford",
          "Lakewood", "Brookside", "Kingsport", "Westfield"]
STREETS = ["Elm", "Maple", "Hill", "Park", "Mill", "Cedar", "Water", "Church"]
FEELINGS = ["tired", "hungry", "surprised", "nervous", "cheerful", "puzzled", "proud",
            "sleepy", "worried", "delighted"]
CONNECTORS = [", and", ", but", ", so", " because", " while", ", although", "; then",
              " until", ", yet"]

_INFLECT = inflect.engine()


def say_number(n: int) -> str:
    words = _INFLECT.number_to_words(n, andword="")
    return words.replace(",", "").replace("  ", " ")


def say_year(y: int) -> str:
    if 2000 <= y <= 2009:
        return "two thousand" + ("" if y == 2000 else " " + say_number(y % 100))
    hi, lo = divmod(y, 100)
    if lo == 0:
        return say_number(hi) + " hundred"
    if lo < 10:
        return say_number(hi) + " oh " + say_number(lo)
    return say_number(hi) + " " + say_number(lo)


def say_ordinal(n: int) -> str:
    return _INFLECT.ordinal(say_number(n))


def say_money(dollars: int, cents: int = 0) -> str:
    d = say_number(dollars) + (" dollar" if dollars == 1 else " dollars")
    if cents:
        d += " and " + say_number(cents) + (" cent" if cents == 1 else " cents")
    return d


class Tok:
    """A piece of a sentence with a written form and a spoken (normalised) form."""

    def __init__(self, raw: str, norm: str | None = None):
        self.raw = raw
        self.norm = raw if norm is None else norm


def T(raw: str, norm: str | None = None) -> Tok:
    return Tok(raw, norm)


class Grammar:
    def __init__(self, rng: random.Random):
        self.r = rng

    def c(self, seq):
        return self.r.choice(seq)

    # ---- number-ish tokens ------------------------------------------------ #
    def small_count(self) -> tuple[Tok, int]:
        n = self.r.choice([2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 15, 17, 20, 24, 30, 36, 48, 75, 99])
        return T(str(n), say_number(n)), n

    def big_count(self) -> tuple[Tok, int]:
        n = self.r.choice([120, 250, 365, 500, 740, 1200, 2500, 3400, 10000, 48000])
        raw = f"{n:,}" if n >= 1000 else str(n)
        return T(raw, say_number(n)), n

    def year(self) -> Tok:
        y = self.r.randint(1850, 2029)
        return T(str(y), say_year(y))

    def money(self) -> Tok:
        dollars = self.r.choice([1, 2, 3, 5, 8, 10, 12, 20, 25, 40, 60, 99, 150, 300])
        cents = self.r.choice([0, 0, 0, 50, 25, 99, 5])
        raw = f"${dollars}" if not cents else f"${dollars}.{cents:02d}"
        return T(raw, say_money(dollars, cents))

    def percent(self) -> Tok:
        n = self.r.choice([5, 10, 15, 20, 25, 30, 40, 50, 60, 75, 80, 90])
        return T(f"{n}%", say_number(n) + " percent")

    def ordinal(self) -> Tok:
        n = self.r.choice([1, 2, 3, 4, 5, 7, 9, 10, 12, 21])
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10 if n % 100 not in (11, 12, 13) else 0, "th")
        return T(f"{n}{suffix}", say_ordinal(n))

    def hour(self) -> Tok:
        h = self.r.randint(1, 12)
        m = self.r.choice([0, 0, 15, 30, 45, 5])
        if m == 0:
            return T(f"{h} o'clock", f"{say_number(h)} o'clock")
        return T(f"{h}:{m:02d}", f"{say_number(h)} {'oh ' + say_number(m) if m < 10 else say_number(m)}")

    # ---- people / things -------------------------------------------------- #
    def person(self) -> list[Tok]:
        k = self.r.random()
        if k < 0.35:
            title = self.c(list(TITLES))
            return [T(title, TITLES[title]), T(self.c(SURNAMES))]
        if k < 0.75:
            return [T(self.c(FIRST_NAMES))]
        if k < 0.9:
            return [T("the"), T(self.c(["teacher", "baker", "farmer", "pilot", "driver", "nurse", "captain"]))]
        return [T(self.c(["my", "our", "her", "his"])),
                T(self.c(["neighbor", "cousin", "uncle", "aunt", "friend", "sister", "brother"]))]

    def thing(self, article: str | None = None) -> list[Tok]:
        noun = self.c(NOUNS)
        if self.r.random() < 0.35:
            phrase = f"{self.c(ADJECTIVES)} {noun}"
        else:
            phrase = noun
        if article is None:
            article = self.c(["the", "the", "a", "that", "this", "our"])
        if article == "a":
            return [T(_INFLECT.a(phrase))]
        return [T(article), T(phrase)]

    def counted(self, big: bool = False) -> list[Tok]:
        num, n = self.big_count() if big else self.small_count()
        noun = self.c(COUNT_NOUNS)
        adj = self.c(ADJECTIVES) + " " if self.r.random() < 0.3 else ""
        return [num, T(adj + _INFLECT.plural(noun, n))]

    def place(self) -> list[Tok]:
        k = self.r.random()
        if k < 0.5:
            return [T(self.c(PREPOSITIONS)), *self.thing(self.c(["the", "the", "a"]))]
        if k < 0.75:
            return [T("in"), T(self.c(CITIES))]
        num, _ = self.small_count()
        return [T("on"), T(self.c(STREETS)), T("St.", "Street")] if self.r.random() < 0.5 else \
            [T("at"), num, T(self.c(STREETS)), T("Ave.", "Avenue")]

    # ---- clauses ---------------------------------------------------------- #
    def clause(self) -> list[Tok]:
        k = self.r.randrange(18)
        c = self.c
        if k == 14:
            return [*self.person(), T(c(VERBS_PAST_INTRANS)), T(c(ADVERBS))]
        if k == 15:
            return [*self.person(), T("felt"), T(c(FEELINGS))]
        if k == 16:
            return [*self.person(), T(c(VERBS_PAST_TRANS)), *self.counted()]
        if k == 17:
            return [T("it was"), self.hour(), T("in"), T(c(CITIES))]
        if k == 0:
            return [*self.thing("the"), T(c(VERBS_PAST_INTRANS)), *self.place()]
        if k == 1:
            return [*self.person(), T(c(VERBS_PAST_TRANS)), *self.counted(), T(c(TIMES))]
        if k == 2:
            return [*self.person(), T("paid"), self.money(), T("for"), *self.thing("a")]
        if k == 3:
            return [T("in"), self.year(), T("the"), T(c(NOUNS)), T(c(VERBS_PAST_INTRANS)), T(c(ADVERBS))]
        if k == 4:
            return [*self.person(), T(c(VERBS_PAST_TRANS)), *self.thing(), T(c(ADVERBS))]
        if k == 5:
            return [T("about"), self.percent(), T("of the"), T(_INFLECT.plural(c(COUNT_NOUNS))),
                    T("were"), T(c(ADJECTIVES))]
        if k == 6:
            return [*self.person(), T("felt"), T(c(FEELINGS)), T(c(TIMES))]
        if k == 7:
            return [T("the"), self.ordinal(), T(c(NOUNS)), T("arrived at"), self.hour()]
        if k == 8:
            return [*self.person(), T("lived"), *self.place(), T("until"), self.year()]
        if k == 9:
            return [T("we counted"), *self.counted(big=self.r.random() < 0.4), *self.place()]
        if k == 10:
            return [*self.person(), T(c(VERBS_PAST_INTRANS)), T(c(TIMES))]
        if k == 11:
            return [T("the"), T(c(ADJECTIVES)), T(c(NOUNS)), T("cost"), self.money()]
        if k == 12:
            return [*self.person(), T("and"), *self.person(), T(c(VERBS_PAST_TRANS)), *self.thing("the")]
        return [*self.thing("the"), T("was"), T(c(["very", "rather", "quite", "not"])), T(c(ADJECTIVES))]

    def sentence(self) -> list[Tok]:
        """One sentence as a list of tokens; the last token carries the final punctuation."""
        k = self.r.random()
        c = self.c
        if k < 0.10:  # question
            toks = [T(c(["did", "could", "would", "should"])), T(c(["you", "we", "they"])),
                    T(c(VERBS_BASE)), *self.thing(), T(c(TIMES) + "?")]
            return toks
        if k < 0.16:  # exclamation
            return [T("what"), *self.thing("a"), T(c(["that was", "we saw", "you found"]) + "!")]
        if k < 0.24:  # request
            toks = [T("please"), T(c(VERBS_BASE)), *self.thing("the")]
            if self.r.random() < 0.5:
                toks += [T(c(["before", "after"])), T(c(["noon", "dinner", "the meeting", "Friday"]))]
            toks[-1] = T(toks[-1].raw + ".")
            return toks
        if k < 0.30:  # list
            nouns = self.r.sample(COUNT_NOUNS, 3)
            return [T(c(["we need", "bring", "she packed", "he forgot"])),
                    T(_INFLECT.a(nouns[0]) + ","), T(_INFLECT.a(nouns[1]) + ","),
                    T("and"), T(_INFLECT.a(nouns[2]) + ".")]
        # statements: 1-3 clauses
        n_clauses = 1 if k < 0.965 else (2 if k < 0.995 else 3)
        toks = self.clause()
        for _ in range(n_clauses - 1):
            conn = c(CONNECTORS)
            if conn[0] in ",;":  # punctuation sticks to the previous word
                toks[-1] = T(toks[-1].raw + conn[0], toks[-1].norm + conn[0])
            toks.append(T(conn.lstrip(",; ")))
            toks.extend(self.clause())
        end = "!" if self.r.random() < 0.04 else "."
        last = toks[-1]
        raw_end = "" if end == "." and last.raw.endswith(".") else end  # "St." ends the sentence
        toks[-1] = T(last.raw + raw_end, last.norm + end)
        return toks

    def say(self) -> tuple[str, str]:
        return render(self.sentence())


def render(toks: list[Tok]) -> tuple[str, str]:
    raw = " ".join(t.raw for t in toks)
    norm = " ".join(t.norm for t in toks)

    def cap(s: str) -> str:
        s = re.sub(r"\s+", " ", s).strip()
        return s[0].upper() + s[1:]

    return cap(raw), cap(norm)


def make_sentences(n: int, seed: int = SEED, grammar=Grammar) -> list[tuple[str, str]]:
    """``n`` distinct (raw, normalised) sentences from ``grammar`` (English or Persian)."""
    rng = random.Random(seed)
    g = grammar(rng)
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    while len(out) < n:
        raw, norm = g.say()
        n_words = len(norm.split())
        if not (MIN_WORDS <= n_words <= MAX_WORDS) or raw in seen:
            continue
        assert "|" not in raw and "|" not in norm and '"' not in raw
        seen.add(raw)
        out.append((raw, norm))
    return out


# --------------------------------------------------------------------------- #
# Synthesis
# --------------------------------------------------------------------------- #


def synthesize(voice: Voice, text: str, tmp_wav: str) -> tuple[np.ndarray, int]:
    if voice.engine == "espeak-ng":
        cmd = ["espeak-ng", "-v", voice.voice, "-w", tmp_wav]
        if voice.pitch is not None:
            cmd += ["-p", str(voice.pitch)]
        if voice.speed is not None:
            cmd += ["-s", str(voice.speed)]
        cmd += ["--", text]
    elif voice.engine == "flite":
        cmd = ["flite", "-voice", voice.voice]
        if voice.stretch is not None:
            cmd += ["--setf", f"duration_stretch={voice.stretch}"]
        cmd += ["-t", text, "-o", tmp_wav]
    else:
        raise ValueError(voice.engine)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    audio, sr = sf.read(tmp_wav, dtype="float64", always_2d=True)
    return audio.mean(axis=1), sr


def trim_silence(x: np.ndarray, sr: int) -> np.ndarray:
    frame = max(1, int(0.010 * sr))
    n = len(x) // frame
    if n == 0:
        return x
    rms = np.sqrt((x[: n * frame].reshape(n, frame) ** 2).mean(axis=1) + 1e-12)
    thresh = rms.max() * 10 ** (-TRIM_DB / 20)
    voiced = np.nonzero(rms > thresh)[0]
    if len(voiced) == 0:
        return x
    pad = int(TRIM_PAD_S * sr)
    start = max(0, voiced[0] * frame - pad)
    end = min(len(x), (voiced[-1] + 1) * frame + pad)
    return x[start:end]


def render_one(job: tuple[str, Voice, str, str]) -> dict:
    utt_id, voice, text, out_path = job
    with tempfile.TemporaryDirectory(prefix="demo_tts_") as tmp:
        audio, sr = synthesize(voice, text, os.path.join(tmp, "out.wav"))
    if sr != SAMPLE_RATE:
        audio = soxr.resample(audio, sr, SAMPLE_RATE, quality="HQ")
    audio = trim_silence(audio, SAMPLE_RATE)
    peak = float(np.abs(audio).max()) if len(audio) else 0.0
    if peak <= 1e-4:
        raise RuntimeError(f"{utt_id}: synthesiser produced silence for {text!r}")
    audio = audio * (PEAK / peak)
    sf.write(out_path, audio.astype(np.float32), SAMPLE_RATE, format="FLAC", subtype="PCM_16",
             compression_level=1.0)
    return {
        "id": utt_id,
        "seconds": len(audio) / SAMPLE_RATE,
        "rms_db": float(20 * np.log10(np.sqrt(np.mean(audio**2)) + 1e-12)),
        "src_sr": sr,
    }


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #

# The contents table both corpora's READMEs share (filled in by write_readme).
CONTENTS = """| | |
|---|---|
| utterances | {n_utts} |
| speakers | {n_spk} ({per_spk} utterances each) |
| total audio | {total_min:.1f} minutes ({total_s:.0f} s); clips {min_s:.1f}-{max_s:.1f} s, mean {mean_s:.1f} s |
| audio format | FLAC, mono, 22050 Hz, 16-bit, peak-normalised to about -6 dBFS |
| size | about {size_mb:.1f} MB |
"""

README_TEMPLATE = """# MyXTTS demo corpus

A small multi-speaker English corpus bundled with MyXTTS so that the whole
pipeline (prepare, train, evaluate, bench) can be exercised offline, in minutes,
without downloading anything. It is **synthetic speech**, useful for smoke tests,
demos and benchmarks of the data path, and large enough (100 sentences per voice)
for a small model to learn to say sentences it has not heard within an hour on a
CPU; too small and too robotic for a voice worth shipping.

## Contents

{contents}
```
data/demo/
  metadata.csv      ID|raw text|normalized text|speaker
  wavs/ID.flac
  val.txt           held-out utterance ids, one per line
  README.md
```

`metadata.csv` is LJSpeech-style with a fourth column for the speaker, no header
and no quoting, UTF-8, one utterance per line, for example:

```
{example}
```

* column 1: utterance id `spkN-NNNN`; the audio is `wavs/<id>.flac`
* column 2: raw text, with digits, `$`, `%`, ordinals, times and abbreviations
  (`Dr.`, `Mr.`, `Mrs.`, `Ms.`, `Prof.`, `St.`, `Ave.`) as a text front end sees them
* column 3: normalised text: the same sentence with numbers, years, money,
  percentages, ordinals, clock times and those abbreviations spelled out. The
  audio was synthesised from this column, so it matches it word for word.
* column 4: speaker name

Numbers are spelled in the usual way (`twenty-five`, `nineteen ninety-four`,
`one hundred twenty`, `nine oh five`); `Ms.` is written out as `Miz`. Clips are
short (mean about {mean_s:.1f} s) to keep the repository small.

## Train / validation split

The last {val_per_spk} utterances of each speaker in metadata order are held out
for validation; their ids ({n_val} in all) are listed in `val.txt`, one per line.
Everything else is training data.

## Voices

| speaker | engine | voice | settings |
|---|---|---|---|
{voice_rows}

## How it was generated

```
python scripts/make_demo_corpus.py            # writes data/demo/ (overwrites it)
python scripts/make_demo_corpus.py --jobs 4   # more parallel synthesis processes
```

The script builds {n_utts} distinct sentences (4-25 words) from a small template
grammar and word lists written for this project, with a fixed random seed
({seed}), so the text is identical on every run. Each sentence is synthesised by
one voice with espeak-ng or flite, resampled to 22050 Hz with soxr, trimmed of
leading/trailing silence (keeping {pad_ms} ms), peak-normalised and written as
FLAC. The audio is reproducible for a given espeak-ng / flite version
(generated here with {versions}).

## Licence

The sentences and the corpus are generated by the MyXTTS project and are
released under the same licence as the project (Apache-2.0). The audio is the output of
espeak-ng (a GPL-3.0-or-later program) and flite (BSD-style licence, voices
from CMU). A program's licence does not normally extend to the output it
produces, so the project treats this audio as its own; check for yourself if
redistribution terms matter to you. No recordings of real people and no text
from existing books or corpora are included.
"""


@dataclass(frozen=True)
class Corpus:
    """What one language's demo corpus is made of."""

    folder: str  # under data/
    voices: list[Voice]
    grammar: type  # Grammar(rng).say() → (raw, normalised) sentence
    readme: str
    language: str | None  # metadata's fifth column; None: four columns, as the English corpus has


CORPORA = {
    "en": Corpus("demo", VOICES, Grammar, README_TEMPLATE, None),
    "fa": Corpus("demo-fa", [Voice(spk, "espeak-ng", v, pitch=p, speed=s, description=d)
                             for spk, v, p, s, d in demo_corpus_fa.VOICES],
                 demo_corpus_fa.Grammar, demo_corpus_fa.README, "fa"),
}


def tool_versions(engines: set[str]) -> str:
    parts = []
    if "espeak-ng" in engines:
        out = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True).stdout
        m = re.search(r"text-to-speech:\s*(\S+)", out)
        parts.append(f"espeak-ng {m.group(1) if m else out.strip()}")
    if "flite" in engines:
        out = subprocess.run(["flite", "--version"], capture_output=True, text=True).stdout
        m = re.search(r"flite-(\S+)", out)
        parts.append(f"flite {m.group(1) if m else out.strip()}")
    return " and ".join(parts) or "unknown versions"


def check_tools(voices: list[Voice]) -> None:
    """Exit with one line where a synthesiser or one of its voices is missing."""
    for tool in {v.engine for v in voices}:
        if shutil.which(tool) is None:
            sys.exit(f"error: {tool} not found on PATH (apt-get install -y {tool})")
    if "flite" in {v.engine for v in voices}:
        listed = subprocess.run(["flite", "-lv"], capture_output=True, text=True).stdout.split()
        missing = [v.voice for v in voices if v.engine == "flite" and v.voice not in listed]
        if missing:
            sys.exit(f"error: flite voices not available: {missing}")


def plan(corpus: Corpus, wav_dir: Path) -> tuple[list, list[str], list[str]]:
    """(synthesis jobs, metadata rows, held-out ids) of ``corpus``."""
    voices = corpus.voices
    n_blocks = -(-UTTS_PER_SPEAKER // BLOCK)
    sentences = make_sentences(n_blocks * BLOCK * len(voices), grammar=corpus.grammar)
    language = f"|{corpus.language}" if corpus.language else ""
    jobs, rows, val_ids = [], [], []
    for s, voice in enumerate(voices):
        for i in range(UTTS_PER_SPEAKER):
            block, j = divmod(i, BLOCK)
            raw, norm = sentences[(block * len(voices) + s) * BLOCK + j]
            utt_id = f"{voice.speaker}-{i + 1:04d}"
            rows.append(f"{utt_id}|{raw}|{norm}|{voice.speaker}{language}")
            jobs.append((utt_id, voice, norm, str(wav_dir / f"{utt_id}.flac")))
            if i >= UTTS_PER_SPEAKER - VAL_PER_SPEAKER:
                val_ids.append(utt_id)
    return jobs, rows, val_ids


def write_readme(corpus: Corpus, out: Path, rows: list[str], n_val: int, secs: np.ndarray) -> None:
    voice_rows = "\n".join(
        f"| {v.speaker} | {v.engine} | `{v.voice}` | "
        + (f"pitch `-p {v.pitch}`, speed `-s {v.speed}` wpm; " if v.engine == "espeak-ng"
           else f"`--setf duration_stretch={v.stretch}`; ")
        + v.description + " |"
        for v in corpus.voices)
    figures = dict(
        n_utts=len(rows), n_spk=len(corpus.voices), per_spk=UTTS_PER_SPEAKER,
        total_min=secs.sum() / 60, total_s=secs.sum(), min_s=secs.min(), max_s=secs.max(),
        mean_s=secs.mean(), size_mb=0.0, example="\n".join(rows[i] for i in (0, 1, UTTS_PER_SPEAKER)),
        val_per_spk=VAL_PER_SPEAKER, n_val=n_val, voice_rows=voice_rows, seed=SEED,
        pad_ms=int(TRIM_PAD_S * 1000), versions=tool_versions({v.engine for v in corpus.voices}))
    readme = corpus.readme.format(contents=CONTENTS.format(**figures), **figures)
    (out / "README.md").write_text(readme, encoding="utf-8")
    total_bytes = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    readme = readme.replace("about 0.0 MB", f"about {total_bytes / 1e6:.1f} MB")
    (out / "README.md").write_text(readme, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--language", choices=sorted(CORPORA), default="en")
    ap.add_argument("--out", type=Path, help="default data/demo (en), data/demo-fa (fa)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    corpus = CORPORA[args.language]
    check_tools(corpus.voices)

    out: Path = args.out or root / "data" / corpus.folder
    wav_dir = out / "wavs"
    if wav_dir.exists():
        shutil.rmtree(wav_dir)
    wav_dir.mkdir(parents=True)
    jobs, rows, val_ids = plan(corpus, wav_dir)
    with Pool(max(1, args.jobs)) as pool:
        stats = []
        for k, st in enumerate(pool.imap(render_one, jobs, chunksize=4), 1):
            stats.append(st)
            if k % 50 == 0 or k == len(jobs):
                print(f"  synthesised {k}/{len(jobs)}", flush=True)

    (out / "metadata.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (out / "val.txt").write_text("\n".join(val_ids) + "\n", encoding="utf-8")
    secs = np.array([s["seconds"] for s in stats])
    write_readme(corpus, out, rows, len(val_ids), secs)
    summarise(corpus, out, stats)
    return 0


def summarise(corpus: Corpus, out: Path, stats: list[dict]) -> None:
    secs = np.array([s["seconds"] for s in stats])
    rms = np.array([s["rms_db"] for s in stats])
    audio_bytes = sum(f.stat().st_size for f in (out / "wavs").iterdir())
    total_bytes = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"wrote {out}")
    print(f"  utterances : {len(stats)}")
    print(f"  speakers   : {len(corpus.voices)}")
    print(f"  duration   : {secs.sum() / 3600:.3f} h ({secs.sum():.0f} s); "
          f"clip min/mean/max {secs.min():.2f}/{secs.mean():.2f}/{secs.max():.2f} s")
    print(f"  loudness   : RMS min/mean/max {rms.min():.1f}/{rms.mean():.1f}/{rms.max():.1f} dBFS")
    print(f"  size       : {total_bytes / 1e6:.2f} MB total ({audio_bytes / 1e6:.2f} MB audio)")
    for v in corpus.voices:
        sel = [s["seconds"] for s in stats if s["id"].startswith(v.speaker + "-")]
        print(f"    {v.speaker} {v.engine:9s} {v.voice:18s} {sum(sel):6.1f} s  "
              f"mean {np.mean(sel):.2f} s  max {max(sel):.2f} s")


if __name__ == "__main__":
    raise SystemExit(main())
