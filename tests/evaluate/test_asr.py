"""The listener itself: it must understand real speech, and must not understand silence."""
import numpy as np
import torch

from myxtts import audio
from myxtts.config import load
from myxtts.evaluate.metrics import normalize_for_scoring, wer

from .conftest import SR, lj_text, lj_wav

CLIPS = ["LJ001-0004", "LJ001-0008"]
SHORT_CLIPS = ["LJ001-0002", "LJ001-0008"]  # Griffin-Lim is the slow part: the two shortest clips
# Measured (tiny.en, greedy): 0 % on these clips, for the recordings and for Griffin-Lim copy
# synthesis (on all eight fixture clips: 3.8 % and 4.6 %). The bounds leave room for other CPUs.
RECORDING_WER_MAX = 0.15
COPY_SYNTHESIS_WER_MAX = 0.25


def test_reads_real_recordings(listener):
    hyps = [listener.asr.transcribe(lj_wav(c), SR) for c in CLIPS]
    assert wer([lj_text(c) for c in CLIPS], hyps) <= RECORDING_WER_MAX, hyps


def test_reads_griffin_lim_copy_synthesis_of_a_real_clip(listener):
    a = load("tiny").audio
    refs, hyps = [], []
    for c in SHORT_CLIPS:
        mel = torch.from_numpy(audio.mel_spectrogram(audio.preprocess(lj_wav(c), a), a))  # (T, M)
        hyps.append(listener.asr.transcribe(audio.griffin_lim(mel, a).numpy(), SR))
        refs.append(lj_text(c))
    assert wer(refs, hyps) <= COPY_SYNTHESIS_WER_MAX, hyps


def test_silence_and_noise_score_as_failures(listener):
    text = lj_text("LJ001-0004")
    silence = np.zeros(3 * SR, dtype=np.float32)
    noise = np.random.default_rng(0).normal(0, 0.1, 3 * SR).astype(np.float32)
    for wav in (silence, noise):
        assert wer([text], [listener.asr.transcribe(wav, SR)]) >= 0.9


def test_word_times_follow_the_words_in_order(listener):
    """Whisper's word timestamps: the transcript's words, in order, each span inside the clip.
    Words as scoring reads them: the timed pass decodes again and may punctuate otherwise (on
    an AMD EPYC it dropped a comma the plain transcript kept)."""
    wav = lj_wav("LJ001-0001")
    words = listener.asr.words(wav, SR)
    timed = normalize_for_scoring(" ".join(w for w, _, _ in words))
    assert timed == normalize_for_scoring(listener.asr.transcribe(wav, SR)) != ""
    starts = [s for _, s, _ in words]
    assert starts == sorted(starts) and starts[-1] > starts[0], words
    assert all(0 <= s <= e <= len(wav) / SR + 0.1 for _, s, e in words), words
