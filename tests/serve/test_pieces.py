"""Pieces join into the whole; word times follow the alignment; formats are what they say."""
from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf
import torch

from myxtts.config import load
from myxtts.models.vocoder import build_generator
from myxtts.serve import encode, pieces, timings
from myxtts.vocode import MelToWave

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def vocoder():
    """An untrained vocoder of the real architecture: the receptive field is the point, not the sound."""
    cfg = load("tiny")
    torch.manual_seed(0)
    return cfg, MelToWave(cfg.audio, build_generator(cfg).eval(), "vocoder")


def test_pieces_vocoded_with_context_are_the_whole_sentence_exactly(vocoder):
    cfg, to_wave = vocoder
    mel = torch.randn(150, cfg.audio.n_mels) - 5  # (T, M)
    parts = list(pieces.pieces(mel, to_wave, cfg.audio.hop_length))
    assert len(parts) == 3 and parts[0].size < parts[1].size  # a short first piece
    whole = to_wave(mel)
    joined = np.concatenate(parts)
    assert joined.size == whole.size == 150 * cfg.audio.hop_length
    assert np.abs(joined - whole).max() < 1e-5 * np.abs(whole).max() + 1e-7  # no seam to click on


def test_where_windows_disagree_pieces_are_cross_faded_not_cut():
    """A mel-to-audio step whose windows disagree (Griffin-Lim's do): here each window renders a
    constant, its own length. The joined pieces keep the length and ramp between levels, never
    stepping more than a fade's share of the difference from one sample to the next."""
    hop = 256
    to_wave = lambda m: np.full(m.shape[0] * hop, float(m.shape[0]), np.float32)
    parts = list(pieces.pieces(torch.zeros(200, 80), to_wave, hop))
    joined = np.concatenate(parts)
    assert joined.size == 200 * hop and len(parts) == 3
    levels = sorted({float(x) for x in joined[::hop]})  # 40, 136, 112 frames: the three windows
    assert max(np.abs(np.diff(joined))) <= (max(levels) - min(levels)) / (pieces.FADE * hop) + 1e-4


def test_word_times_follow_the_durations():
    # tokens: "h i _ y o u . <eos>"; durations 2, 2, 2, 4, 4, 2, 2, 2 frames, r = 2 → steps
    durations = [2, 2, 2, 4, 4, 2, 2, 2]
    tokens = np.repeat(np.arange(8), np.array(durations) // 2)  # the token of each step
    attn = np.eye(8)[tokens]  # (S, Tt) hard alignment at the step rate
    symbols = ["h", "i", " ", "y", "o", "u", ".", "<eos>"]
    words = timings.words("hi you.", symbols, attn, sum(durations), 2, 0.01, offset=1.0)
    assert [(w.word, round(w.start, 3), round(w.end, 3)) for w in words] == [("hi", 1.0, 1.04), ("you", 1.06, 1.16)]


def test_pcm_is_24khz_s16le_and_streams_as_the_whole():
    wav = np.sin(np.arange(22050) / 10).astype(np.float32) * 0.5
    whole = encode.encode(wav, 22050, "pcm")
    stream = encode.PcmStream(22050)
    parts = b"".join(stream.feed(wav[a:a + 3000]) for a in range(0, wav.size, 3000)) + stream.feed(
        np.zeros(0, np.float32), last=True)
    assert len(whole) == len(parts) == 2 * 24000
    a, b = (np.frombuffer(x, "<i2").astype(np.float32) for x in (whole, parts))
    assert np.abs(a - b).max() < 40  # of 32767: soxr's streaming and one-shot filters agree


def test_file_formats_decode_at_their_rates():
    wav = np.sin(np.arange(22050) / 10).astype(np.float32) * 0.5
    for fmt in ("wav", "flac", "mp3", "opus"):
        data, sr = sf.read(io.BytesIO(encode.encode(wav, 22050, fmt)))
        assert sr == encode.rate_of(fmt, 22050) and abs(data.shape[0] / sr - 1.0) < 0.1


def test_windows_of_one_length_vocoded_together_are_each_their_own(vocoder):
    cfg, to_wave = vocoder
    windows = [torch.randn(n, cfg.audio.n_mels) - 5 for n in (40, 64, 40, 40)]
    together = pieces.vocode(to_wave, windows)
    for w, got in zip(windows, together):
        alone = to_wave(w)
        assert got.shape == alone.shape and np.abs(got - alone).max() < 1e-5 * np.abs(alone).max() + 1e-7
