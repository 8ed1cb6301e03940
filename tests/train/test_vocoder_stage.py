import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from myxtts.cli import main
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.format import sha256
from myxtts.errors import UserError
from myxtts.models.checkpoint import load_model
from myxtts.models.vocoder import reconstruction_loss
from myxtts.rundir import RunDir
from myxtts.train.build import build_run, resolve_plan
from myxtts.train.optim import EPOCH_DECAY
from myxtts.train.trainer import train
from myxtts.train.vocoder import find_teacher

from .conftest import FAST, ROOT


def run_vocoder(cache, out, *overrides):
    cmd = [sys.executable, "-m", "myxtts", "train", "--stage", "vocoder", "--config", "tiny",
           "--data", str(cache), "--out", str(out), "--no-progress", "train.max_steps=3",
           "train.log_every=1", "train.checkpoint_every=3", "data.num_workers=0",
           "vocoder.segment_frames=16", "data.max_batch_size=2", *overrides]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)


@pytest.fixture(scope="module")
def acoustic(lj_cache, tmp_path_factory):
    """A real acoustic run of two steps: checkpoints/step-00000002 and best/."""
    out = tmp_path_factory.mktemp("acoustic") / "run"
    train(load("tiny", [*FAST, "train.max_steps=2", "train.checkpoint_every=2"]), lj_cache, out,
          progress=False)
    return out


def test_vocoder_stage_trains_checkpoints_and_feeds_synthesis(lj_cache, acoustic):
    run = acoustic / "vocoder"  # the vocoder trained where its acoustic run looks for one
    r = run_vocoder(lj_cache, run)
    assert r.returncode == 0, r.stderr
    assert "vocoder: 2.79 M parameters" in r.stderr
    recs = RunDir(run).read_metrics()
    assert [x["step"] for x in recs] == [1, 2, 3]
    for x in recs:
        assert math.isfinite(x["loss"])
        # the logged total is the weighted sum of its logged parts
        cfg = load("tiny")
        total = cfg.vocoder.mel_loss_weight * x["mel_l1"] + cfg.vocoder.stft_loss_weight * x["stft"]
        assert abs(total - x["loss"]) < 1e-3 * abs(x["loss"])

    # the plan and the summary record the rate the vocoder trains at, vocoder.lr, not train.lr
    cfg = load("tiny")
    assert cfg.vocoder.lr != cfg.train.lr
    assert json.loads((run / "plan.json").read_text())["lr"] == cfg.vocoder.lr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["lr"] == summary["asked"]["lr"] == cfg.vocoder.lr

    ckpt = run / "checkpoints" / "step-00000003"
    gen, cfg, _, meta = load_model(ckpt / "model.safetensors")
    assert meta["kind"] == "vocoder" and meta["step"] == 3
    state = torch.load(ckpt / "state.pt", weights_only=True)
    assert state["loop"]["step"] == 3 and {"opt", "sched"} <= set(state["step_fn"])
    with torch.no_grad():
        wav = gen(torch.zeros(1, 5, cfg.audio.n_mels))
    assert wav.shape == (1, 5 * cfg.audio.hop_length)

    # Synthesis from the acoustic run, any checkpoint folder of it or its model file uses the
    # run's vocoder unasked (a checkpoint folder holds a copy of the run's plan, too).
    from myxtts.infer import Synthesizer

    step = acoustic / "checkpoints" / "step-00000002"
    assert (step / "resume.json").is_file() and not (step / "plan.json").exists()
    for checkpoint in (acoustic, step, step / "model.safetensors"):
        synth = Synthesizer(checkpoint, device="cpu", log=lambda *a: None)
        assert synth.to_wave.name.startswith(str(run.resolve() / "checkpoints" / "step-00000003")), checkpoint
    # `myxtts synthesize --vocoder RUN` accepts a vocoder run directory beside any acoustic model.
    synth = Synthesizer(step / "model.safetensors", vocoder=run, device="cpu", log=lambda *a: None)
    assert not synth.to_wave.griffin_lim

    # Running again with a larger max_steps resumes from the checkpoint.
    again = run_vocoder(lj_cache, run, "train.max_steps=4")
    assert again.returncode == 0, again.stderr
    assert "resuming from" in again.stderr
    assert (run / "checkpoints" / "step-00000004" / "model.safetensors").is_file()


VOCODER = ["vocoder.segment_frames=16", "data.max_batch_size=2", "data.num_workers=0"]


def test_a_vocoder_on_a_models_mels_reads_them_frame_for_frame(lj_cache, acoustic):
    """Each crop: the teacher's teacher-forced mels into the generator, scored against the
    recording's mel and waveform of the same frames."""
    cfg = load("tiny", VOCODER)
    teacher = find_teacher(acoustic, lj_cache)
    plan = resolve_plan(cfg, lj_cache, stage="vocoder", mels_from=teacher.record())
    run = build_run(cfg, lj_cache, stage="vocoder", plan=plan)
    step, hop, seg = run.step_fn, cfg.audio.hop_length, cfg.vocoder.segment_frames
    assert not step.teacher.training and not any(p.requires_grad for p in step.teacher.parameters())
    batch = run.batches.next().tensors
    with torch.no_grad():
        made = step.teacher(batch)["mel_post"]  # (B, Tm, M)
    torch.manual_seed(5)
    mel_in, mel, wav = step._crop(batch)
    assert mel_in.shape == mel.shape == (batch["mel"].shape[0], seg, cfg.audio.n_mels)
    for b in range(mel.shape[0]):
        n = int(batch["mel_lens"][b])
        (start,) = [o for o in range(n - seg + 1) if torch.equal(batch["mel"][b, o:o + seg], mel[b])]
        torch.testing.assert_close(mel_in[b], made[b, start:start + seg])
        assert torch.equal(wav[b], batch["wav"][b, start * hop:(start + seg) * hop])
    assert (mel_in - mel).abs().mean() > 0.1  # a model of two steps: not the recording's mels

    # the step itself: the generator reads the teacher's crop and is scored against the recording
    seen = {}
    step.gen.register_forward_hook(lambda m, args, out: seen.update(mel=args[0], wav=out.detach()))
    torch.manual_seed(5)  # the same crop
    step([batch])
    assert torch.equal(seen["mel"], mel_in)
    scored = reconstruction_loss(cfg.vocoder, step.mel_fn, seen["wav"], mel, wav)["loss"]
    torch.testing.assert_close(step.read_window()["loss"], float(scored), rtol=1e-5, atol=0)
    run.close()


def test_an_autoregressive_teacher_reads_whole_groups_and_padding_stays_silence(lj_cache):
    """A batch whose length is no multiple of the teacher's reduction, and segments longer than
    every clip: each row's frames past its length are silence in the teacher's half too."""
    from myxtts.data.features import MEL_PAD
    from myxtts.models.vocoder import build_generator
    from myxtts.models.xtts import XTTS
    from myxtts.train.optim import build_vocoder_optimizer, build_vocoder_scheduler
    from myxtts.train.precision import resolve
    from myxtts.train.vocoder import VocoderStep

    cfg = load("tiny", VOCODER)
    batch = build_run(cfg, lj_cache, stage="vocoder").batches.next().tensors
    tm = batch["mel"].shape[1]
    ar = load("tiny", [*FAST, "model.decoder=autoregressive", "model.reduction=3", "data.pad_multiple=48",
                       "model.prenet_dropout=0"])  # its pre-net drops out in eval mode too: two calls would differ
    assert tm % 3
    torch.manual_seed(0)
    teacher = XTTS(ar.model, len(Cache(lj_cache).vocab.symbols), cfg.audio.n_mels).eval().requires_grad_(False)
    long = load("tiny", [*VOCODER, f"vocoder.segment_frames={tm + 8}"])
    gen = build_generator(long)
    opt = build_vocoder_optimizer(gen, long)
    step = VocoderStep(long, gen, opt, build_vocoder_scheduler(opt, long, epoch_len=10),
                       resolve("fp32", torch.device("cpu")), teacher)
    mel_in, mel, _ = step._crop(batch)  # every row from its start: longer than any clip
    with torch.no_grad():
        made = teacher({**batch, "mel": torch.nn.functional.pad(batch["mel"], (0, 0, 0, -tm % 3), value=MEL_PAD)})
    for b, n in enumerate(batch["mel_lens"].tolist()):
        torch.testing.assert_close(mel_in[b, :n], made["mel_post"][b, :n])
        assert bool((mel_in[b, n:] == MEL_PAD).all()) and bool((mel[b, n:] == MEL_PAD).all())


def test_a_vocoder_run_names_the_model_whose_mels_it_reads_and_resumes_on_that_one_only(
        lj_cache, acoustic, tmp_path, capsys):
    teacher = tmp_path / "teacher"
    shutil.copytree(acoustic / "best", teacher)
    out = tmp_path / "voc"
    args = ["train", "--stage", "vocoder", "--config", "tiny", "--data", str(lj_cache), "--out",
            str(out), "--mels-from", str(teacher), "--no-progress", "train.checkpoint_every=1", *VOCODER]
    assert main([*args, "train.max_steps=2"]) == 0
    weights = (teacher / "model.safetensors").resolve()
    origin = f"{weights} (step 2, sha256 {sha256(weights)[:12]})"
    assert f"mels from {origin}" in capsys.readouterr().err
    mels_from = json.loads((out / "plan.json").read_text())["mels_from"]
    assert mels_from["sha256"] == sha256(weights) == sha256(mels_from["kept"])  # the run's own copy

    def another_model(file):  # the same name, other weights
        state = load_file(file)
        save_file({k: v + 1 if k == next(iter(state)) else v for k, v in state.items()}, file,
                  metadata=safe_open(file, "pt").metadata())

    def one_line(argv, expect):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and expect in err, err

    # the acoustic run goes on training and replaces its best weights: the resume reads its copy
    another_model(weights)
    assert main([*args, "train.max_steps=3"]) == 0
    assert f"--mels-from ignored: {out} resumes from its own checkpoint step-00000002, on the mels of " \
           f"{origin}" in capsys.readouterr().out
    # the copy itself changed: the resumed run would learn another model's mels
    another_model(Path(mels_from["kept"]))
    one_line([*args, "train.max_steps=4"], "not the acoustic model this vocoder run started on")
    one_line([a if a != "vocoder" else "acoustic" for a in args],
             "--mels-from names the acoustic model a vocoder learns to render; add --stage vocoder")
    vocoder = out / "checkpoints" / "step-00000002" / "model.safetensors"
    one_line([*args[:args.index("--mels-from") + 1], str(vocoder), "--out", str(tmp_path / "v2")],
             f"--mels-from {vocoder.resolve()}: holds vocoder weights; --mels-from takes acoustic weights")


def test_vocoder_stage_refuses_several_processes(lj_cache, tmp_path, monkeypatch):
    from myxtts.train.trainer import train_vocoder

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(UserError, match="one process"):
        train_vocoder(load("tiny"), lj_cache, tmp_path / "voc", progress=False)


def test_vocoder_stage_needs_stored_waveforms(lj_cache, tmp_path):
    from myxtts.train.trainer import train_vocoder

    nowav = tmp_path / "nowav"
    shutil.copytree(lj_cache, nowav)  # a whole cache (opening one checks its shards)
    meta = json.loads((lj_cache / "meta.json").read_text())
    meta["settings"]["data"]["store_wav"] = False
    (nowav / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(UserError, match="store_wav=true"):
        train_vocoder(load("tiny"), nowav, tmp_path / "voc", progress=False)


def test_vocoder_stage_refuses_an_acoustic_run_directory(lj_cache, tmp_path):
    from myxtts.models.xtts import XTTS
    from myxtts.train import checkpoint as ckpt
    from myxtts.train.trainer import train_vocoder

    cfg = load("tiny")
    vocab = Cache(lj_cache).vocab.symbols
    ckpt.save(tmp_path / "acoustic", 1, XTTS(cfg.model, len(vocab), cfg.audio.n_mels), cfg,
              vocab, {"step": 1}, keep_last=1)
    with pytest.raises(UserError, match="own --out"):
        train_vocoder(cfg, lj_cache, tmp_path / "acoustic", progress=False)
    assert not (tmp_path / "acoustic" / "metrics.jsonl").exists()


def test_vocoder_stage_runs_eagerly_and_its_config_says_so(lj_cache):
    from myxtts.train.build import build_run

    run = build_run(load("tiny", ["train.compile=default", "data.num_workers=0"]), lj_cache,
                    stage="vocoder", with_batches=False)
    assert run.step_fn.compile_mode == "off" and run.cfg.train.compile == "off"


def test_a_vocoder_run_under_a_time_budget_anneals_by_its_end(lj_cache):
    """The demo's ``--vocoder-minutes`` sets a time budget and a step cap it never reaches: the
    rate's cool-down follows the budget's estimated end, as the acoustic stage's does."""
    cfg = load("tiny", [*VOCODER, "train.time_budget_s=60", "train.max_steps=1000000"])
    run = build_run(cfg, lj_cache, stage="vocoder", with_batches=False)
    rate, decay = run.scheduler.lr_lambdas[0], EPOCH_DECAY ** (500 / len(run.sampler))
    assert rate(500) == pytest.approx(decay)  # against the step cap: no cool-down yet
    run.horizon.end = 500
    assert rate(500) == pytest.approx(decay * cfg.train.min_lr_ratio)


def test_a_vocoder_run_saved_before_the_cool_down_resumes_at_its_step():
    """A checkpoint holds the state of the ExponentialLR that came before: the resumed run goes on
    from the step it counted, on the new schedule."""
    from myxtts.models.vocoder import build_generator
    from myxtts.train.optim import build_vocoder_optimizer, build_vocoder_scheduler
    from myxtts.train.precision import resolve
    from myxtts.train.vocoder import VocoderStep

    cfg = load("tiny", ["train.max_steps=100"])
    gen = build_generator(cfg)
    opt = build_vocoder_optimizer(gen, cfg)
    old = torch.optim.lr_scheduler.ExponentialLR(opt, 0.99)
    for _ in range(7):
        opt.step()
        old.step()
    opt = build_vocoder_optimizer(gen, cfg)
    step = VocoderStep(cfg, gen, opt, build_vocoder_scheduler(opt, cfg, epoch_len=10),
                       resolve("fp32", torch.device("cpu")))
    step.load_state_dict({**step.state_dict(), "sched": old.state_dict()})
    assert step.sched.last_epoch == 7 and step.lr == pytest.approx(cfg.vocoder.lr * 0.99 ** 7)  # as saved
    step.sched.step()
    assert step.lr == pytest.approx(cfg.vocoder.lr * EPOCH_DECAY ** 0.8)


def test_a_vocoder_step_reads_nothing_back_from_the_device():
    """The generator, its losses, AdamW and the schedule dispatch no op that hands a device value
    to the host and copy nothing to it, like the acoustic step (tests/train/test_step.py)."""
    from myxtts.models.vocoder import build_generator
    from myxtts.observe.ops import count_step_ops
    from myxtts.train.optim import build_vocoder_optimizer, build_vocoder_scheduler
    from myxtts.train.precision import resolve
    from myxtts.train.vocoder import VocoderStep

    cfg = load("tiny", ["vocoder.segment_frames=16"])
    torch.manual_seed(0)
    gen = build_generator(cfg)
    opt = build_vocoder_optimizer(gen, cfg)
    step = VocoderStep(cfg, gen, opt, build_vocoder_scheduler(opt, cfg, epoch_len=10),
                       resolve("fp32", torch.device("cpu")))
    hop = cfg.audio.hop_length
    batch = {"mel": torch.randn(2, 40, cfg.audio.n_mels) - 5, "wav": torch.randn(2, 40 * hop) * 0.1,
             "mel_lens": torch.tensor([40, 30])}
    step([batch])  # the optimizer allocates its state on the first step
    ops = count_step_ops(step, batch)
    assert ops.total > 100 and "aten._fft_r2c" in ops.counts  # it counted a real step, STFTs included
    assert ops.syncs == {}, ops.syncs
