"""Fine-tuning (`myxtts train --init-from SRC`): a new run from trained weights, with its own
optimizer, schedule and plan, that resumes like any run; what does not fit the weights is one
line before any training."""
import dataclasses
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from myxtts.cli import main
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.format import sha256
from myxtts.errors import UserError
from myxtts.models.checkpoint import build_model, save_model
from myxtts.models.vocoder import build_generator
from myxtts.models.xtts import XTTS
from myxtts.train import checkpoint as ckpt
from myxtts.train import finetune
from myxtts.train.build import build_run
from myxtts.train.plan import Plan
from myxtts.train.trainer import train
from tests.conftest import kill_when

from .conftest import FAST, LJ, losses, run_train


def _configured(src, *overrides):
    """The settings the command line gives a fine-tuning run (commands/train.run_config)."""
    asked = [*FAST, *overrides]
    return finetune.configure(load("tiny", asked), src.cfg, src.path, asked, "model")[0]


@pytest.fixture(scope="module")
def source(lj_cache, tmp_path_factory):
    """A run trained two steps: checkpoints/step-00000002 and best/ (validated at its end)."""
    out = tmp_path_factory.mktemp("source") / "run"
    train(load("tiny", [*FAST, "train.max_steps=2"]), lj_cache, out, progress=False)
    return out


def test_a_fine_tuning_run_has_its_own_optimizer_and_plan_and_resumes_without_the_source(
        lj_cache, source, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(source, src)
    weights = src / "best" / "model.safetensors"  # a run folder gives its best weights
    origin = {"path": str(weights.resolve()), "step": 2, "sha256": sha256(weights), "languages": ["en-us"],
              "voices": ["speaker"]}
    asked = ["--init-from", src, "train.max_steps=6", "train.warmup_steps=4", "train.checkpoint_every=2"]
    whole = tmp_path / "whole"
    r = run_train(lj_cache, whole, *asked)
    assert r.returncode == 0, r.stderr
    assert f"init from {origin['path']} (step 2, sha256 {origin['sha256'][:12]})" in r.stderr
    plan = json.loads((whole / "plan.json").read_text())
    assert plan["init_from"] == origin
    assert json.loads((whole / "checkpoints" / "step-00000002" / "resume.json").read_text()) == plan
    assert json.loads((whole / "summary.json").read_text())["init_from"] == origin
    # A fresh schedule (step 1 of a 4-step warm-up) and a fresh optimizer: 2 updates, not 2 + 2.
    first = json.loads((whole / "metrics.jsonl").read_text().splitlines()[0])
    assert first["step"] == 1 and first["lr"] == pytest.approx(plan["lr"] * 2 / 4)
    state = torch.load(whole / "checkpoints" / "step-00000002" / "state.pt", weights_only=True)
    assert {float(s["step"]) for s in state["optimizer"]["state"].values()} == {2.0}
    assert state["scheduler"]["last_epoch"] == 2

    killed = tmp_path / "killed"  # kill -9 after its first checkpoint, as tests/train/test_trainer.py does
    proc = run_train(lj_cache, killed, *asked, wait=False)
    marker = killed / "checkpoints" / "step-00000002" / "state.pt"
    kill_when(proc, marker)
    shutil.rmtree(src)  # the same command again resumes the run: the source is not read
    again = run_train(lj_cache, killed, *asked)
    assert again.returncode == 0, again.stderr
    assert "--init-from ignored" in again.stdout and "resuming from" in again.stderr
    assert losses(killed) == losses(whole)  # exactly, step by step
    assert json.loads((killed / "plan.json").read_text())["init_from"] == origin


def test_the_voices_heard_are_the_sources_and_the_new_caches(lj_cache, tmp_path):
    """A model fine-tuned from one that heard anna and ben on a cache of "speaker" has heard all
    three: its model files say so, and eval calls none of them unheard."""
    cfg = load("tiny")
    src = save_model(tmp_path / "src.safetensors", XTTS(cfg.model, len(Cache(lj_cache).vocab), cfg.audio.n_mels),
                     cfg, Cache(lj_cache).vocab.symbols, speakers=["anna", "ben"])
    found = finetune.find(src, "acoustic")
    assert found.voices == ["anna", "ben"] and found.record()["voices"] == ["anna", "ben"]
    assert finetune.voices_heard(found.record(), Cache(lj_cache)) == ["anna", "ben", "speaker"]
    assert finetune.voices_heard(None, Cache(lj_cache)) == ["speaker"]  # a run from scratch
    old = {k: v for k, v in found.record().items() if k != "voices"}  # a plan written before voices
    assert finetune.voices_heard(old, Cache(lj_cache)) == ["speaker"]


def test_the_weights_before_the_first_step_are_the_sources(lj_cache, source, tmp_path):
    src = finetune.find(source / "checkpoints" / "step-00000002", "acoustic")
    # A learning rate of 0 leaves the weights as they were before the step (decay scales with it).
    cfg = _configured(src, "train.max_steps=1", "train.lr=0", "train.schedule=constant",
                      "train.warmup_steps=0")
    train(cfg, lj_cache, tmp_path / "new", progress=False, init=src)
    after = load_file(str(tmp_path / "new" / "checkpoints" / "step-00000001" / "model.safetensors"))
    before = load_file(str(src.path))
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)
    untrained = build_run(cfg, lj_cache, with_batches=False).model.state_dict()
    assert not all(torch.equal(untrained[k], before[k]) for k in before)  # not vacuous


def _source_like(tmp_path, lj_cache, *overrides, vocab=None):
    """A model file trained (so its header says) with other settings or symbols."""
    cfg = load("tiny", [*FAST, *overrides])
    vocab = vocab or Cache(lj_cache).vocab.symbols
    return save_model(tmp_path / "other.safetensors", build_model("acoustic", cfg, len(vocab)), cfg,
                      vocab, step=7)


@pytest.mark.parametrize("case, expect", [
    ("model", "model.d_model=32 does not fit the weights of {src}, trained with model.d_model=64"),
    ("n_mels", "was prepared with audio.n_mels=80, but {src} was trained with audio.n_mels=40"),
    ("text", "was prepared with text.mode=phonemes, but {src} was trained with text.mode=characters"),
    ("vocab", "has another vocabulary than {src}: it has 1 symbol(s) the checkpoint lacks ("),
    ("kind", "--init-from {src}: holds vocoder weights; --init-from takes acoustic weights"),
    ("missing", "{src}: no such file or folder"),
])
def test_what_does_not_fit_the_weights_is_one_line_before_any_training(
        lj_cache, source, tmp_path, capsys, case, expect):
    src, extra = source / "best" / "model.safetensors", []
    if case == "model":
        extra = ["model.d_model=32"]
    elif case == "n_mels":
        src = _source_like(tmp_path, lj_cache, "audio.n_mels=40")
    elif case == "text":
        src = _source_like(tmp_path, lj_cache, "text.mode=characters")
    elif case == "vocab":
        symbols = Cache(lj_cache).vocab.symbols
        src = _source_like(tmp_path, lj_cache, vocab=symbols[:-1] + ["\u0298"])
    elif case == "kind":
        cfg = load("tiny")
        src = save_model(tmp_path / "voc.safetensors", build_model("vocoder", cfg, 2), cfg,
                         ["<pad>", "<eos>"], kind="vocoder")
    elif case == "missing":
        src = tmp_path / "nowhere"
    out = tmp_path / "new"
    rc = main(["train", "--config", "tiny", "--init-from", str(src), "--data", str(lj_cache),
               "--out", str(out), "--no-progress", *FAST, *extra])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert expect.format(src=src.resolve() if case != "missing" else src) in err, err
    assert not out.exists()  # nothing written


def test_settings_that_leave_the_weights_alone_may_differ_and_the_config_file_gives_way(source):
    src = finetune.find(source, "acoustic")
    cfg = _configured(src, "model.dropout=0.3", "model.max_decoder_steps=77")
    assert cfg.model.dropout == 0.3 and cfg.model.max_decoder_steps == 77
    assert dataclasses.replace(cfg.model, dropout=0.1, max_decoder_steps=src.cfg.model.max_decoder_steps) \
        == src.cfg.model
    # No model settings on the command line: the source's, not the config file's.
    cfg, note = finetune.configure(load("tiny"), src.cfg, src.path, [], "model")
    assert cfg.model == src.cfg.model and note.startswith(f"model settings of {src.path}")
    assert "model.d_model 128 -> 64" in note


def test_the_free_settings_shape_no_weight():
    cfg = load("tiny")

    def shapes(section: str, c) -> dict:
        with torch.device("meta"):
            model = XTTS(c.model, 40, c.audio.n_mels) if section == "model" else \
                build_generator(c)
        return {k: v.shape for k, v in model.state_dict().items()}

    for section, names in finetune.FREE.items():
        base = getattr(cfg, section)
        for name in names:
            v = getattr(base, name)
            changed = v + 1 if isinstance(v, int) else v / 2 + 0.01
            other = dataclasses.replace(cfg, **{section: dataclasses.replace(base, **{name: changed})})
            assert shapes(section, other) == shapes(section, cfg), f"{section}.{name}"


def test_prepare_match_gives_a_new_voice_the_models_settings_and_vocabulary(source, tmp_path, capsys):
    corpus = tmp_path / "voice"
    (corpus / "wavs").mkdir(parents=True)
    rows = [r for r in (LJ / "metadata.csv").read_text().splitlines() if r.split("|")[0] in
            ("LJ001-0002", "LJ001-0008")]  # two short sentences: far fewer symbols
    (corpus / "metadata.csv").write_text("\n".join(rows) + "\n")
    for r in rows:
        shutil.copy(LJ / "wavs" / f"{r.split('|')[0]}.wav", corpus / "wavs")
    src = finetune.find(source, "acoustic")

    assert main(["prepare", str(corpus), "--out", str(tmp_path / "own"), "--workers", "1"]) == 0
    with pytest.raises(UserError, match=r"another vocabulary .*: it lacks \d+ of the checkpoint's .*--match"):
        finetune.check_data(src, tmp_path / "own", reads_text=True)

    assert main(["prepare", str(corpus), "--out", str(tmp_path / "matched"), "--workers", "1",
                 "--match", str(source), "audio.trim_db=30"]) == 0
    capsys.readouterr()
    matched = Cache(tmp_path / "matched")
    assert matched.vocab.symbols == src.vocab and matched.audio_cfg.trim_db == 30
    finetune.check_data(src, tmp_path / "matched", reads_text=True)  # fits


def test_freeze_keeps_the_named_parts_out_of_the_optimizer_and_unchanged(lj_cache):
    run = build_run(load("tiny", [*FAST, "train.freeze=text_encoder, decoder.postnet"]), lj_cache)
    frozen = [*run.model.text_encoder.parameters(), *run.model.decoder.postnet.parameters()]
    assert frozen and not any(p.requires_grad for p in frozen)
    in_optimizer = {id(p) for g in run.optimizer.param_groups for p in g["params"]}
    assert not in_optimizer & {id(p) for p in frozen}
    assert in_optimizer == {id(p) for p in run.model.parameters() if p.requires_grad}
    before = {k: v.clone() for k, v in run.model.state_dict().items()}
    run.step_fn([run.batches.next().tensors])
    after = run.model.state_dict()
    run.close()
    names = {n for n, p in run.model.named_parameters() if not p.requires_grad}
    assert all(torch.equal(before[k], after[k]) for k in names)
    assert any(not torch.equal(before[k], after[k]) for k in after if k not in names)

    with pytest.raises(UserError, match="no part 'text_encodr' \\(did you mean 'text_encoder'\\?\\)"):
        build_run(load("tiny", [*FAST, "train.freeze=text_encodr"]), lj_cache, with_batches=False)
    with pytest.raises(UserError, match="every weight would be frozen"):
        build_run(load("tiny", [*FAST, "train.freeze=text_encoder,ref_encoder,decoder"]), lj_cache,
                  with_batches=False)
    with pytest.raises(UserError, match="the vocoder stage trains every weight"):
        build_run(load("tiny", ["train.freeze=decoder"]), lj_cache, stage="vocoder",
                  with_batches=False)


def test_a_run_resumes_only_with_what_it_froze(lj_cache, tmp_path):
    frozen = [*FAST, "train.max_steps=1", "train.freeze=text_encoder"]
    train(load("tiny", frozen), lj_cache, tmp_path / "run", progress=False)
    with pytest.raises(UserError, match="train.freeze='text_encoder' \\(now ''\\).*--init-from"):
        train(load("tiny", [*FAST, "train.max_steps=2"]), lj_cache, tmp_path / "run", progress=False)


def test_the_vocoder_starts_from_the_generator(lj_cache, tmp_path):
    cfg = load("tiny", ["data.num_workers=0"])
    trained = build_run(cfg, lj_cache, stage="vocoder", with_batches=False)
    with torch.no_grad():
        for p in trained.model.parameters():
            p.add_(1.0)  # unlike any fresh initialisation
    folder = ckpt.save(tmp_path / "voc", 5, trained.model, cfg, ["<pad>", "<eos>"],
                       ckpt.gather_state({"step_fn": trained.step_fn}, [ckpt.rng_state()]),
                       keep_last=1, kind="vocoder")
    src = finetune.find(tmp_path / "voc", "vocoder")
    assert src.path == (folder / "model.safetensors").resolve() and src.step == 5
    run = build_run(cfg, lj_cache, stage="vocoder", with_batches=False)
    finetune.load(run, src)
    assert all(torch.equal(x, y) for x, y in zip(run.model.state_dict().values(), trained.model.state_dict().values()))
    assert not run.step_fn.opt.state  # the optimizer starts afresh


def test_a_plan_written_before_init_from_existed_still_loads(tmp_path):
    Plan("cpu", "CPU", "fp32", "off", 4000, 16, 1e-3, 1).save(tmp_path)
    d = json.loads((tmp_path / "plan.json").read_text())
    del d["init_from"]
    (tmp_path / "plan.json").write_text(json.dumps(d))
    assert Plan.load(tmp_path).init_from is None
    (tmp_path / "plan.json").write_text(json.dumps({**d, "surprise": 1}))
    with pytest.raises(UserError, match="unknown surprise"):
        Plan.load(tmp_path)
