"""Building blocks shared by the text encoder, reference encoder and the two mel decoders.

Everything here is shape-static: padding is handled with masks (boolean, True = valid; for
attention an additive bias built once per stack), never by slicing to a data-dependent length,
so a compiled step sees one graph per bucket shape. Attention goes through
``F.scaled_dot_product_attention`` (flash / memory-efficient kernels on GPUs); only a
cross-attention that must *return* its weights (the decoder's alignment layer, needed for the
guided-attention loss) computes them explicitly.

Eager steps are launch-bound on a fast GPU (each ATen op costs the host a few microseconds), so
the blocks keep their op count low: fused norms, one QKV projection for self-attention, masks
converted once per stack rather than once per layer (docs/design.md, "Operations per step").

Each block's forward is a compile region (``repeated``): a compiled step traces and compiles a
block kind once and calls that code for every layer. For that, a block returns tensors only and
takes no two inputs that are views of one tensor (the compiler refuses both); and every layer's
inputs must look alike to torch 2.11, which compares their metadata as written, so the encoder
and resampler blocks read the batch size off a tensor they are given (2.11 gave the first
layer's batch-size argument a symbol of its own) and the resampler joins its keys inside.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class Norm(nn.LayerNorm):
    """LayerNorm that returns its input's dtype under autocast, where autocast's own LayerNorm
    returns fp32: with the residual stream in the compute dtype (bf16), that fp32 output was a
    copy of the stream at twice its bytes into every norm and a cast back out of it, forward and
    backward. The kernel accumulates its statistics in fp32 on every device whatever the input's
    dtype, so only the output's rounding changes. Outside autocast it is nn.LayerNorm."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dev = autocast_device(x)
        if dev is None:
            return super().forward(x)
        with torch.autocast(dev, enabled=False):
            bias = None if self.bias is None else self.bias.to(x.dtype)
            return F.layer_norm(x, self.normalized_shape, self.weight.to(x.dtype), bias, self.eps)


def norm(dim: int) -> Norm:
    """The blocks' pre-norm: LayerNorm with a gain and no bias. One fused kernel forward and one
    backward on every device (a hand-written norm costs a dozen element-wise kernels each way);
    in the residual stream's dtype (``Norm``)."""
    return Norm(dim, bias=False)


def repeated(forward):
    """Mark a block's forward as a region that ``torch.compile`` compiles once and calls again
    for every layer of the same kind (``torch.compiler.nested_compile_region``): a step with 16
    blocks then lowers and generates code for three block kinds, not 16 layers. Outside
    ``torch.compile`` the call is a plain call. A torch without the marker compiles every layer,
    as before. ``train.compile`` keeps inductor from reusing a region's input buffers
    (``compile.keep_region_inputs``). The region keeps the plain forward as ``unmarked``:
    activation checkpointing (``train.recompute``) wraps that one, because torch 2.11 replays a
    checkpointed region's dropout with other masks than its forward drew."""
    mark = getattr(torch.compiler, "nested_compile_region", None)
    if mark is None:
        return forward
    region = mark(forward)
    region.unmarked = forward
    return region


def autocast_device(x: torch.Tensor) -> str | None:
    """``x``'s device type when autocast is on for it, else None. Meta tensors (FLOPs counted
    without memory) have no autocast to ask about."""
    dev = x.device.type
    return dev if dev != "meta" and torch.is_autocast_enabled(dev) else None


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype matmuls and attention produce for ``x``'s device: autocast's when it is on."""
    dev = autocast_device(x)
    return x.dtype if dev is None else torch.get_autocast_dtype(dev)


def in_compute_dtype(x: torch.Tensor) -> torch.Tensor:
    """``x`` cast to the dtype matmuls produce (``compute_dtype``): where a stack's residual
    stream starts, so that it stays in that dtype through every block. An fp32 stream under bf16
    autocast (an embedding's or a learned latent's dtype, or a position code scaled by an fp32
    parameter) promotes every residual add to fp32 and doubles the bytes of each element-wise
    kernel on it."""
    return x.to(compute_dtype(x))


def attention_bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Key-padding mask (B, Tk) bool, True = real key → additive attention bias (B, 1, 1, Tk):
    0 for real keys, the dtype's most negative number for padding. Built once per stack and
    shared by its layers: a boolean mask is converted to this inside every attention call.
    Finite rather than -inf, so a row with every key masked stays finite."""
    zero = torch.zeros((), dtype=dtype, device=mask.device)
    return torch.where(mask[:, None, None, :], zero, torch.finfo(dtype).min)


def sinusoidal_positions(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """(T,) or (B, T) integer/float positions → (..., dim) sin/cos encoding (Vaswani et al.).

    Computed on the fly (no table), so any length works, including generation past the longest
    training utterance; under torch.compile this folds into a couple of fused kernels.
    """
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=positions.device,
                                                         dtype=torch.float32) / half)  # (half,)
    angles = positions.float().unsqueeze(-1) * freqs  # (..., half)
    pe = torch.cat([angles.sin(), angles.cos()], dim=-1)  # (..., 2*half)
    if dim % 2:
        pe = F.pad(pe, (0, 1))
    return pe


class FeedForward(nn.Module):
    """MLP d → ff_mult*d → d with GELU, position-wise; with ``kernel`` > 1 its first layer is a
    convolution over each sequence's rows instead (FastPitch's and FastSpeech 2's feed-forward):
    a row then hears its neighbours, which is how the duration decoder's frames learn where they
    sit in their phone without absolute positions."""

    def __init__(self, dim: int, ff_mult: int, dropout: float, kernel: int = 1):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim * ff_mult) if kernel == 1 else \
            nn.Conv1d(dim, dim * ff_mult, kernel, padding=kernel // 2)
        self.fc2 = nn.Linear(dim * ff_mult, dim)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """x (N, d) rows → (N, d). A convolving one needs ``keep`` (B, T) bool, the rows as B
        sequences of T with False at padding: padding is zeroed first, so no sequence hears it."""
        if isinstance(self.fc1, nn.Linear):
            h = self.fc1(x)  # (N, ff)
        else:
            if keep is None:
                raise ValueError("a convolving feed-forward needs keep: which rows are padding")
            b, t = keep.shape
            seq = x.view(b, t, -1) * keep[..., None].to(x.dtype)  # (B, T, d)
            h = self.fc1(seq.transpose(1, 2)).transpose(1, 2).reshape(b * t, -1)  # (B*T, ff)
        h = F.gelu(h, approximate="tanh")
        return F.dropout(self.fc2(h), self.dropout, self.training)


class KVCache:
    """Pre-allocated keys/values of one self-attention layer during generation.

    Buffers are sized for the whole generation up front so each step writes in place instead of
    concatenating (no re-allocation per step, and a fixed layout a CUDA graph could capture).
    """

    def __init__(self, batch: int, heads: int, max_len: int, head_dim: int, device, dtype):
        self.k = torch.zeros(batch, heads, max_len, head_dim, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)

    def update(self, k: torch.Tensor, v: torch.Tensor, pos: int):
        """Write (B, H, n, dh) at ``pos``; return keys/values up to and including them."""
        n = k.shape[2]
        self.k[:, :, pos:pos + n] = k
        self.v[:, :, pos:pos + n] = v
        return self.k[:, :, :pos + n], self.v[:, :, :pos + n]


class Attention(nn.Module):
    """Multi-head attention; self- (``kv is None``) or cross-attention.

    Activations come as rows, x (B*Tq, d) and kv (B*Tk, d), with the batch size ``b`` given:
    the blocks keep the residual stream two-dimensional so that every projection is a plain
    matmul (a (B, T, d) input costs each linear two reshapes forward and two backward).
    bias: additive key-padding bias (B, 1, 1, Tk) from ``attention_bias``.
    causal: for self-attention in training (the decoder); with a ``cache`` (generation) the query
    is the newest step and sees every cached key, so no mask is needed.
    need_weights: compute attention explicitly and also return head-averaged weights (B, Tq, Tk).
    """

    def __init__(self, dim: int, n_heads: int, dropout: float, cross: bool = False,
                 own_kv: bool = True):
        """``own_kv=False``: a cross-attention whose keys and values always come projected
        (``kv_proj``), e.g. by one matmul shared by every layer of a stack."""
        super().__init__()
        assert dim % n_heads == 0, "dim must be divisible by n_heads"
        self.h, self.dh, self.cross, self.dropout = n_heads, dim // n_heads, cross, dropout
        if cross:
            self.q = nn.Linear(dim, dim)
            if own_kv:
                self.kv = nn.Linear(dim, 2 * dim)
        else:
            self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def _split(self, x: torch.Tensor, b: int, n: int):
        """(B*T, n*d) projection → n tensors (B, H, T, dh), as views."""
        return x.view(b, -1, n, self.h, self.dh).permute(2, 0, 3, 1, 4).unbind(0)

    def project_kv(self, kv: torch.Tensor, b: int):
        """Memory (B*Tk, d) → keys, values (B, H, Tk, dh); cached once per generation."""
        return self._split(self.kv(kv), b, 2)

    def forward(self, x, b: int, kv=None, bias=None, causal=False, cache: KVCache | None = None,
                pos: int = 0, kv_proj=None, need_weights=False):
        if self.cross:
            (q,) = self._split(self.q(x), b, 1)  # (B, H, Tq, dh)
            k, v = kv_proj.unbind(0) if kv_proj is not None else self.project_kv(kv, b)  # (B, H, Tk, dh)
        else:
            q, k, v = self._split(self.qkv(x), b, 3)  # (B, H, Tq, dh) each
            if cache is not None:
                k, v = cache.update(k, v, pos)
                causal = causal and q.shape[2] > 1  # one new query may see the whole cache
        if bias is not None and bias.dtype != q.dtype:
            bias = bias.to(q.dtype)  # only when the caller built it for another dtype
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)  # (B, H, Tq, Tk)
            if bias is not None:
                scores = scores + bias
            probs = torch.softmax(scores.float(), dim=-1).type_as(q)  # (B, H, Tq, Tk)
            weights = probs.mean(1)  # (B, Tq, Tk)
            y = torch.matmul(F.dropout(probs, p, self.training), v)  # (B, H, Tq, dh)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p,
                                               is_causal=causal and bias is None)
        y = y.transpose(1, 2).reshape(x.shape[0], -1)  # (B*Tq, d)
        return self.out(y), weights


class EncoderBlock(nn.Module):
    """Pre-norm transformer block: bidirectional self-attention (key padding) + FFN.
    x (B*T, d) rows of the batch of ``bias`` (B, 1, 1, T), whose size the block reads off it."""

    def __init__(self, dim: int, n_heads: int, ff_mult: int, dropout: float):
        super().__init__()
        self.norm1, self.norm2 = norm(dim), norm(dim)
        self.attn = Attention(dim, n_heads, dropout)
        self.ff = FeedForward(dim, ff_mult, dropout)
        self.dropout = dropout

    @repeated
    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        a, _ = self.attn(self.norm1(x), bias.shape[0], bias=bias)
        x = x + F.dropout(a, self.dropout, self.training)
        return x + self.ff(self.norm2(x))


class CrossBlock(nn.Module):
    """Pre-norm block that only cross-attends (+ FFN): the perceiver resampler's layer.
    x (B*K, d) rows of the latents; they attend to [feats (B, Tf, d) ; themselves], masked by
    ``bias`` (B, 1, 1, Tf + K). The keys are joined inside the block: joined outside, the second
    layer's keys reached torch 2.11 with a storage size written another way than the first's
    (the same number), and 2.11 then compiled each layer on its own."""

    def __init__(self, dim: int, n_heads: int, ff_mult: int, dropout: float):
        super().__init__()
        self.norm_q, self.norm_kv, self.norm_ff = norm(dim), norm(dim), norm(dim)
        self.attn = Attention(dim, n_heads, dropout, cross=True)
        self.ff = FeedForward(dim, ff_mult, dropout)

    @repeated
    def forward(self, x, feats, bias):
        b, _, d = feats.shape
        kv = torch.cat([feats, x.view(b, -1, d)], dim=1).view(-1, d)  # (B*(Tf+K), d)
        a, _ = self.attn(self.norm_q(x), b, kv=self.norm_kv(kv), bias=bias)
        x = x + a
        return x + self.ff(self.norm_ff(x))


class DecoderBlock(nn.Module):
    """Pre-norm block: causal self-attention (KV-cached when generating), cross-attention over
    the memory ([text ; conditioning latents]), FFN. x (B*S, d) rows of a batch of ``b``. The
    memory's keys and values come projected (``kv_proj`` (2, B, H, Tk, dh), one layer's share of
    ``MemoryKV``). Returns x, or (x, cross-attention weights (B, S, Tk)) with ``need_weights``.
    With ``self_bias`` (a key-padding bias over the rows' own sequence) the self-attention is
    bidirectional instead: the duration decoder's frames see each other both ways. With
    ``ff_kernel`` > 1 the feed-forward convolves over the sequence and takes ``keep`` (B, S)."""

    def __init__(self, dim: int, n_heads: int, ff_mult: int, dropout: float, ff_kernel: int = 1):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = norm(dim), norm(dim), norm(dim)
        self.self_attn = Attention(dim, n_heads, dropout)
        self.cross_attn = Attention(dim, n_heads, dropout, cross=True, own_kv=False)
        self.ff = FeedForward(dim, ff_mult, dropout, ff_kernel)
        self.dropout = dropout

    @repeated
    def forward(self, x, b: int, kv_proj, mem_bias=None, need_weights=False, cache=None, pos=0,
                self_bias=None, keep=None):
        a, _ = self.self_attn(self.norm1(x), b, bias=self_bias, causal=self_bias is None,
                              cache=cache, pos=pos)
        x = x + F.dropout(a, self.dropout, self.training)
        c, w = self.cross_attn(self.norm2(x), b, bias=mem_bias, kv_proj=kv_proj,
                               need_weights=need_weights)
        x = x + F.dropout(c, self.dropout, self.training)
        x = x + self.ff(self.norm3(x), keep)
        return (x, w) if need_weights else x


class MemoryKV(nn.Linear):
    """Every decoder layer's cross-attention keys and values of the memory (d → 2*d per layer),
    one weight for the stack. Both mel decoders project their memory this way and hand layer i
    its ``kv_proj``. Each layer's share is its own matmul on its rows of the weight, not a view
    into one projection of all layers: torch 2.11 reuses a compile region only for inputs at
    the same storage offset, and views of one tensor sit at L different offsets (every decoder
    layer was then compiled on its own). The memory is short (the reference's latents, and the
    text for the autoregressive decoder: tokens, not frames), so the L small matmuls cost L-1
    launches and nothing more."""

    def __init__(self, dim: int, n_layers: int, n_heads: int):
        super().__init__(dim, n_layers * 2 * dim)
        self.n_layers, self.h, self.dh = n_layers, n_heads, dim // n_heads

    def forward(self, memory: torch.Tensor) -> list[torch.Tensor]:
        """memory (B, Tk, d) → L x keys and values (2, B, H, Tk, dh); computed once per pass or
        per generation. One tensor per layer, not a pair of views: a compile region refuses two
        inputs that alias."""
        b, tk, d = memory.shape
        x = memory.reshape(b * tk, d)
        w = self.weight.view(self.n_layers, 2 * d, d)  # layer i's rows: its keys', then values'
        bias = self.bias.view(self.n_layers, 2 * d)
        return [F.linear(x, w[i], bias[i]).view(b, tk, 2, self.h, self.dh).permute(2, 0, 3, 1, 4)
                for i in range(self.n_layers)]  # L x (2, B, H, Tk, dh)


def length_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """(B,) lengths → (B, max_len) bool, True at valid positions. No host sync."""
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]
