"""AdamW (fused kernel) and the learning-rate schedules: warmup + cosine, Noam, constant."""
from __future__ import annotations

import math

import torch

from myxtts.config import TrainConfig


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig, lr: float | None = None):
    """Fused AdamW; norms, biases and embeddings are exempt from weight decay (the usual
    transformer recipe: decaying a gain towards zero only hurts)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "embed" in name or "norm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    # The fused kernel updates every parameter of a group in one launch and skips the update on
    # the device when ``found_inf`` is set, which is how non-finite steps are dropped without a
    # host sync.
    return torch.optim.AdamW(groups, lr=lr or cfg.lr, betas=(0.9, 0.98), eps=1e-9, fused=True)


def lr_lambda(cfg: TrainConfig):
    """Multiplier of the base lr at a step, for LambdaLR."""
    warm = max(cfg.warmup_steps, 1)

    def cosine(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / warm
        progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
        return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    def noam(step: int) -> float:
        # Vaswani et al.: linear warmup then 1/sqrt(step), peaking at the base lr.
        s = step + 1
        return min(s / warm, math.sqrt(warm / s))

    return {"cosine": cosine, "noam": noam, "constant": lambda step: 1.0}[cfg.schedule]


def build_scheduler(optimizer, cfg: TrainConfig):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
