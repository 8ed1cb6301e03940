"""The one place a training run is assembled, for both stages and for every command that
measures training (``profile``, ``doctor``, ``tune``, ``bench``).

Order, fixed and applied from outside the model code: batch sizing (``data.frame_budget=auto``,
train/sizing.py; first, because measuring draws random numbers) → seed and determinism → device
and precision → cache → model(s) → DDP wrap → step (compiled as ``train.compile`` says) →
optimizer and schedule → batches. What comes back is a :class:`Run`, whose ``components`` are
everything a checkpoint must hold besides the weights; each component owns its own state
(``state_dict`` / ``load_state_dict``).
"""
from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass

import torch

from myxtts.config import Config
from myxtts.data.cache import Cache
from myxtts.data.loader import make_sampler
from myxtts.errors import UserError
from myxtts.models.vocoder import HiFiGANGenerator, MultiPeriodDiscriminator, MultiScaleDiscriminator
from myxtts.models.xtts import XTTS
from myxtts.train import distributed as D
from myxtts.train import sizing as S
from myxtts.train.batches import Batches
from myxtts.train.compile import resolve_compile, use_cache
from myxtts.train.distributed import DistInfo
from myxtts.train.optim import build_optimizer, build_scheduler
from myxtts.train.precision import Precision, pick_device, resolve
from myxtts.train.step import TrainStep
from myxtts.train.vocoder import VocoderStep

STAGES = ("acoustic", "vocoder")


@dataclass
class Run:
    cfg: Config
    stage: str                     # acoustic | vocoder
    info: DistInfo
    device: torch.device
    precision: Precision
    cache: Cache
    model: torch.nn.Module         # the bare module a checkpoint's weights belong to
    step_fn: object                # TrainStep | VocoderStep: one optimizer step, no host sync
    optimizer: torch.optim.Optimizer
    scheduler: object
    sampler: object                # the training split's BucketSampler (the run's shapes)
    batches: Batches | None        # endless device batches (None when not asked for)
    compile_note: str = ""         # how train.compile=auto was resolved, for the run header
    budget_note: str = ""          # how data.frame_budget=auto was resolved, for the run header

    @property
    def shapes(self) -> list[tuple[int, int, int]]:
        return self.sampler.shapes()

    @property
    def components(self) -> dict:
        """Everything a checkpoint restores besides the weights, by the name it is saved under.
        The optimizer and schedule of the vocoder stage live inside its step."""
        parts = {"step_fn": self.step_fn}
        if self.stage == "acoustic":
            parts.update(optimizer=self.optimizer, scheduler=self.scheduler)
        if self.batches is not None:
            parts["batches"] = self.batches
        return parts

    def close(self) -> None:
        if self.batches is not None:
            self.batches.stream.close()


def seed_everything(cfg: Config, rank: int = 0) -> None:
    """The run's seed (per rank, so ranks draw different dropout) and determinism settings."""
    torch.manual_seed(cfg.train.seed + rank)
    if cfg.train.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False


def build_run(cfg: Config, data, *, stage: str = "acoustic", info: DistInfo | None = None,
              compile: str | None = None, precision: str | None = None,
              backend: str | None = None, with_batches: bool = True,
              frame_budget: int | None = None) -> Run:
    """Assemble a run on this process's device. ``compile`` and ``precision`` override
    ``train.compile`` / ``train.precision`` and ``backend`` torch.compile's backend (the
    measuring commands compare modes). ``frame_budget``: what ``data.frame_budget=auto`` chose
    when this run started (a resume takes it rather than measuring again)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    info = info or DistInfo()
    tcfg = dataclasses.replace(cfg.train, **{k: v for k, v in (("compile", compile),
                                                               ("precision", precision)) if v})
    cfg = dataclasses.replace(cfg, train=tcfg)
    device = pick_device(info.local_rank)
    budget_note = ""
    if stage == "acoustic":  # sized before seeding: measuring draws random numbers
        cfg, budget_note = size_batches(cfg, data, device, info, frame_budget)
        tcfg = cfg.train
    seed_everything(cfg, info.rank)
    prec = resolve(tcfg.precision, device)
    # The vocoder stage's step runs eagerly whatever train.compile says; the run's config (saved
    # with its checkpoints) says so too.
    mode, note = resolve_compile(tcfg.compile, device, info.enabled) if stage == "acoustic" else ("off", "")
    if mode != "off":
        use_cache(tcfg.compile_cache)
    tcfg = dataclasses.replace(tcfg, compile=mode)
    cfg = dataclasses.replace(cfg, train=tcfg)
    if stage == "vocoder":
        return _vocoder(cfg, data, info, device, prec, with_batches)
    cache = Cache(data, expect=cfg)
    core = XTTS(cfg.model, len(cache.vocab.symbols), cfg.audio.n_mels).to(device)
    opt = build_optimizer(core, tcfg)
    sched = build_scheduler(opt, tcfg)
    step_fn = TrainStep(D.wrap(core, info, device), core, opt, sched, prec, tcfg, backend)
    batches = Batches(cache, cfg, device, info) if with_batches else None
    sampler = batches.sampler if batches else make_sampler(cache, cfg, "train")
    return Run(cfg, stage, info, device, prec, cache, core, step_fn, opt, sched, sampler, batches,
               note, budget_note)


def size_batches(cfg: Config, data, device: torch.device, info: DistInfo,
                 given: int | None = None, probe=None) -> tuple[Config, str]:
    """Resolve ``data.frame_budget=auto`` (train/sizing.py): the config to train with (budget,
    batch cap and learning rate) and a line saying what was chosen and why. ``probe(cfg)``
    makes the object whose ``fits(budget)`` measures a candidate (a GPU measurement by default;
    tests pass a fake)."""
    d = cfg.data
    if d.frame_budget != "auto":
        return cfg, ""
    if given is not None:
        budget, why = given, "as chosen when this run started"
    elif device.type != "cuda" and probe is None:
        return S.with_budget(cfg, d.base_frame_budget), \
            f"data.frame_budget=auto: {d.base_frame_budget} (data.base_frame_budget; memory is sized on a GPU only)"
    else:
        t0 = time.perf_counter()
        made = (probe or gpu_probe(data, device, info))(S.with_budget(cfg, d.base_frame_budget))
        corpus = int(Cache(data).n_frames.sum())  # a larger batch would only repeat utterances
        budget, why = S.search_budget(made.fits, d.base_frame_budget,
                                      max_budget=max(d.base_frame_budget, min(corpus, S.MAX_BUDGET)),
                                      time_limit_s=S.TIME_LIMIT_S - (time.perf_counter() - t0))
        if hasattr(made, "close"):
            made.close()
        if info.enabled:  # every rank must plan the same shapes: the smallest GPU decides
            t = torch.tensor(budget or 0, device=device)
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MIN)
            budget = int(t.item())
        if not budget:
            raise UserError(f"data.frame_budget=auto: {why}")
        why += f"; sized in {time.perf_counter() - t0:.0f} s"
    sized = S.with_budget(cfg, budget, scale_lr=True)
    return sized, (f"data.frame_budget=auto: {budget} frames ({why}), data.max_batch_size "
                   f"{sized.data.max_batch_size}, train.lr {sized.train.lr:.3g} (square-root rule)")


def gpu_probe(data, device: torch.device, info: DistInfo):
    """``probe`` for :func:`size_batches` on this GPU: a run built once (eager, no batches),
    measured against 85 % of the memory free before it was built."""
    def make(cfg: Config) -> S.MemoryProbe:
        free = S.free_memory(device)
        rig = build_run(cfg, data, info=DistInfo(info.rank, 1, info.local_rank), compile="off",
                        with_batches=False)
        return S.MemoryProbe(rig, int(S.HEADROOM * free))
    return make


def _vocoder(cfg, data, info, device, prec, with_batches) -> Run:
    if info.enabled or int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise UserError("the vocoder stage runs on one process; start it without torchrun")
    # Asked first, so that a cache without waveforms gets this message rather than a settings
    # mismatch on data.store_wav (on-the-fly mode decodes the source audio instead).
    if not cfg.data.on_the_fly and not Cache(data).has_wav:
        raise UserError(f"{data}: the cache holds no waveforms (prepared with data.store_wav="
                        "false); the vocoder trains on them: prepare it again with "
                        "data.store_wav=true, or train with data.on_the_fly=true")
    cache = Cache(data, expect=cfg)
    gen = HiFiGANGenerator(cfg.vocoder, cfg.audio.n_mels, cfg.audio.hop_length).to(device)
    mpd, msd = MultiPeriodDiscriminator().to(device), MultiScaleDiscriminator().to(device)
    batches = Batches(cache, cfg, device, info, with_wav=True) if with_batches else None
    sampler = batches.sampler if batches else make_sampler(cache, cfg, "train")
    step_fn = VocoderStep(cfg, gen, mpd, msd, prec, len(sampler))
    return Run(cfg, "vocoder", info, device, prec, cache, gen, step_fn, step_fn.opt_g,
               step_fn.sched_g, sampler, batches)
