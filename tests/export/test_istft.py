"""The inverse STFT in plain operators against torch.istft and the vocoder's own."""
import torch

from myxtts.export.istft import MatmulISTFT
from myxtts.models.vocoder import InverseSTFT


def test_matches_torch_istft_and_the_vocoders_own():
    n_fft, hop, t = 1024, 256, 40
    torch.manual_seed(0)
    mag, phase = torch.rand(2, n_fft // 2 + 1, t) * 3, torch.randn(2, n_fft // 2 + 1, t) * 4
    spec = torch.polar(mag, phase)  # (B, F, T)
    ours = MatmulISTFT(n_fft, hop)(mag, phase)  # (B, T * hop)
    assert ours.shape == (2, t * hop)
    assert (ours - InverseSTFT(n_fft, hop, n_fft)(spec)).abs().max() < 1e-5
    # torch.istft centres its frames n_fft / 2 before ours start at (n_fft - hop) / 2: the same
    # samples from hop / 2 on.
    ref = torch.istft(spec, n_fft, hop, window=torch.hann_window(n_fft), center=True)  # (B, (T-1) * hop)
    assert ref.shape[1] == (t - 1) * hop
    assert (ours[:, hop // 2: hop // 2 + ref.shape[1]] - ref).abs().max() < 1e-5
