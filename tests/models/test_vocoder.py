"""The Fourier-head vocoder: T mel frames → exactly T * hop samples, its inverse STFT undoes the
analysis framing, its magnitudes start from what the mel says, and its losses train every
weight."""
from pathlib import Path

import pytest
import torch

from myxtts.audio import LOG_FLOOR, MelSpectrogram, load_audio, magnitude_from_mel
from myxtts.config import AudioConfig, VocoderConfig
from myxtts.models.vocoder import InverseSTFT, VocosGenerator, random_segments, reconstruction_loss, stft_loss
from myxtts.models.xtts import count_parameters


def test_generator_output_length():
    gen = VocosGenerator(VocoderConfig(), AudioConfig())
    assert 2.7e6 < count_parameters(gen) < 2.9e6
    with torch.no_grad():
        wav = gen(torch.randn(2, 7, 80) - 5)
    assert wav.shape == (2, 7 * 256) and torch.isfinite(wav).all()


@pytest.mark.parametrize("n_fft, hop", [(1024, 256), (800, 200), (512, 128)])
def test_inverse_stft_undoes_the_analysis_framing(n_fft, hop):
    """The analysis STFT of MelSpectrogram (reflect pad (n_fft - hop) / 2, no centring) followed
    by InverseSTFT gives the waveform back, sample for sample, away from the padded edges."""
    a = AudioConfig(n_fft=n_fft, hop_length=hop, win_length=n_fft)
    wav = torch.randn(2, 30 * hop, generator=torch.Generator().manual_seed(0)) * 0.3
    m = MelSpectrogram(a)
    pad = (n_fft - hop) // 2
    x = torch.nn.functional.pad(wav.unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
    spec = torch.stft(x, n_fft, hop, n_fft, m.window, center=False, return_complex=True)  # (B, F, 30)
    back = InverseSTFT(n_fft, hop, n_fft)(spec)
    assert back.shape == wav.shape
    torch.testing.assert_close(back[:, n_fft:-n_fft], wav[:, n_fft:-n_fft], atol=1e-4, rtol=1e-4)


def test_win_length_other_than_n_fft_is_refused():
    with pytest.raises(ValueError, match="win_length"):
        VocosGenerator(VocoderConfig(), AudioConfig(win_length=800))


def _speech(a: AudioConfig) -> torch.Tensor:
    """One real clip of the demo corpus, (1, S)."""
    wav = load_audio(Path(__file__).parents[2] / "data/demo/wavs/spk5-0097.flac", a.sample_rate)
    return torch.from_numpy(wav[: len(wav) // a.hop_length * a.hop_length])[None]


def _lsd_db(mag: torch.Tensor, ref: torch.Tensor) -> float:
    """Log-spectral distance (dB) between two (F, T) magnitudes, RMS over bins, mean over frames."""
    db = (20 * torch.log10(x.clamp(min=LOG_FLOOR)) for x in (mag, ref))
    return float((next(db) - next(db)).pow(2).mean(0).sqrt().mean())


def test_the_magnitudes_a_mel_gives_are_near_the_speech_it_came_from():
    """A real clip's mel read back through magnitude_from_mel: non-negative, within 9 dB of the
    clip's own STFT over the full band (8.3 measured), where the pseudo-inverse, with its
    negative holes, is 17 dB off and a flat spectrum at each frame's level 40; and its mel is
    the clip's (0.21 mean log difference measured)."""
    a = AudioConfig()
    mel_fn = MelSpectrogram(a)
    wav = _speech(a)
    true = mel_fn.magnitude(wav)[0]  # (F, T)
    mel = mel_fn(wav)[0]  # (T, M)
    inverse = magnitude_from_mel(a)  # (F, M)
    assert inverse.shape == (a.n_fft // 2 + 1, a.n_mels) and (inverse >= 0).all()
    read = inverse @ mel.exp().T  # (F, T)
    pinv = (torch.linalg.pinv(mel_fn.basis) @ mel.exp().T).clamp(min=LOG_FLOOR)
    flat = true.mean(0, keepdim=True).expand_as(true)
    assert _lsd_db(read, true) < 9 < 15 < _lsd_db(pinv, true)
    assert _lsd_db(read, true) < _lsd_db(flat, true) - 3
    again = torch.log(torch.clamp(mel_fn.basis @ read, min=LOG_FLOOR)).T  # (T, M)
    assert float((again - mel).abs().mean()) < 0.3


def test_the_head_corrects_the_mel_s_magnitudes_only_with_the_prior():
    """With the head's output zeroed the generator's magnitudes are what the mel gives (and 1
    everywhere without the prior, as model files before format 6 were)."""
    a = AudioConfig()
    mel = MelSpectrogram(a)(_speech(a))[:, :50]  # (1, 50, M)
    for prior in (True, False):
        gen = VocosGenerator(VocoderConfig(magnitude_prior=prior), a)
        torch.nn.init.zeros_(gen.head.weight)
        with torch.no_grad():
            mag, _ = gen.spectrum(mel)  # (1, F, 50)
        want = (magnitude_from_mel(a) @ mel[0].exp().T).clamp(min=LOG_FLOOR) if prior else torch.ones(())
        torch.testing.assert_close(mag[0], want.expand_as(mag[0]), rtol=1e-4, atol=1e-7)


def test_stft_loss_is_zero_for_the_same_audio_and_grows_with_a_wrong_phase():
    wav = torch.randn(1, 8192, generator=torch.Generator().manual_seed(1)) * 0.1
    assert stft_loss(wav, wav) < 1e-5
    # the same magnitudes with random phases (what an untrained phase head gives) cost a lot
    spec = torch.stft(wav, 1024, 256, window=torch.hann_window(1024), return_complex=True)
    phase = torch.rand(spec.shape, generator=torch.Generator().manual_seed(2)) * 6.283
    scrambled = torch.istft(spec.abs() * torch.exp(1j * phase), 1024, 256,
                            window=torch.hann_window(1024), length=wav.shape[1])
    assert stft_loss(scrambled, wav) > 0.3


def test_segments_and_losses_train_every_weight():
    a, v = AudioConfig(), VocoderConfig()
    mel_fn = MelSpectrogram(a)
    g = torch.Generator().manual_seed(0)
    wav = torch.randn(2, 40 * a.hop_length, generator=g) * 0.1  # (B, S)
    mel = mel_fn(wav)  # (B, 40, M)
    mel_seg, wav_seg = random_segments(mel, wav, torch.tensor([40, 20]), 12, a.hop_length, generator=g)
    assert mel_seg.shape == (2, 12, 80) and wav_seg.shape == (2, 12 * a.hop_length)
    # Aligned: the mel of the cut audio is the cut mel (away from the reflect-padded edges).
    torch.testing.assert_close(mel_fn(wav_seg)[:, 3:-3], mel_seg[:, 3:-3], atol=1e-4, rtol=1e-4)

    gen = VocosGenerator(v, a)
    parts = reconstruction_loss(v, mel_fn, gen(mel_seg), mel_seg, wav_seg)
    assert set(parts) == {"loss", "mel_l1", "stft"}
    assert all(t.dim() == 0 and torch.isfinite(t) for t in parts.values())
    total = v.mel_loss_weight * parts["mel_l1"] + v.stft_loss_weight * parts["stft"]
    assert float(parts["loss"]) == pytest.approx(float(total))
    parts["loss"].backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in gen.parameters())
    # the true waveform scores zero on the STFT loss, and on the mel loss all but the segment's
    # edges (the cut mel saw the audio around them): the losses measure what they claim
    exact = reconstruction_loss(v, mel_fn, wav_seg, mel_seg, wav_seg)
    assert exact["stft"] < 1e-4 and exact["mel_l1"] < parts["mel_l1"] / 20
