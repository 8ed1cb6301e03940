"""HiFi-GAN: T mel frames → exactly T * hop samples; discriminators and losses run and train."""
import pytest
import torch

from myxtts.audio import MelSpectrogram
from myxtts.config import AudioConfig, VocoderConfig
from myxtts.models.vocoder import (
    HiFiGANGenerator,
    MultiPeriodDiscriminator,
    MultiScaleDiscriminator,
    discriminator_loss,
    generator_loss,
    random_segments,
    upsample_rates,
)
from myxtts.models.xtts import count_parameters


@pytest.mark.parametrize("preset, params", [("small", (0.8e6, 1.1e6)), ("v1", (13e6, 15e6))])
def test_generator_presets_output_length(preset, params):
    gen = HiFiGANGenerator(VocoderConfig(preset=preset), 80, 256)
    assert params[0] < count_parameters(gen) < params[1]  # the paper's V2 / V1 sizes
    with torch.no_grad():
        wav = gen(torch.randn(2, 7, 80) - 5)
    assert wav.shape == (2, 7 * 256) and wav.abs().max() <= 1.0


@pytest.mark.parametrize("hop", [200, 240, 300, 128])
def test_other_hops_upsample_exactly(hop):
    gen = HiFiGANGenerator(VocoderConfig(preset="small"), 80, hop)
    assert torch.tensor(upsample_rates(hop)).prod() == hop
    with torch.no_grad():
        assert gen(torch.randn(1, 5, 80)).shape == (1, 5 * hop)


def test_unsupported_hop_is_refused():
    with pytest.raises(ValueError, match="hop_length"):
        upsample_rates(7 * 32)


def test_segments_discriminators_and_losses_train():
    a, v = AudioConfig(), VocoderConfig()
    mel_fn = MelSpectrogram(a)
    g = torch.Generator().manual_seed(0)
    wav = torch.randn(2, 40 * a.hop_length, generator=g) * 0.1  # (B, S)
    mel = mel_fn(wav)  # (B, 40, M)
    mel_seg, wav_seg = random_segments(mel, wav, torch.tensor([40, 20]), 12, a.hop_length, generator=g)
    assert mel_seg.shape == (2, 12, 80) and wav_seg.shape == (2, 12 * a.hop_length)
    # Aligned: the mel of the cut audio is the cut mel (away from the reflect-padded edges).
    torch.testing.assert_close(mel_fn(wav_seg)[:, 3:-3], mel_seg[:, 3:-3], atol=1e-4, rtol=1e-4)

    gen, mpd, msd = HiFiGANGenerator(v, 80, a.hop_length), MultiPeriodDiscriminator(), MultiScaleDiscriminator()
    mel_seg, wav_seg = mel_seg[:1], wav_seg[:1]  # one utterance keeps the 58 M-parameter critics quick
    fake = gen(mel_seg)
    d_loss = (discriminator_loss(mpd(wav_seg)[0], mpd(fake.detach())[0])
              + discriminator_loss(msd(wav_seg)[0], msd(fake.detach())[0]))
    d_loss.backward()
    assert torch.isfinite(d_loss) and d_loss.dim() == 0
    assert all(p.grad is not None for p in mpd.parameters())
    assert gen.conv_pre.parametrizations.weight.original1.grad is None
    (_, mpd_real), (_, msd_real) = mpd(wav_seg), msd(wav_seg)
    parts = generator_loss(v, mel_fn, fake, mel_seg, mpd(fake), msd(fake), mpd_real, msd_real)
    assert set(parts) == {"loss", "adv", "feature_matching", "mel_l1"}
    assert all(t.dim() == 0 and torch.isfinite(t) for t in parts.values())
    parts["loss"].backward()
    assert all(p.grad is not None for p in gen.parameters())
