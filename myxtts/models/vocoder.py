"""The vocoder: log-mel (B, T, n_mels) → waveform (B, T * hop), and what it trains on.

**Generator**: a Fourier head in the style of Vocos (Siuzdak, ICLR 2024). A stack of ConvNeXt
blocks runs at the mel frame rate, and a linear head predicts, per frame, the STFT's
log-magnitude and phase; an inverse STFT makes the waveform. With ``vocoder.magnitude_prior``
(the default since format 6) the head's log-magnitude corrects the magnitudes the mel itself
gives (:func:`myxtts.audio.magnitude_from_mel`), as FreeV (Lv et al. 2024) starts from the
mel's pseudo-inverse: trained from nothing, 3,000 steps read the held-out clips 6-12 WER points
worse than Griffin-Lim does from the same mels; from the mel's magnitudes, as well
(``benchmarks/results/2026-11-29-vocoder-prior-cpu.md``). No layer runs at the sample rate,
so a step costs a fraction of a time-domain generator's: a HiFi-GAN generator (``small``, 0.9 M
parameters) trained and synthesized 6x and 20x slower on two CPU cores, and said the held-out
sentences far worse after the same 10 minutes (``benchmarks/results/2026-11-25-vocoder-cpu.md``).

The inverse STFT uses the analysis framing of :class:`myxtts.audio.MelSpectrogram`: frame t
covers samples ``[t * hop - pad, t * hop - pad + n_fft)`` with ``pad = (n_fft - hop) / 2``, so
T frames give exactly T * hop samples and a generated segment lines up with its recording.

**Losses** (:func:`reconstruction_loss`): the L1 distance of the output's log-mel to the
target's (HiFi-GAN's mel loss) plus a multi-resolution STFT loss on the waveform segment. No
discriminator: on a CPU a GAN step (HiFi-GAN's multi-period discriminator, at a quarter of its
width) cost 7x a reconstruction step, and 1,133 of them after 4,000 reconstruction steps
lowered DNSMOS and left WER where it was (the same record).

Recipe (one step; the batch holds ``mel`` (B, Tm, M), ``wav`` (B, Tm * hop), ``mel_lens``;
no host syncs, shape-static)::

    gen = VocosGenerator(cfg.vocoder, cfg.audio)
    mel_fn = MelSpectrogram(cfg.audio)            # the loss mel = the features' mel
    mel, wav = random_segments(batch["mel"], batch["wav"], batch["mel_lens"],
                               cfg.vocoder.segment_frames, cfg.audio.hop_length)
    losses = reconstruction_loss(cfg.vocoder, mel_fn, gen(mel), mel, wav)
    opt.zero_grad(); losses["loss"].backward(); opt.step()

Export with ``checkpoint.save_model(path, gen, cfg, vocab, kind="vocoder")``; ``myxtts.vocode``
loads it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from myxtts.audio import LOG_FLOOR, magnitude_from_mel
from myxtts.config import AudioConfig, Config, VocoderConfig

# One size, the one measured: channels, ConvNeXt intermediate channels, blocks (2.8 M parameters;
# the paper's mel vocoder is 512, 1536, 8: 13.5 M, never trained here).
CHANNELS, INTERMEDIATE, BLOCKS = 256, 768, 6
MAX_LOG_MAG = 4.6  # exp(4.6) ~ 100, the paper's magnitude cap: keeps an early step from exploding


class ConvNeXtBlock(nn.Module):
    """Depth-wise conv (k7) → LayerNorm → pointwise MLP (GELU) → layer scale, with a residual."""

    def __init__(self, ch: int, inter: int, layer_scale: float):
        super().__init__()
        self.dwconv = nn.Conv1d(ch, ch, 7, padding=3, groups=ch)
        self.norm = nn.LayerNorm(ch, eps=1e-6)
        self.pw1, self.pw2 = nn.Linear(ch, inter), nn.Linear(inter, ch)
        self.gamma = nn.Parameter(torch.full((ch,), layer_scale))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, C, T) → (B, C, T)."""
        y = self.dwconv(x).transpose(1, 2)  # (B, T, C)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + (self.gamma * y).transpose(1, 2)


class InverseSTFT(nn.Module):
    """(B, F, T) complex spectrum → (B, T * hop) waveform, by overlap-add with the squared-window
    normalisation. ``torch.istft`` centres its frames, which is not this framing; without
    centring it rejects the edges, where the window envelope is near zero."""

    def __init__(self, n_fft: int, hop: int, win_length: int):
        super().__init__()
        if win_length != n_fft:
            raise ValueError("the Fourier-head vocoder needs audio.win_length == audio.n_fft")
        self.n_fft, self.hop, self.pad = n_fft, hop, (n_fft - hop) // 2
        self.register_buffer("window", torch.hann_window(n_fft), persistent=False)

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        t = spec.shape[-1]
        frames = torch.fft.irfft(spec, self.n_fft, dim=1) * self.window[None, :, None]  # (B, N, T)
        size = (t - 1) * self.hop + self.n_fft
        fold = dict(output_size=(1, size), kernel_size=(1, self.n_fft), stride=(1, self.hop))
        y = F.fold(frames, **fold)[:, 0, 0]  # (B, size)
        env = F.fold(self.window.square()[None, :, None].expand(1, -1, t), **fold)[0, 0, 0]  # (size,)
        return (y / env.clamp(min=1e-8))[:, self.pad: size - self.pad]  # (B, T * hop)


class VocosGenerator(nn.Module):
    def __init__(self, cfg: VocoderConfig, audio: AudioConfig):
        super().__init__()
        ch, inter, blocks = CHANNELS, INTERMEDIATE, BLOCKS
        self.hop_length = audio.hop_length
        self.embed = nn.Conv1d(audio.n_mels, ch, 7, padding=3)
        self.norm = nn.LayerNorm(ch, eps=1e-6)
        self.blocks = nn.ModuleList(ConvNeXtBlock(ch, inter, 1 / blocks) for _ in range(blocks))
        self.final_norm = nn.LayerNorm(ch, eps=1e-6)
        self.head = nn.Linear(ch, audio.n_fft + 2)  # log-magnitude and phase of n_fft/2+1 bins
        self.istft = InverseSTFT(audio.n_fft, audio.hop_length, audio.win_length)
        self.prior = cfg.magnitude_prior
        if self.prior:  # (F, M), rebuilt from the config: model files do not carry it
            self.register_buffer("mel_inverse", magnitude_from_mel(audio), persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Conv1d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """mel (B, T, n_mels) natural-log mel → wav (B, T * hop)."""
        mag, phase = self.spectrum(mel)
        # cos/sin of an unbounded phase: the head may wrap freely, as in the paper.
        return self.istft(torch.complex(mag * torch.cos(phase), mag * torch.sin(phase)))

    def spectrum(self, mel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """mel (B, T, n_mels) → the STFT's magnitude and phase (B, n_fft/2+1, T), float32: the
        network without its inverse STFT, which an exported graph writes in other ops."""
        x = self.embed(mel.transpose(1, 2))  # (B, C, T)
        x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        x = self.head(self.final_norm(x.transpose(1, 2))).transpose(1, 2).float()  # (B, N + 2, T)
        log_mag, phase = x.chunk(2, dim=1)  # (B, F, T) each
        if self.prior:  # the head corrects the magnitudes the mel itself gives
            read = self.mel_inverse @ mel.float().exp().transpose(1, 2)  # (B, F, T)
            log_mag = log_mag + torch.log(read.clamp(min=LOG_FLOOR))
        return torch.exp(log_mag.clamp(max=MAX_LOG_MAG)), phase


def random_segments(mel: torch.Tensor, wav: torch.Tensor, mel_lens: torch.Tensor,
                    segment_frames: int, hop: int, generator: torch.Generator | None = None):
    """Crop one aligned random segment per utterance, without host syncs or data-dependent
    shapes (gather with per-row offsets): mel (B, Tm, M), wav (B, Tm * hop), mel_lens (B,) →
    (B, segment_frames, M), (B, segment_frames * hop). Utterances shorter than the segment
    start at 0 and include their padding (silence)."""
    b = mel.shape[0]
    room = (mel_lens - segment_frames).clamp(min=0).float()  # (B,)
    u = torch.rand(b, generator=generator, device=mel.device if generator is None
                   else generator.device).to(mel.device)
    start = (u * (room + 1)).long().clamp(max=mel.shape[1] - segment_frames)  # (B,)
    f_idx = start[:, None] + torch.arange(segment_frames, device=mel.device)  # (B, F)
    mel_seg = torch.gather(mel, 1, f_idx[..., None].expand(-1, -1, mel.shape[2]))
    s_idx = start[:, None] * hop + torch.arange(segment_frames * hop, device=wav.device)
    return mel_seg, torch.gather(wav, 1, s_idx)


STFT_RESOLUTIONS = ((512, 128), (1024, 256), (2048, 512))  # (n_fft, hop), Parallel WaveGAN's


def mel_loss(mel_fn, fake_wav: torch.Tensor, real_mel: torch.Tensor) -> torch.Tensor:
    """L1 between the log-mel of generated audio (``mel_fn``: audio.MelSpectrogram) and the
    target log-mel (B, T, M)."""
    return F.l1_loss(mel_fn(fake_wav.float()), real_mel.float())


def stft_loss(fake_wav: torch.Tensor, real_wav: torch.Tensor) -> torch.Tensor:
    """Multi-resolution STFT loss (Yamamoto et al. 2020), spectral convergence + log-magnitude L1
    averaged over three resolutions. A phase that disagrees between overlapping frames shows up
    as a wrong magnitude at the other resolutions, so this teaches phase without a discriminator."""
    loss = fake_wav.new_zeros(())
    for n_fft, hop in STFT_RESOLUTIONS:
        window = torch.hann_window(n_fft, device=fake_wav.device)
        fake, real = (torch.stft(x.float(), n_fft, hop, window=window, return_complex=True).abs()
                      .clamp(min=1e-5) for x in (fake_wav, real_wav))  # (B, F, T)
        loss = loss + torch.linalg.norm(real - fake) / torch.linalg.norm(real)
        loss = loss + F.l1_loss(torch.log(fake), torch.log(real))
    return loss / len(STFT_RESOLUTIONS)


def reconstruction_loss(cfg: VocoderConfig, mel_fn, fake_wav: torch.Tensor, real_mel: torch.Tensor,
                        real_wav: torch.Tensor) -> dict:
    """The vocoder's training loss and its parts (0-dim tensors, logged as they are):
    ``mel_loss_weight`` x mel L1 + ``stft_loss_weight`` x multi-resolution STFT."""
    mel, stft = mel_loss(mel_fn, fake_wav, real_mel), stft_loss(fake_wav, real_wav)
    return {"loss": cfg.mel_loss_weight * mel + cfg.stft_loss_weight * stft, "mel_l1": mel, "stft": stft}


def build_generator(cfg: Config) -> VocosGenerator:
    return VocosGenerator(cfg.vocoder, cfg.audio)
