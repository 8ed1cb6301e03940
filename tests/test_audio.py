import numpy as np
import pytest
import soundfile as sf
import torch

from myxtts import audio
from myxtts.config import AudioConfig

from .conftest import LJSPEECH, REFERENCE_VOICES


def test_mel_frames_line_up_with_samples():
    cfg = AudioConfig()
    wav = audio.preprocess(audio.load_audio(LJSPEECH / "wavs" / "LJ001-0002.wav", 22050), cfg)
    assert wav.size % cfg.hop_length == 0
    mel = audio.mel_spectrogram(wav, cfg)
    assert mel.shape == (wav.size // cfg.hop_length, cfg.n_mels)
    # The batched module on a (B, S) tensor gives the same frames as the one-clip helper.
    batched = audio.MelSpectrogram(cfg)(torch.from_numpy(np.stack([wav, wav])))
    np.testing.assert_allclose(batched[1].numpy(), mel, atol=1e-5)


def test_16k_reference_is_resampled(tmp_path):
    wav = audio.load_audio(REFERENCE_VOICES / "arctic_a0007_male.wav", 22050)
    info = sf.info(str(REFERENCE_VOICES / "arctic_a0007_male.wav"))
    assert info.samplerate == 16000
    assert abs(wav.size / 22050 - info.duration) < 0.01


def test_silence_trims_to_nothing_and_errors_name_the_reason(tmp_path):
    assert audio.trim_silence(np.zeros(22050, np.float32), 40).size == 0
    (tmp_path / "bad.wav").write_bytes(b"not audio at all")
    with pytest.raises(audio.AudioError, match="unreadable"):
        audio.load_audio(tmp_path / "bad.wav", 22050)
    with pytest.raises(audio.AudioError, match="not found"):
        audio.load_audio(tmp_path / "missing.wav", 22050)


@pytest.mark.parametrize("frames", [1, 3, 40])
def test_griffin_lim_returns_frames_times_hop(frames):
    cfg = AudioConfig()
    wav = audio.griffin_lim(torch.randn(frames, cfg.n_mels) - 5, cfg, n_iter=2)
    assert wav.shape == (frames * cfg.hop_length,) and torch.isfinite(wav).all()


def test_griffin_lim_inverts_the_projects_mel():
    # A real clip → our log-mel → Griffin-Lim must give back audible speech at the same level,
    # with a magnitude spectrogram close to the original's (measured r = 0.97 on this clip).
    cfg = AudioConfig()
    wav = audio.preprocess(audio.load_audio(LJSPEECH / "wavs" / "LJ001-0002.wav", 22050), cfg)
    mel = torch.from_numpy(audio.mel_spectrogram(wav, cfg))  # (T, M)
    rec = audio.griffin_lim(mel, cfg, n_iter=32).numpy()
    assert rec.shape == wav.shape

    def rms(x):
        return float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))

    assert rms(rec) > 0.01  # -40 dBFS: clearly not silence
    assert 0.75 < rms(rec) / rms(wav) < 1.25  # the mel's absolute level is kept
    module = audio.MelSpectrogram(cfg)
    original = module.magnitude(torch.from_numpy(wav)[None])[0].numpy()  # (F, T)
    rebuilt = module.magnitude(torch.from_numpy(rec)[None])[0].numpy()
    r = np.corrcoef(original.ravel(), rebuilt.ravel())[0, 1]
    assert r > 0.9, f"Pearson r between magnitude spectrograms is only {r:.3f}"


def test_griffin_lim_of_a_silent_mel_is_silent():
    cfg = AudioConfig()
    floor = torch.full((40, cfg.n_mels), float(np.log(audio.LOG_FLOOR)))
    wav = audio.griffin_lim(floor, cfg, n_iter=4)
    assert float(wav.abs().max()) < 1e-3  # no gain is applied that would turn noise into sound


@pytest.mark.parametrize("speed", [0.9, 1.1, 0.8, 1.2])
def test_change_speed_scales_pitch_and_length_together(speed):
    sr, f = 22050, 440.0
    tone = np.sin(2 * np.pi * f * np.arange(sr) / sr).astype(np.float32)  # 1 s
    out = audio.change_speed(tone, speed, sr)
    assert out.dtype == np.float32 and abs(out.size - sr / speed) <= 1
    # the FFT peak, zero-padded to 0.1 Hz bins, away from the resampler's edge transients
    mid = out[out.size // 10: -(out.size // 10)] * np.hanning(out.size - 2 * (out.size // 10))
    spectrum = np.abs(np.fft.rfft(mid, n=10 * sr))
    peak = np.argmax(spectrum) * sr / (10 * sr)
    assert abs(peak - f * speed) < 0.5, (peak, f * speed)
    assert 0.9 < np.abs(out[sr // 10: -sr // 10]).max() < 1.1  # the level is kept
    assert audio.change_speed(tone, 1.0, sr) is tone


def test_a_wav_is_written_whole_as_16_bit_pcm_and_no_temporary_is_left(tmp_path):
    path = tmp_path / "samples" / "step-00000001" / "sample.wav"
    audio.save_wav(path, torch.full((800,), 2.0), 16000)  # over full scale: clipped, not wrapped
    wav, sr = sf.read(path, dtype="int16")
    assert sf.info(path).subtype == "PCM_16" and sr == 16000 and wav.shape == (800,) and wav.min() == 32767
    assert [p.name for p in path.parent.iterdir()] == ["sample.wav"]
