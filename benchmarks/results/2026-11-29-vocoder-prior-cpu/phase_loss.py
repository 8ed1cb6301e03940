# The phase losses tried first (not kept): added to models/vocoder.py's reconstruction_loss as
# `+ vocoder.phase_loss_weight * phase_loss(fake_wav, real_wav, 1024, 256)`, weights 10 and 30.
import torch


def _wrapped(x: torch.Tensor) -> torch.Tensor:
    """|x| after wrapping to [-pi, pi]: APNet's anti-wrapping function."""
    return (x - 2 * torch.pi * torch.round(x / (2 * torch.pi))).abs()


def phase_loss(fake_wav: torch.Tensor, real_wav: torch.Tensor, n_fft: int, hop: int) -> torch.Tensor:
    """APNet's phase losses (Ai and Ling 2023): the wrapped error of the instantaneous phase, of
    its difference across frequency (group delay) and across time (instantaneous frequency),
    each bin weighted by its share of the recording's magnitude so that silent bins, whose
    phase is noise, teach nothing."""
    window = torch.hann_window(n_fft, device=fake_wav.device)
    fake, real = (torch.stft(x.float(), n_fft, hop, window=window, return_complex=True)
                  for x in (fake_wav, real_wav))  # (B, F, T)
    pf = torch.atan2(fake.imag, fake.real + 1e-9)
    pr = torch.atan2(real.imag, real.real)
    w = real.abs()
    w = w / w.sum(dim=(1, 2), keepdim=True).clamp(min=1e-9)  # (B, F, T)
    d = pf - pr
    ip = (w * _wrapped(d)).sum((1, 2))
    gd = (w[:, 1:] * _wrapped(d[:, 1:] - d[:, :-1])).sum((1, 2))
    iaf = (w[:, :, 1:] * _wrapped(d[:, :, 1:] - d[:, :, :-1])).sum((1, 2))
    return (ip + gd + iaf).mean() / 3
