"""Each stage's optimizer and learning-rate schedule, built here and handed to its step.

The acoustic model: AdamW (fused kernel), warmup + cosine (under a time budget: warmup, the
peak rate, and a cosine over the budget's last 20 %) or constant. The vocoder: AdamW with
HiFi-GAN's betas (0.8, 0.99, as measured), its rate decayed by 0.999 per epoch as HiFi-GAN's
recipe does, and a cosine over the last 20 % of its steps or its time budget
(``train.schedule=constant`` keeps it fixed)."""
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


# The share of the steps the rate anneals over, at the end: of a time-budgeted acoustic run's, of
# every vocoder run's.
COOLDOWN = 0.2


def lr_lambda(cfg: TrainConfig, horizon: Horizon | None = None):
    """Multiplier of the base lr at a step, for LambdaLR: a linear warm-up, then a cosine down to
    ``min_lr_ratio`` at ``train.max_steps``. Under a time budget (``horizon``), the peak rate
    holds until the last ``COOLDOWN`` of the steps the budget is expected to allow, and the cosine
    runs over those: the decay then starts when the estimate is at its surest, and the weights
    the run ends with have had their low-rate steps (warmup-stable-decay, as in Hägele et al.
    2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations", where a
    20 % cool-down matched a cosine)."""
    warm = max(cfg.warmup_steps, 1)

    def cosine(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / warm
        if horizon is None:
            progress = (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps)
            return _cosine(progress, cfg.min_lr_ratio)
        return cooldown(step - cfg.warmup_steps, horizon.end - cfg.warmup_steps, cfg.min_lr_ratio)

    return {"cosine": cosine, "constant": lambda step: 1.0}[cfg.schedule]


def _cosine(progress: float, floor: float) -> float:
    """1 at progress 0, ``floor`` at 1 and after, along half a cosine."""
    progress = min(1.0, max(0.0, progress))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def cooldown(step: int, end: int, floor: float) -> float:
    """Warmup-stable-decay's decay: 1 until the last ``COOLDOWN`` of ``end`` steps, then a cosine
    down to ``floor`` at ``end``."""
    return _cosine((step / max(1, end) - (1 - COOLDOWN)) / COOLDOWN, floor)


class Horizon:
    """Where the schedule ends when ``train.time_budget_s`` ends the run: the step the budget is
    expected to run out at, not ``train.max_steps``, so the rate anneals within the time the run
    has, on whatever machine. (A 3-minute demo makes 340 steps on one CPU and 570 on another;
    with the cosine spread over ``max_steps`` it stopped at the peak rate, never reaching the
    low-rate steps that settle the weights.)

    The end is re-estimated as the run goes, from its steps per second since the first estimate
    (so not from the first steps, which pay for warm-ups). It is not checkpointed: a resumed run
    has a budget of its own, and estimates anew."""

    def __init__(self, cfg: TrainConfig):
        self.end, self.budget_s, self.max_steps = cfg.max_steps, cfg.time_budget_s, cfg.max_steps
        self._origin: tuple[int, float] | None = None  # (step, seconds) the rate counts from

    @staticmethod
    def of(cfg: TrainConfig) -> Horizon | None:
        """None where there is nothing to move: no time budget, or no cosine."""
        return Horizon(cfg) if cfg.time_budget_s and cfg.schedule == "cosine" else None

    def estimate(self, step: int, elapsed_s: float) -> int | None:
        """The step the budget is expected to end at, given ``step`` steps done after
        ``elapsed_s`` of it; None until a rate can be measured."""
        if self._origin is None:
            self._origin = (step, elapsed_s)
            return None
        step0, elapsed0 = self._origin
        if step <= step0 or elapsed_s <= elapsed0:
            return None
        rate = (step - step0) / (elapsed_s - elapsed0)
        left = max(0.0, self.budget_s - elapsed_s)
        return min(self.max_steps, step + round(left * rate))


def build_scheduler(optimizer, cfg: TrainConfig, horizon: Horizon | None = None):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, horizon))


def build_vocoder_optimizer(gen: torch.nn.Module, cfg: Config):
    return torch.optim.AdamW(gen.parameters(), cfg.vocoder.lr, betas=(0.8, 0.99), fused=True)


def build_vocoder_scheduler(optimizer, cfg: Config, epoch_len: int, horizon: Horizon | None = None):
    """HiFi-GAN's decay per epoch, then the last ``COOLDOWN`` of the steps (of ``horizon``'s
    estimate under a time budget) anneal to ``train.min_lr_ratio``, as the acoustic model's
    budget does: HiFi-GAN's recipe runs for millions of steps, and a run of a few thousand
    ended near its peak rate. End to end, three seeds on four models, the annealed vocoders
    said the held-out sentences at 29.6 % pooled WER against 31.9 %
    (benchmarks/results/2026-11-29-vocoder-cooldown-cpu.md)."""
    if cfg.train.schedule == "constant":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    per_step = EPOCH_DECAY ** (1 / max(1, epoch_len))
    floor = cfg.train.min_lr_ratio

    def rate(step: int) -> float:
        end = cfg.train.max_steps if horizon is None else horizon.end
        return per_step ** step * cooldown(step, end, floor)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
