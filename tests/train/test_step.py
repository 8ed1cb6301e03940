import math

import numpy as np
import pytest
import torch

from myxtts.config import load
from myxtts.models.xtts import XTTS
from myxtts.train.compile import compile_step
from myxtts.train.optim import (
    EPOCH_DECAY,
    Horizon,
    build_optimizer,
    build_scheduler,
    build_vocoder_scheduler,
    lr_lambda,
)
from myxtts.train.precision import resolve
from myxtts.train.step import TrainStep

from .conftest import FAST


def _batch(n_vocab=20, n_mels=80, b=2, tt=16, tm=32):
    g = torch.Generator().manual_seed(0)
    return {"tokens": torch.randint(2, n_vocab, (b, tt), generator=g),
            "token_lens": torch.tensor([tt, tt - 3]), "mel": torch.randn(b, tm, n_mels, generator=g) - 4,
            "mel_lens": torch.tensor([tm, tm - 6]), "ref_mel": torch.randn(b, 32, n_mels, generator=g) - 4,
            "ref_lens": torch.tensor([32, 20]), "speaker": torch.zeros(b, dtype=torch.long)}


def _setup(*overrides):
    cfg = load("tiny", [o for o in FAST if o.startswith("model.")] + list(overrides))
    torch.manual_seed(0)
    core = XTTS(cfg.model, 20, 80)
    opt = build_optimizer(core, cfg.train)
    step = TrainStep(core, core, opt, build_scheduler(opt, cfg.train), resolve("fp32", torch.device("cpu")),
                     cfg.train)
    # aot_eager: dynamo capture and AOTAutograd's forward/backward as compiled, without
    # inductor's C++ code generation (minutes on a small CPU)
    compile_step(step, cfg.train.compile, backend="aot_eager")
    return core, opt, step


def test_non_finite_steps_are_skipped_on_the_device_and_counted():
    core, opt, step = _setup("train.compile=off")
    before = [p.detach().clone() for p in core.parameters()]
    bad = _batch()
    bad["mel"][0, 0, 0] = float("nan")
    step([bad])
    step([bad])
    assert all(torch.equal(a, p) for a, p in zip(before, core.parameters()))
    window = step.read_window()
    assert window["skipped_steps"] == 2 and window["skipped_in_a_row"] == 2
    step([_batch()])
    assert not all(torch.equal(a, p) for a, p in zip(before, core.parameters()))
    window = step.read_window()
    assert window["skipped_in_a_row"] == 0 and window["skipped_steps"] == 2
    assert math.isfinite(window["loss"])


def test_gradient_accumulation_averages_micro_batches():
    _, _, step = _setup("train.compile=off")
    step([_batch(), _batch()])
    w = step.read_window()
    assert set(w) >= {"loss", "mel_l1", "grad_norm"} and math.isfinite(w["loss"])


def test_schedules():
    cfg = load(None, ["train.warmup_steps=10", "train.max_steps=100", "train.min_lr_ratio=0.1"])
    f = lr_lambda(cfg.train)
    assert f(0) == 0.1 and f(9) == 1.0 and abs(f(99) - 0.1) < 0.01
    cfg.train.schedule = "constant"
    g = lr_lambda(cfg.train)
    assert g(0) == g(9) == g(99) == 1.0


def test_the_vocoder_rate_decays_per_epoch_then_anneals_over_its_last_steps():
    """HiFi-GAN's 0.999 per epoch, and over the last 20 % of the steps a cosine to the floor."""
    cfg = load("tiny", ["train.max_steps=1000", "train.min_lr_ratio=0.05"])
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    rate = build_vocoder_scheduler(opt, cfg, epoch_len=10).lr_lambdas[0]
    assert rate(0) == 1.0 and rate(800) == pytest.approx(EPOCH_DECAY ** 80)
    assert rate(900) == pytest.approx(EPOCH_DECAY ** 90 * 0.525)  # halfway down the cosine
    assert rate(1000) == pytest.approx(EPOCH_DECAY ** 100 * 0.05)
    cfg.train.schedule = "constant"
    assert build_vocoder_scheduler(opt, cfg, epoch_len=10).lr_lambdas[0](1000) == 1.0


@pytest.mark.parametrize("steps_per_s", [2.0, 3.5, 9.0])
def test_under_a_time_budget_the_rate_anneals_by_the_end_whatever_the_speed(steps_per_s):
    """A 100-second budget, 10,000 steps allowed: a machine of any speed holds the peak rate, then
    reaches the schedule's lowest as its time runs out, where the cosine over ``max_steps`` was
    still near the peak."""
    cfg = load(None, ["train.warmup_steps=10", "train.max_steps=10000", "train.min_lr_ratio=0.05",
                      "train.time_budget_s=100"]).train
    horizon = Horizon.of(cfg)
    f, by_steps = lr_lambda(cfg, horizon), lr_lambda(cfg)
    warm_up_s = 4.0  # the first steps are slower (compiled kernels loaded, caches filled)
    step, elapsed = 0, 0.0
    while elapsed <= cfg.time_budget_s:
        step += 1
        elapsed = warm_up_s + step / steps_per_s
        if step % 10 == 0:
            end = horizon.estimate(step, elapsed)
            horizon.end = horizon.end if end is None else end
    assert f(step) < 0.06 and by_steps(step) > 0.9
    assert f(int(0.7 * step)) == 1.0  # the peak rate holds until the cool-down (the last 20 %)
    assert abs(horizon.end - step) <= 2  # the rate was measured after the warm-up


def test_only_a_cosine_with_a_time_budget_has_a_horizon():
    assert Horizon.of(load(None, []).train) is None
    assert Horizon.of(load(None, ["train.time_budget_s=60", "train.schedule=constant"]).train) is None
    horizon = Horizon.of(load(None, ["train.time_budget_s=60", "train.max_steps=50"]).train)
    assert horizon.estimate(10, 1.0) is None and horizon.estimate(20, 2.0) == 50  # never past max_steps


def test_weight_decay_goes_by_rank_not_by_name():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(10, 8)  # 2-D: decayed, whatever it is called
            self.conv = torch.nn.Conv1d(8, 8, 3)
            self.norm = torch.nn.LayerNorm(8)
            self.norm_proj = torch.nn.Linear(8, 8)
            self.scale = torch.nn.Parameter(torch.ones(()))
            self.frozen = torch.nn.Linear(8, 8).requires_grad_(False)

    net = Net()
    decay, no_decay = build_optimizer(net, load(None, ["train.weight_decay=0.1"]).train).param_groups
    ids = lambda ps: {id(p) for p in ps}  # noqa: E731
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert ids(decay["params"]) == ids([net.embed.weight, net.conv.weight, net.norm_proj.weight])
    assert ids(no_decay["params"]) == ids([net.conv.bias, net.norm.weight, net.norm.bias,
                                           net.norm_proj.bias, net.scale])


@pytest.mark.parametrize("decoder", ["duration", "autoregressive"])
def test_a_training_step_reads_nothing_back_from_the_device(decoder):
    """Forward, losses, backward, clipping, AdamW and the schedule dispatch no op that hands a
    device value to the host and copy nothing to it (on a GPU each would stall the host until
    the device drains), and the non-finite check between logging steps reads its counter
    without one either."""
    from myxtts.observe.ops import SYNC_OPS, count_step_ops

    _, _, step = _setup("train.compile=off", "train.grad_clip=1.0", f"model.decoder={decoder}")
    step([_batch()])  # the optimizer allocates its state on the first step
    ops = count_step_ops(step, _batch())
    assert ops.total > 100 and "aten.addmm" in ops.counts  # it counted a real step
    assert ops.syncs == {}, ops.syncs
    assert {"aten._local_scalar_dense", "aten.nonzero", "aten.item"} <= SYNC_OPS

    bad = _batch()
    bad["mel"][0, 0, 0] = float("nan")
    step([bad])
    step.request_skipped_run()
    assert step.skipped_run_if_ready() == 1  # a CPU copy is ready at once
    assert step.skipped_run_if_ready() is None  # one request, one answer


def test_the_step_counter_catches_a_copy_to_the_host_inside_a_step(monkeypatch):
    """The check above can fail: the same step with the alignment search done the old way, on
    the host (``.cpu().numpy()`` and back), is caught, and so are the other ways to copy."""
    from myxtts.models import duration_decoder
    from myxtts.models.monotonic import search
    from myxtts.observe.ops import count_step_ops

    def on_the_host(logp, token_lens, mel_lens):
        lp = logp.detach().float().cpu().numpy()
        path = search(lp, token_lens.cpu().numpy(), np.array(mel_lens.to("cpu").tolist()))
        return torch.from_numpy(path).to(logp.device)

    _, _, step = _setup("train.compile=off", "model.decoder=duration")
    step([_batch()])
    monkeypatch.setattr(duration_decoder, "hard_alignment", on_the_host)
    ops = count_step_ops(step, _batch())
    assert ops.syncs == {"Tensor.cpu": 2, "Tensor.numpy": 2, "Tensor.to": 1, "Tensor.tolist": 1}


def test_op_counter_sees_a_host_read():
    """The counter the test above relies on does flag a read-back."""
    from myxtts.observe.ops import OpCounter, StepOps

    x = torch.ones(3)
    with OpCounter() as c:
        float(x.sum())
        torch.nonzero(x)
    assert set(StepOps(dict(c.counts)).syncs) == {"aten._local_scalar_dense", "aten.nonzero"}


@pytest.mark.parametrize("stage", ["acoustic", "vocoder"])
def test_both_stages_steps_meet_one_contract_with_the_builders_optimizer(stage, lj_cache):
    from myxtts.train.build import build_run
    from myxtts.train.step import Step

    cfg = load("tiny", [o for o in FAST if not o.startswith("train.compile")] + ["train.compile=off"])
    run = build_run(cfg, lj_cache, stage=stage, with_batches=False)
    try:
        assert isinstance(run.step_fn, Step)
        assert run.step_fn.opt is run.optimizer  # built by the builder, handed to the step
        want = cfg.train.lr if stage == "acoustic" else cfg.vocoder.lr
        assert run.plan.lr == want and run.optimizer.param_groups[0]["initial_lr"] == pytest.approx(want)
    finally:
        run.close()
