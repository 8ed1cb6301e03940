"""One sentence's mel → its waveform in pieces, so the first can be played before the rest is made.

The trained vocoder is convolutional: a sample depends only on the mel frames within its
receptive field (the Fourier head's embedding and six ConvNeXt blocks see 3 frames either side
each, 21 in all, and the inverse STFT overlaps 2 more). A piece vocoded with ``CONTEXT`` frames of
the mel on each side and cut back to its own frames is therefore the whole sentence's audio for
those frames: cut on frame boundaries, the pieces join without a seam. Griffin-Lim has no such
window (its phase is iterated over the whole clip), so pieces also overlap by ``FADE`` frames
and are cross-faded there: where the vocoder is exact, fading between two equal signals changes
nothing; where it is not, it removes the step a hard cut would click on.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

CONTEXT = 24  # frames of mel either side of a piece: the vocoder's receptive field, and more
FADE = 4  # frames cross-faded between pieces
FIRST = 16  # frames in the first piece (~0.19 s at 22.05 kHz / hop 256): first audio early
REST = 96  # frames in each later piece: fewer, larger vocoder calls once playback has started


def bounds(n_frames: int, first: int = FIRST, rest: int = REST) -> list[tuple[int, int]]:
    """[(start, end)) frame ranges covering ``n_frames``: a short first piece, then ``rest`` each."""
    out, a = [], 0
    while a < n_frames:
        b = min(n_frames, a + (first if not out else rest))
        out.append((a, b))
        a = b
    return out


def pieces(mel: torch.Tensor, to_wave, hop: int, first: int = FIRST, rest: int = REST) -> Iterator[np.ndarray]:
    """mel (T, n_mels) → float32 waveform pieces whose concatenation is T * hop samples.

    Each piece but the last holds back its final ``FADE`` frames, which the next piece fades
    into from its own rendering of the same frames."""
    t = mel.shape[0]
    ramp = np.linspace(0.0, 1.0, FADE * hop, endpoint=False, dtype=np.float32)  # (FADE * hop,)
    tail = None  # (FADE * hop,) the previous piece's held-back end
    spans = bounds(t, first, rest)
    for k, (a, b) in enumerate(spans):
        lo, hi = max(0, a - CONTEXT), min(t, b + CONTEXT)
        wav = to_wave(mel[lo:hi])  # ((hi - lo) * hop,)
        s = (a - lo) * hop
        piece = wav[s:(b - lo) * hop]
        if tail is not None:
            fade_in = wav[s - tail.size:s]  # the frames before a, as this window renders them
            head = tail * (1.0 - ramp[:tail.size]) + fade_in * ramp[:tail.size]
            piece = np.concatenate([head, piece])
        last = k == len(spans) - 1
        keep = 0 if last else min(FADE * hop, (b - a) * hop)
        tail = piece[piece.size - keep:].copy() if keep else None
        yield np.asarray(piece[:piece.size - keep], dtype=np.float32)
