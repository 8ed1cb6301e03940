"""Autoregressive mel decoder: pre-net → causal transformer with cross-attention over
[text memory ; conditioning latents] → r mel frames + a stop logit per step → conv post-net.

It implements the decoder protocol of models.xtts: ``forward`` (teacher forcing), ``losses``
(models.losses.autoregressive_losses) and ``generate`` (the KV-cached loop below). The mel
normalisation, the post-net and the silence past a generated length are shared with the
duration decoder, which imports them from here.

Reduction factor r: one decoder step emits r frames, so the sequence the transformer sees is
Tm / r long (cheaper attention, and a coarser, easier alignment).

Teacher forcing (training): the input of step s is the *last* frame of group s-1; step 0 gets a
zero "go" frame (zero in the normalised mel space below). Generation feeds back its own output,
each step reusing the earlier steps' keys and values from a cache.

Stop: the stop head sees the decoder state *and* where the alignment is (expected relative text
position, attention mass on the final token; detached, so the stop loss does not bend the
alignment). Left to the hidden state alone, a small model learns "stop around step N" from the
positions of its training utterances and stops mid-sentence or babbles past the end. In
generation a stop also counts only once the alignment has reached MIN_PROGRESS of the text.

Pre-net dropout is always on, training and inference (Tacotron 2): it is the model's defence
against exposure bias and the source of variation between seeds. At inference it draws its masks
from a caller-supplied ``torch.Generator`` so a seed reproduces the output exactly.

Mel values are natural-log mels (about -11.5 … 2); internally they are normalised by fixed
constants (mean -5, std 2, measured on LJSpeech) so inputs and outputs are near unit scale.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from myxtts.audio import LOG_FLOOR
from myxtts.config import ModelConfig
from myxtts.models.layers import (
    DecoderBlock,
    KVCache,
    MemoryKV,
    attention_bias,
    compute_dtype,
    length_mask,
    norm,
    sinusoidal_positions,
)
from myxtts.models.losses import autoregressive_losses

MEL_MEAN, MEL_STD = -5.0, 2.0
LOG_SILENCE = math.log(LOG_FLOOR)  # what a generated mel holds past its length
MIN_PROGRESS = 0.8  # share of the text the alignment must have reached before a stop counts


def normalize_mel(mel: torch.Tensor) -> torch.Tensor:
    return (mel - MEL_MEAN) / MEL_STD


def denormalize_mel(x: torch.Tensor) -> torch.Tensor:
    return x * MEL_STD + MEL_MEAN


def generated_mel(x: torch.Tensor, frame_mask: torch.Tensor) -> torch.Tensor:
    """Normalised mel (B, T, M), frame mask (B, T) → raw log-mel (B, T, M) with LOG_SILENCE past
    each length: what a vocoder or a length-blind reader gets for the padded frames."""
    return torch.where(frame_mask[..., None], denormalize_mel(x), torch.full_like(x, LOG_SILENCE))


def text_attention(attn: torch.Tensor, n_text: int) -> torch.Tensor:
    """(B, S, Tt+K) alignment-layer weights → (B, S, Tt), renormalised over the text keys.
    The softmax also covers the conditioning latents; without renormalising, the guided
    attention loss could be dodged by moving mass onto the latents."""
    a = attn[..., :n_text].float()
    return a / a.sum(-1, keepdim=True).clamp(min=1e-8)


def alignment_features(text_attn: torch.Tensor, token_lens: torch.Tensor) -> torch.Tensor:
    """(B, S, Tt) text attention → (B, S, 2): expected position / (N-1), mass on token N-1."""
    idx = torch.arange(text_attn.shape[-1], device=text_attn.device)  # (Tt,)
    last = token_lens.clamp(min=1)[:, None] - 1  # (B, 1)
    rel = idx[None, :].float() / last.clamp(min=1).float()  # (B, Tt)
    progress = (text_attn * rel[:, None, :]).sum(-1)  # (B, S)
    end_mass = (text_attn * (idx[None, :] == last)[:, None, :]).sum(-1)  # (B, S)
    return torch.stack([progress, end_mass], dim=-1).detach()


class Prenet(nn.Module):
    """Two ReLU layers with always-on dropout, then a projection to d_model."""

    def __init__(self, n_mels: int, dim: int, d_model: int, p: float):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(n_mels, dim), nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, d_model)
        self.p = p

    def _drop(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        if self.p == 0.0:
            return x
        if generator is None:  # training (and unseeded inference): the fused kernel
            return F.dropout(x, self.p, training=True)
        # Drawn on the generator's device then moved: a CPU generator reproduces the same
        # masks whether the model runs on a CPU or a GPU.
        keep = torch.rand(x.shape, generator=generator, device=generator.device) >= self.p
        keep = keep.to(x.device)
        return x * keep.to(x.dtype) / (1.0 - self.p)

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        x = self._drop(F.relu(self.fc1(x)), generator)
        x = self._drop(F.relu(self.fc2(x)), generator)
        return self.proj(x)


class PostNet(nn.Module):
    """Residual conv stack over the whole mel (non-causal: it runs after generation). Channel
    LayerNorm instead of Tacotron's BatchNorm, so padded frames never leak into batch statistics
    and valid outputs do not depend on padding."""

    def __init__(self, n_mels: int, channels: int, layers: int, dropout: float):
        super().__init__()
        dims = [n_mels] + [channels] * (layers - 1) + [n_mels]
        self.convs = nn.ModuleList(nn.Conv1d(i, o, 5, padding=2) for i, o in zip(dims, dims[1:]))
        self.norms = nn.ModuleList(nn.LayerNorm(o) for o in dims[1:-1])
        self.dropout = dropout
        # Zero residual at initialisation: mel_post starts equal to mel_pre instead of adding
        # noise on top of it, and the post-net learns only the correction.
        nn.init.zeros_(self.convs[-1].weight)
        nn.init.zeros_(self.convs[-1].bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, T, n_mels) normalised mel, mask (B, T) → residual (B, T, n_mels)."""
        m = mask[:, None, :].to(x.dtype)  # (B, 1, T)
        h = x.transpose(1, 2)  # (B, n_mels, T)
        for i, conv in enumerate(self.convs):
            h = conv(h * m)  # zero padding before each conv = the unpadded conv's edge padding
            if i < len(self.norms):
                h = torch.tanh(self.norms[i](h.transpose(1, 2)).transpose(1, 2))
                h = F.dropout(h, self.dropout, self.training)
        return h.transpose(1, 2) * m.transpose(1, 2)


class MelDecoder(nn.Module):
    def __init__(self, cfg: ModelConfig, n_mels: int):
        super().__init__()
        self.cfg = cfg  # the loss weights
        d, self.d, self.r, self.n_mels = cfg.d_model, cfg.d_model, cfg.reduction, n_mels
        self.prenet = Prenet(n_mels, cfg.prenet_dim, d, cfg.prenet_dropout)
        self.alpha = nn.Parameter(torch.ones(1))
        self.blocks = nn.ModuleList(
            DecoderBlock(d, cfg.n_heads, cfg.ff_mult, cfg.dropout)
            for _ in range(cfg.decoder_layers))
        self.memory_kv = MemoryKV(d, cfg.decoder_layers, cfg.n_heads)
        # The layer whose cross-attention is guided towards the diagonal and returned as `attn`.
        self.align_layer = cfg.align_layer % cfg.decoder_layers
        self.norm = norm(d)
        self.mel_out = nn.Linear(d, n_mels * self.r)
        self.stop_out = nn.Linear(d, 1)
        self.stop_align = nn.Linear(2, 1)
        self.postnet = PostNet(n_mels, cfg.postnet_channels, cfg.postnet_layers, cfg.dropout)
        self.dropout = nn.Dropout(cfg.dropout)

    def _embed(self, prev: torch.Tensor, start: int, generator=None) -> torch.Tensor:
        """prev (B, S, n_mels) normalised input frames → rows (B*S, d) with positions start..
        (rows: the blocks' layout, see layers.Attention)."""
        b, s, m = prev.shape
        pos = sinusoidal_positions(torch.arange(start, start + s, device=prev.device),
                                   self.d)  # (S, d)
        x = self.prenet(prev.reshape(b * s, m), generator).view(b, s, self.d)
        return self.dropout(x + (self.alpha * pos).to(x.dtype)).view(b * s, self.d)  # stream: x's dtype

    def _head(self, h: torch.Tensor, b: int, text_attn: torch.Tensor, token_lens: torch.Tensor):
        """rows (B*S, d), text attention (B, S, Tt) → frames (B, S*r, n_mels) normalised,
        stop logits (B, S)."""
        h = self.norm(h)
        frames = self.mel_out(h).view(b, -1, self.n_mels)
        feats = alignment_features(text_attn, token_lens).to(h.dtype).view(-1, 2)  # (B*S, 2)
        return frames, (self.stop_out(h) + self.stop_align(feats)).view(b, -1)

    def forward(self, mel: torch.Tensor, memory: torch.Tensor, mem_mask: torch.Tensor,
                mel_lens: torch.Tensor, token_lens: torch.Tensor, n_text: int) -> dict:
        """Teacher-forced pass. mel (B, Tm, n_mels) raw log-mel, Tm a multiple of r;
        memory (B, Tk, d) = [text (n_text) ; latents], mem_mask (B, Tk) → mel_pre/mel_post
        (B, Tm, n_mels) raw log-mel, stop_logits (B, Tm/r), attn (B, Tm/r, n_text) text
        attention of the alignment layer."""
        if mel.shape[1] % self.r:  # static shape check: free under torch.compile
            raise ValueError(f"mel length {mel.shape[1]} is not a multiple of the reduction "
                             f"factor {self.r} (data.pad_multiple must be a multiple of it)")
        x = normalize_mel(mel)  # (B, Tm, M)
        last = x[:, self.r - 1::self.r]  # (B, S, M): last frame of each r-group
        prev = torch.cat([torch.zeros_like(last[:, :1]), last[:, :-1]], dim=1)  # (B, S, M)
        b = mel.shape[0]
        h = self._embed(prev, 0)  # (B*S, d)
        bias = attention_bias(mem_mask, compute_dtype(h))  # (B, 1, 1, Tk)
        kv = self.memory_kv(memory)
        for i, block in enumerate(self.blocks):
            if i == self.align_layer:
                h, attn = block(h, b, kv[i], bias, need_weights=True)  # (B*S, d), (B, S, Tk)
            else:
                h = block(h, b, kv[i], bias)  # (B*S, d)
        attn = text_attention(attn, n_text)  # (B, S, Tt)
        pre, stop = self._head(h, b, attn, token_lens)  # (B, Tm, M), (B, S)
        frame_mask = length_mask(mel_lens, pre.shape[1])  # (B, Tm)
        post = pre + self.postnet(pre, frame_mask)
        return {"mel_pre": denormalize_mel(pre), "mel_post": denormalize_mel(post),
                "stop_logits": stop, "attn": attn}

    def losses(self, batch: dict, out: dict) -> dict:
        """``forward``'s outputs → 0-dim tensors: loss, mel_l1, postnet_l1, stop_bce,
        guided_attn, attn_diag (see models.losses)."""
        return autoregressive_losses(self.cfg, batch, out)

    @torch.no_grad()
    def generate(self, memory: torch.Tensor, mem_mask: torch.Tensor, token_lens: torch.Tensor,
                 n_text: int, max_steps: int, stop_threshold: float,
                 generator: torch.Generator | None = None, speed: float = 1.0):
        """Synthesis of a batch, each sentence stopping on its own stop token. memory (B, Tk, d)
        = [text (n_text) ; latents], mem_mask (B, Tk) → mels (B, T, n_mels) raw log-mel with
        LOG_SILENCE past each length, lengths (B,) in frames (max_steps * r for a sentence that
        never stopped), text attention (B, T/r, n_text). ``generator`` drives the pre-net
        dropout. ``speed``: the protocol's, which this decoder has no durations to apply to."""
        if speed != 1.0:
            raise ValueError("the autoregressive decoder has no durations to scale: speed must be 1")
        b, r = memory.shape[0], self.r
        kv = self.memory_kv(memory)
        caches = self.new_caches(b, max_steps, memory.device, memory.dtype)
        prev = memory.new_zeros(b, 1, self.n_mels)  # the "go" frame, (B, 1, M)
        done = torch.zeros(b, dtype=torch.bool, device=memory.device)
        lens = torch.full((b,), max_steps * r, dtype=torch.long, device=memory.device)
        frames, attns = [], []
        for t in range(max_steps):
            f, stop, a = self.step(prev, t, caches, kv, mem_mask, token_lens, n_text,
                                   generator)  # (B, r, M), (B,), (B, Tt)
            frames.append(f)
            attns.append(a)
            # A sentence may stop only once its alignment has read most of its text: guards
            # against the stop token firing mid-sentence (a truncated sentence is the worst
            # failure an autoregressive TTS model can make).
            progress = alignment_features(a[:, None], token_lens)[:, 0, 0]  # (B,)
            wants = torch.sigmoid(stop.float()) > stop_threshold  # (B,)
            fired = wants & (progress >= MIN_PROGRESS) & ~done
            lens = torch.where(fired, torch.full_like(lens, (t + 1) * r), lens)
            done = done | fired
            prev = f[:, -1:]
            # Checking on the host costs a device sync, so only every 8 steps; finished
            # sentences keep decoding meanwhile and are masked below.
            if t % 8 == 7 and bool(done.all()):
                break
        pre = torch.cat(frames, dim=1)  # (B, T, M) normalised
        frame_mask = length_mask(lens, pre.shape[1])  # (B, T)
        mels = generated_mel(pre + self.postnet(pre, frame_mask), frame_mask)  # (B, T, M)
        return mels, lens, torch.stack(attns, dim=1)  # attn (B, T/r, Tt)

    def new_caches(self, batch: int, max_steps: int, device, dtype) -> list[KVCache]:
        a = self.blocks[0].self_attn
        return [KVCache(batch, a.h, max_steps, a.dh, device, dtype) for _ in self.blocks]

    def step(self, prev: torch.Tensor, pos: int, caches, kv_projs, mem_mask, token_lens,
             n_text: int, generator=None):
        """One generation step. prev (B, 1, n_mels) normalised, ``kv_projs`` from memory_kv →
        frames (B, r, n_mels) normalised, stop logit (B,), text attention (B, n_text)."""
        b = prev.shape[0]
        h = self._embed(prev, pos, generator)  # (B, d)
        bias = attention_bias(mem_mask, compute_dtype(h))  # (B, 1, 1, Tk)
        for i, block in enumerate(self.blocks):
            if i == self.align_layer:
                h, attn = block(h, b, kv_projs[i], mem_bias=bias, need_weights=True, cache=caches[i], pos=pos)
            else:
                h = block(h, b, kv_projs[i], mem_bias=bias, cache=caches[i], pos=pos)
        attn = text_attention(attn, n_text)  # (B, 1, Tt)
        frames, stop = self._head(h, b, attn, token_lens)
        return frames, stop[:, 0], attn[:, 0]
