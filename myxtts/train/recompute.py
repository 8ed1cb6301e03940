"""Activation checkpointing: ``train.recompute=true`` recomputes each transformer block in the
backward pass instead of keeping its activations.

A block's attention and feed-forward activations are most of what a training step keeps for the
backward; recomputing them costs about one more forward of the blocks and frees that memory, so
a larger frame budget fits the same GPU (``data.frame_budget=auto`` measures what fits with the
setting on). Applied from outside the model, like compile: the model code stays plain PyTorch.
Non-reentrant ``torch.utils.checkpoint`` works under ``torch.compile`` (AOTAutograd places the
recomputation in the compiled backward) and replays dropout with the random state of the
forward, so a recomputed step computes the same numbers.
"""
from __future__ import annotations

import types

import torch
from torch.utils.checkpoint import checkpoint


def recompute_blocks(model: torch.nn.Module) -> int:
    """Make every transformer block of ``model`` recompute its activations in the backward pass
    while training. Returns how many blocks."""
    from myxtts.models.layers import CrossBlock, DecoderBlock, EncoderBlock

    blocks = [m for m in model.modules() if isinstance(m, (EncoderBlock, CrossBlock, DecoderBlock))]
    for block in blocks:
        # A bound method, not a closure over the block: a deep copy of the model then runs its
        # own weights.
        forward = type(block).forward
        block.forward = types.MethodType(_recomputed(getattr(forward, "unmarked", forward)), block)
    return len(blocks)


def _recomputed(forward):
    """``forward`` (a block class's) wrapped to recompute in the backward. A plain function, not
    a ``functools.partial``: torch 2.11's dynamo cannot call a method made of a partial and
    broke the compiled step's graph at every block (one graph per block instead of one)."""
    def run(self, *args, **kw):
        if self.training and torch.is_grad_enabled():
            return checkpoint(forward, self, *args, use_reentrant=False, **kw)
        return forward(self, *args, **kw)  # generation and validation keep nothing for a backward
    return run


def saved_bytes(fn) -> int:
    """Bytes of the tensors ``fn()`` keeps for its backward pass (each storage counted once): the
    activation memory of a training step, the same on every device."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        if t.device.type != "meta":
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())
