"""Each stage's optimizer and learning-rate schedule, built here and handed to its step.

The acoustic model: AdamW (fused kernel), warmup + cosine or constant. The vocoder: AdamW with
HiFi-GAN's betas (0.8, 0.99, as measured), its rate decayed by 0.999 per epoch as HiFi-GAN's
recipe does (``train.schedule=constant`` keeps it fixed)."""
from __future__ import annotations

import math

import torch

from myxtts.config import Config, TrainConfig

EPOCH_DECAY = 0.999  # HiFi-GAN's learning-rate decay per epoch


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig):
    """Fused AdamW at ``cfg.lr``. Weight decay applies to the parameters of 2 or more dimensions
    (matmul and convolution weights, embedding tables) and not to the others (biases, norm gains),
    as in nanoGPT.

    Decay pulls values towards zero. For a weight matrix that is the wanted prior: smaller weights,
    a smoother function. A bias or a gain has no such prior (a gain's neutral value is 1, so decay
    would only shrink the layer's output), and these few values add little capacity to restrain.
    The rank tells the two kinds apart whatever a module or parameter is called, so a new or
    renamed module cannot silently change what is decayed."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    # The fused kernel updates every parameter of a group in one launch and skips the update on
    # the device when ``found_inf`` is set, which is how non-finite steps are dropped without a
    # host sync.
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9, fused=True)


def lr_lambda(cfg: TrainConfig):
    """Multiplier of the base lr at a step, for LambdaLR."""
    warm = max(cfg.warmup_steps, 1)

    def cosine(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / warm
        progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
        return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return {"cosine": cosine, "constant": lambda step: 1.0}[cfg.schedule]


def build_scheduler(optimizer, cfg: TrainConfig):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))


def build_vocoder_optimizer(gen: torch.nn.Module, cfg: Config):
    return torch.optim.AdamW(gen.parameters(), cfg.vocoder.lr, betas=(0.8, 0.99), fused=True)


def build_vocoder_scheduler(optimizer, cfg: Config, epoch_len: int):
    gamma = 1.0 if cfg.train.schedule == "constant" else EPOCH_DECAY ** (1 / max(1, epoch_len))
    return torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma)
