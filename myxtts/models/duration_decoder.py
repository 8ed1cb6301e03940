"""Non-autoregressive mel decoder driven by token durations (FastSpeech 2 / FastPitch style):

    text memory (B, Tt, d) ──× alignment (B, Tm, Tt)──▶ one text vector per frame (B, Tm, d)
      ──transformer (bidirectional self-attention over the frames, cross-attention to the
                     conditioning latents, feed-forwards convolving over frame_kernel frames)──▶ mel (B, Tm, M)
      ──conv post-net──▶ mel_post

In training the alignment is the aligner's hard path for the true mel (models.aligner), learned
together with the rest; in synthesis it comes from the duration predictor. Every frame is
predicted from the text and the voice alone, never from the model's own earlier frames, so the
errors of one frame cannot snowball into the next (the autoregressive decoder's exposure bias),
and there is no stop token: the length is the sum of the durations.

It implements the decoder protocol of models.xtts, as the autoregressive decoder does:
``forward`` (the aligner's path), ``losses`` (models.losses.duration_losses) and ``generate``
(the predicted durations). The returned ``attn`` is the alignment at the autoregressive
decoder's step rate (every r-th frame, (B, Tm/r, Tt)), so the alignment metric, plots and
reports read the same for both.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from myxtts.config import ModelConfig
from myxtts.models.aligner import Aligner, durations_to_alignment, hard_alignment
from myxtts.models.layers import (
    DecoderBlock,
    MemoryKV,
    Norm,
    attention_bias,
    compute_dtype,
    length_mask,
    norm,
    sinusoidal_positions,
)
from myxtts.models.losses import duration_losses
from myxtts.models.mel_decoder import PostNet, denormalize_mel, generated_mel, normalize_mel


class DurationPredictor(nn.Module):
    """Text (+ voice) vectors (B, Tt, d) → log(1 + frames) per token (B, Tt): two convolutions
    with LayerNorm, ReLU and dropout, then a projection (FastSpeech 2)."""

    def __init__(self, d: int, channels: int, dropout: float):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv1d(d, channels, 3, padding=1),
                                    nn.Conv1d(channels, channels, 3, padding=1)])
        self.norms = nn.ModuleList([Norm(channels), Norm(channels)])
        self.out = nn.Linear(channels, 1)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        m = mask[:, :, None].to(x.dtype)  # (B, Tt, 1)
        for conv, ln in zip(self.convs, self.norms):
            x = conv((x * m).transpose(1, 2)).transpose(1, 2)  # (B, Tt, C)
            x = F.dropout(F.relu(ln(x)), self.dropout, self.training)
        return self.out(x * m).squeeze(-1) * mask  # (B, Tt)


class DurationDecoder(nn.Module):
    def __init__(self, cfg: ModelConfig, n_mels: int):
        super().__init__()
        self.cfg = cfg  # the loss settings
        d, self.d, self.r, self.n_mels = cfg.d_model, cfg.d_model, cfg.reduction, n_mels
        self.aligner = Aligner(d, n_mels)
        self.duration = DurationPredictor(d, cfg.postnet_channels, cfg.dropout)
        # "local" and "token": order comes from convolving feed-forwards, and with "token" also
        # from each frame's index within its token; "absolute": from each frame's position in
        # the utterance, scaled by a learned alpha (see ModelConfig)
        self.absolute = cfg.frame_position == "absolute"
        self.in_token = cfg.frame_position == "token"
        self.alpha = nn.Parameter(torch.ones(1)) if self.absolute else None
        kernel = 1 if self.absolute else cfg.frame_kernel
        self.blocks = nn.ModuleList(DecoderBlock(d, cfg.n_heads, cfg.ff_mult, cfg.dropout, ff_kernel=kernel)
                                    for _ in range(cfg.decoder_layers))
        self.memory_kv = MemoryKV(d, cfg.decoder_layers, cfg.n_heads)  # of the latents only
        self.norm = norm(d)
        self.mel_out = nn.Linear(d, n_mels)
        self.postnet = PostNet(n_mels, cfg.postnet_channels, cfg.postnet_layers, cfg.dropout)
        self.dropout = nn.Dropout(cfg.dropout)

    def log_durations(self, text, latents, token_mask):
        """Predicted log(1 + frames) (B, Tt). The predictor sees detached inputs (Glow-TTS): its
        error should not reshape the text encoding the mel and the aligner depend on."""
        voice = latents.mean(dim=1, keepdim=True)  # (B, 1, d)
        return self.duration((text + voice).detach(), token_mask)

    def _decode(self, align, text, latents, frame_lens):
        """align (B, Tm, Tt) 0/1, text (B, Tt, d), latents (B, K, d) → normalised mel_pre,
        mel_post (B, Tm, M)."""
        b, tm, _ = align.shape
        x = align.to(text.dtype) @ text  # (B, Tm, d): each frame's token vector
        if self.in_token:  # DurIAN: how far into its phone a frame is, whatever came before
            count = align.cumsum(dim=1) * align  # (B, Tm, Tt): 1, 2, .. along each token's frames
            index = (count.sum(dim=2) - 1).clamp(min=0)  # (B, Tm): 0 at a token's first frame
            x = x + sinusoidal_positions(index, self.d).to(x.dtype)
        if self.absolute:
            pos = sinusoidal_positions(torch.arange(tm, device=x.device), self.d)  # (Tm, d)
            x = x + (self.alpha * pos).to(x.dtype)  # an fp32 alpha would promote the stream
        x = self.dropout(x).reshape(b * tm, self.d)
        frame_mask = length_mask(frame_lens, tm)  # (B, Tm)
        self_bias = attention_bias(frame_mask, compute_dtype(x))  # (B, 1, 1, Tm)
        kv = self.memory_kv(latents)
        keep = None if self.absolute else frame_mask
        for i, block in enumerate(self.blocks):
            x = block(x, b, kv[i], self_bias=self_bias, keep=keep)  # (B*Tm, d)
        pre = self.mel_out(self.norm(x)).view(b, tm, self.n_mels)
        return pre, pre + self.postnet(pre, frame_mask)

    def forward(self, mel: torch.Tensor, memory: torch.Tensor, mem_mask: torch.Tensor,
                mel_lens: torch.Tensor, token_lens: torch.Tensor, n_text: int) -> dict:
        """Training pass. mel (B, Tm, M) raw log-mel; memory (B, Tt+K, d) = [text ; latents] →
        mel_pre/mel_post (B, Tm, M) raw log-mel, log_dur (B, Tt) predicted, dur (B, Tt) the
        aligner's frames per token, align_logp (B, Tm, Tt) the soft alignment, attn
        (B, Tm/r, Tt) the hard one at the step rate."""
        text, latents = memory[:, :n_text], memory[:, n_text:]  # (B, Tt, d), (B, K, d)
        token_mask = mem_mask[:, :n_text]
        logp = self.aligner(text, normalize_mel(mel), token_lens, mel_lens)  # (B, Tm, Tt)
        align = hard_alignment(logp, token_lens, mel_lens)  # (B, Tm, Tt), no gradient
        pre, post = self._decode(align, text, latents, mel_lens)
        return {"mel_pre": denormalize_mel(pre), "mel_post": denormalize_mel(post),
                "log_dur": self.log_durations(text, latents, token_mask),
                "dur": align.sum(dim=1), "align_logp": logp,
                "attn": align[:, self.r - 1::self.r]}

    def losses(self, batch: dict, out: dict) -> dict:
        """``forward``'s outputs → 0-dim tensors: loss, mel_l1, postnet_l1, duration, align,
        attn_diag (see models.losses)."""
        return duration_losses(self.cfg, batch, out)

    def decode_at_pace(self, text: torch.Tensor, latents: torch.Tensor, token_mask: torch.Tensor,
                       length_scale: torch.Tensor, max_frames: int):
        """The synthesis pass in tensors only, as ``generate`` runs it and the exported graph
        (myxtts.export.graph) records it: text (B, Tt, d), latents (B, K, d), token_mask (B, Tt),
        length_scale a 0-dim float tensor (see :func:`frames_at_pace`) → normalised mel_post
        (B, T, M) with LOG_SILENCE past each length (raw log-mel), lens (B,) capped at
        ``max_frames``, dur (B, Tt) frames per token and the alignment (B, T, Tt); T is a
        multiple of r, kept a tensor so a trace records it as arithmetic."""
        dur = frames_at_pace(self.log_durations(text, latents, token_mask), token_mask, length_scale)
        lens = dur.sum(dim=1).clamp(max=max_frames)  # (B,)
        n = torch.div(lens.max() + self.r - 1, self.r, rounding_mode="floor") * self.r  # frames
        align = durations_to_alignment(dur, n)  # (B, T, Tt)
        _, post = self._decode(align, text, latents, lens)  # (B, T, M) normalised
        return generated_mel(post, length_mask(lens, n)), lens, dur, align

    @torch.no_grad()
    def generate(self, memory: torch.Tensor, mem_mask: torch.Tensor, token_lens: torch.Tensor,
                 n_text: int, max_steps: int, stop_threshold: float,
                 generator: torch.Generator | None = None, speed: float = 1.0):
        """Synthesis of a batch, each sentence as long as its predicted durations at ``speed``
        (2 speaks twice as fast: a length scale of 1/2, see :func:`frames_at_pace`). memory
        (B, Tt+K, d) = [text (n_text) ; latents], mem_mask (B, Tt+K) → mels (B, T, M) raw
        log-mel with LOG_SILENCE past each length, T a multiple of r; lengths (B,) in frames,
        capped at max_steps * r; alignment at the step rate (B, T/r, n_text). ``token_lens``,
        ``stop_threshold`` and ``generator`` go unused: the mask carries the lengths, and
        nothing here stops or samples."""
        text, latents = memory[:, :n_text], memory[:, n_text:]
        mels, lens, _, align = self.decode_at_pace(text, latents, mem_mask[:, :n_text],
                                                   length_scale_of(speed), max_steps * self.r)
        return mels, lens, align[:, self.r - 1::self.r]


def length_scale_of(speed: float) -> torch.Tensor:
    """A speed (2: twice as fast) → the length scale (0-dim float32) Piper's ``scales`` carries
    for the same pace, so a served ``speed`` and an exported ``length_scale`` round alike."""
    return torch.tensor(1.0 / speed, dtype=torch.float32)


def frames_at_pace(log_dur: torch.Tensor, token_mask: torch.Tensor, length_scale: torch.Tensor) -> torch.Tensor:
    """Predicted log(1 + frames) (B, Tt) → whole frames per token (B, Tt) long, 0 past
    ``token_mask``: each token's prediction rounded and at least a frame, then times
    ``length_scale`` (> 1 slower) rounded again and still at least a frame, so every token is
    spoken at every pace and a scale of 1 changes nothing. Tensors only: ONNX has no expm1, so an
    export records exp - 1 (they differ by float rounding, far from a half frame)."""
    pred = torch.exp(log_dur) - 1 if torch.onnx.is_in_onnx_export() else torch.expm1(log_dur)
    frames = (pred.round().clamp(min=1) * length_scale).round().clamp(min=1)
    return frames.long() * token_mask  # (B, Tt)
