"""The exported voice as one module: Piper's phoneme ids → audio, written for ``torch.onnx``.

Piper feeds ``input`` (B, N) = BOS, then each phoneme's id followed by the pad id, then EOS;
``input_lengths`` (B,); ``scales`` (3,) = noise_scale, length_scale, noise_w; and ``sid`` (B,)
for a voice of several speakers. Inside the graph:

1. every id is looked up in a table of the model's token ids (:mod:`myxtts.export.phonemes`:
   Piper's EOS becomes the model's end of sentence; the pads, BOS and the phonemes read as
   nothing are dropped), the kept ones moved to the front of their row by a sort, so rows of a
   batch may differ;
2. the text encoder and :meth:`myxtts.models.duration_decoder.DurationDecoder.decode_at_pace`,
   the tensor-only pass ``generate`` runs too: ``length_scale`` is the pace a ``speed`` of
   1 / length_scale gives in ``myxtts synthesize`` and ``serve``, frame for frame;
3. the voice is a row of a table of reference-encoder latents, one per speaker, computed when
   exporting from each speaker's reference clip (the reference encoder is not in the graph);
4. the mel, cut to its length, goes through the run's vocoder as :class:`myxtts.vocode.MelToWave`
   sends it (:func:`myxtts.vocode.pad_and_cut`), with its inverse STFT in plain operators (:mod:`myxtts.export.istft`).

``noise_scale`` and ``noise_w`` are read and ignored: the duration decoder samples nothing.
Outputs: ``output`` (B, 1, S) in [-1, 1]; ``durations`` (B, N), frames per input id (0 for
those dropped), the alignment Piper's runtime multiplies by ``hop_length``; and ``mel``
(B, T, M), the log-mel the vocoder heard, which Piper ignores and a parity check reads.
"""
from __future__ import annotations

import torch
from torch import nn

from myxtts.models.layers import length_mask
from myxtts.text import PAD_ID
from myxtts.vocode import pad_and_cut


class PiperGraph(nn.Module):
    def __init__(self, model, vocoder: nn.Module, latents: torch.Tensor, id_to_token: torch.Tensor,
                 min_frames: int, hop: int, language: int | None = None):
        """``model``: a trained XTTS with the duration decoder; ``vocoder``: mel (B, T, M) → wav
        (B, T * hop) in exportable operators; ``latents`` (S, K, d) per speaker; ``id_to_token``
        (num_symbols,) long: Piper id → model token id, negative for an id to drop; ``language``:
        the row of the model's language table every sentence is read with (None: it has none)."""
        super().__init__()
        self.text_encoder, self.decoder, self.vocoder = model.text_encoder, model.decoder, vocoder
        self.max_frames = model.cfg.max_decoder_steps * model.cfg.reduction
        self.min_frames, self.hop, self.language = min_frames, hop, language
        self.register_buffer("latents", latents)
        self.register_buffer("id_to_token", id_to_token)

    def tokens(self, ids: torch.Tensor, lengths: torch.Tensor):
        """Piper ids (B, N) → model tokens (B, N), token_lens (B,), and each token's input
        position (B, N)."""
        n = ids.shape[1]
        pos = torch.arange(n)[None, :]  # (1, N)
        mapped = self.id_to_token[ids]  # (B, N)
        keep = (mapped >= 0) & (pos < lengths[:, None])  # (B, N)
        # Kept positions first, in order: sort by position, plus N for those dropped.
        order = torch.argsort(pos + n * (~keep).long(), dim=1)  # (B, N)
        tokens = torch.gather(mapped, 1, order)  # (B, N)
        lens = keep.sum(dim=1)  # (B,)
        tokens = torch.where(length_mask(lens, n), tokens, torch.full_like(tokens, PAD_ID))
        return tokens, lens, order

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, scales: torch.Tensor,
                sid: torch.Tensor | None = None):
        tokens, token_lens, order = self.tokens(ids, lengths)
        language = None if self.language is None else torch.full_like(token_lens, self.language)  # (B,)
        text, text_mask = self.text_encoder(tokens, token_lens, language)  # (B, Tt, d), (B, Tt)
        lat = self.latents[sid] if sid is not None else self.latents[:1].expand(ids.shape[0], -1, -1)  # (B, K, d)
        mel, lens, dur, _ = self.decoder.decode_at_pace(text, lat, text_mask, scales[1], self.max_frames)
        t = lens.max()
        mel = mel[:, :t]  # (B, T', M)
        wav = pad_and_cut(self.vocoder, mel, t, self.min_frames, self.hop)  # (B, S): as MelToWave vocodes
        wav = wav * length_mask(lens * self.hop, wav.shape[1]).to(wav.dtype)  # silence past each row's end
        # Frames per input id: each token's frames at its input position, 0 for those dropped.
        per_id = torch.zeros(ids.shape, dtype=torch.float32).scatter(1, order, dur.float())  # (B, N)
        return wav.clamp(-1.0, 1.0)[:, None, :], per_id, mel
