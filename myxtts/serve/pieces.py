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
FIRST = 16  # frames in a request's first piece (~0.19 s at 22.05 kHz / hop 256): first audio early
REST = 96  # frames in each later piece: fewer, larger vocoder calls once playback has started


def bounds(n_frames: int, first: int = FIRST, rest: int = REST) -> list[tuple[int, int]]:
    """[(start, end)) frame ranges covering ``n_frames``: a short first piece, then ``rest`` each."""
    out, a = [], 0
    while a < n_frames:
        b = min(n_frames, a + (first if not out else rest))
        out.append((a, b))
        a = b
    return out


class Pieces:
    """The pieces of one sentence, one at a time: :meth:`window` is the mel to vocode next (the
    piece's frames and their context), :meth:`take` its audio → the piece to send. Each piece but
    the last holds back its final ``FADE`` frames, which the next piece fades into from its own
    rendering of the same frames."""

    def __init__(self, mel: torch.Tensor, hop: int, first: int = FIRST, rest: int = REST):
        self.mel, self.hop = mel, hop  # (T, n_mels)
        self.spans = bounds(mel.shape[0], first, rest)
        self.k = 0
        self.tail = None  # (FADE * hop,) the previous piece's held-back end
        self.ramp = np.linspace(0.0, 1.0, FADE * hop, endpoint=False, dtype=np.float32)

    @property
    def done(self) -> bool:
        return self.k >= len(self.spans)

    def _lo_hi(self) -> tuple[int, int]:
        a, b = self.spans[self.k]
        return max(0, a - CONTEXT), min(self.mel.shape[0], b + CONTEXT)

    def window(self) -> torch.Tensor:
        lo, hi = self._lo_hi()
        return self.mel[lo:hi]  # (hi - lo, n_mels)

    def take(self, wav: np.ndarray) -> np.ndarray:
        """The window's audio ((hi - lo) * hop,) → the next piece to send."""
        (a, b), (lo, _), hop = self.spans[self.k], self._lo_hi(), self.hop
        s = (a - lo) * hop
        piece = wav[s:(b - lo) * hop]
        if self.tail is not None:
            fade_in = wav[s - self.tail.size:s]  # the frames before a, as this window renders them
            ramp = self.ramp[:self.tail.size]
            piece = np.concatenate([self.tail * (1.0 - ramp) + fade_in * ramp, piece])
        self.k += 1
        keep = 0 if self.done else min(FADE * hop, (b - a) * hop)
        self.tail = piece[piece.size - keep:].copy() if keep else None
        return np.asarray(piece[:piece.size - keep], dtype=np.float32)


def pieces(mel: torch.Tensor, to_wave, hop: int, first: int = FIRST, rest: int = REST) -> Iterator[np.ndarray]:
    """mel (T, n_mels) → float32 waveform pieces whose concatenation is T * hop samples."""
    p = Pieces(mel, hop, first, rest)
    while not p.done:
        yield p.take(to_wave(p.window()))


def vocode(to_wave, windows: list[torch.Tensor]) -> list[np.ndarray]:
    """Windows of several sentences → their audio. A trained vocoder takes windows of one length
    in one batch (most are: every later piece's window is ``REST + 2 * CONTEXT`` frames, and no
    padding is needed, so each output is its window's alone); Griffin-Lim takes them one by one."""
    out: list = [None] * len(windows)
    by_len: dict[int, list[int]] = {}
    for i, w in enumerate(windows):
        by_len.setdefault(w.shape[0], []).append(i)
    for idx in by_len.values():
        if len(idx) == 1 or to_wave.griffin_lim:
            for i in idx:
                out[i] = to_wave(windows[i])
            continue
        wavs = to_wave.batch(torch.stack([windows[i] for i in idx]))  # (B, T * hop)
        for i, wav in zip(idx, wavs):
            out[i] = wav
    return out
