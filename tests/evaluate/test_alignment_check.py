"""benchmarks/alignment_check.py's references: the pauses a real recording holds, word starts
from the aligner's tokens, and the in-order matching of two lists of start times."""
import pytest
import torch

from benchmarks.alignment_check import inner_pauses, match, word_starts
from myxtts import audio
from myxtts.config import load

from .conftest import LJ, SR


def test_the_pauses_of_a_real_clip_are_its_two_commas():
    """"Printing, in the only sense ... concerned, differs ...": the reader pauses at the two
    commas and nowhere else for as long (leading and trailing silence do not count)."""
    a = load("tiny").audio
    wav = audio.preprocess(audio.load_audio(LJ / "wavs" / "LJ001-0001.wav", SR), a)
    mel = torch.from_numpy(audio.mel_spectrogram(wav, a))  # (T, M)
    seconds = [(s * a.hop_length / SR, e * a.hop_length / SR) for s, e in inner_pauses(mel)]
    assert len(seconds) == 2, seconds
    (s1, e1), (s2, e2) = seconds
    assert 0.5 < s1 < e1 < 1.0 and 3.9 < s2 < e2 < 4.7, seconds


def test_a_word_starts_at_its_first_sounding_token_after_a_pause_token():
    kinds = ["phone", "stress", "phone", "pause", "pause", "stress", "phone", "phone", "pause"]
    dur = [2, 1, 3, 4, 1, 2, 2, 1, 5]
    assert word_starts(kinds, dur, 0.5) == [0.0, 5.5]


def test_matching_pairs_each_start_once_in_order_and_skips_the_extra_ones():
    """espeak-ng writes "in the" as one word: the aligner has one start where Whisper has two."""
    aligner = [0.02, 0.61, 1.40]
    whisper = [0.0, 0.60, 0.75, 1.38]
    assert match(aligner, whisper) == [(0.02, 0.0), (0.61, 0.60), (1.40, 1.38)]
    assert match([], whisper) == []
    assert match([0.0, 5.0], [2.5]) == []  # 2.5 s from either: dearer than leaving all three
    assert match([1.0], [1.0 + 0.1]) == [pytest.approx((1.0, 1.1))]
