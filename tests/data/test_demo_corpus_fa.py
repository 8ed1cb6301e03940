"""The bundled Persian demo corpus (data/demo-fa, made by scripts/make_demo_corpus.py --language
fa) is whole, and the text front end reads every sentence of it as its audio says it."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import soundfile as sf

from myxtts.config import TextConfig
from myxtts.data.manifest import read_ljspeech
from myxtts.text import TextProcessor, phonemes_missing
from myxtts.text.languages import normalize

CORPUS = Path(__file__).parents[2] / "data" / "demo-fa"
ROWS = [line.split("|") for line in (CORPUS / "metadata.csv").read_text(encoding="utf-8").splitlines()]


def test_every_row_has_its_flac_at_22050_hz_mono_and_names_its_language():
    assert len(ROWS) >= 300 and all(len(row) == 5 and row[4] == "fa" for row in ROWS)
    assert len({row[0] for row in ROWS}) == len(ROWS)
    assert set(Counter(row[3] for row in ROWS).values()) == {100}  # as many per voice as English
    for uid, *_ in ROWS:
        info = sf.info(CORPUS / "wavs" / f"{uid}.flac")
        assert (info.samplerate, info.channels, info.subtype) == (22050, 1, "PCM_16"), uid
    utts, problems = read_ljspeech(CORPUS)[:2]
    assert not problems and {u.language for u in utts} == {"fa"}


def test_val_ids_are_rows_of_the_corpus():
    held_out = (CORPUS / "val.txt").read_text(encoding="utf-8").split()
    assert held_out and set(held_out) <= {row[0] for row in ROWS}


def test_the_text_exercises_the_persian_front_end():
    raw = "".join(row[1] for row in ROWS)
    for what in ("۲۳۴۵۶۷۸۹", "0123456789", "\u200c", "،", "؟", "«»"):
        assert any(ch in raw for ch in what), what  # digits of both scripts, ZWNJ, ، ؟ « »


@pytest.mark.parametrize("mode", ["characters", "phonemes"])
def test_the_front_end_reads_the_raw_text_as_the_audio_says_it_dropping_nothing(mode):
    if mode == "phonemes" and phonemes_missing():
        pytest.skip(phonemes_missing())
    text = TextProcessor(replace(TextConfig(), mode=mode, language="fa"))
    for uid, raw, spoken, *_ in ROWS:
        assert normalize(raw, "fa") == normalize(spoken, "fa"), uid
        assert text.symbols(raw)[1] == [], uid
