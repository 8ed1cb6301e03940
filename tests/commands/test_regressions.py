"""The command line's regression matrix: bad input, damaged caches, reruns and stop signals,
one row per case, run as a user runs `myxtts`.

Every row checks the exit code (docs/design.md, "Exit codes"), that the error is one line on
stderr naming the file, line or field and no traceback, and that nothing already on disk was
lost or overwritten. Stops go to the whole process group (what a scheduler and a terminal's
Ctrl-C do), with loader workers running, and the resumed run must reproduce the losses of an
uninterrupted one exactly.

The library-level rows behind the same promises live next to their code: corpus lines, text
encodings, damaged caches and file modes in tests/data/test_bad_input_matrix.py, prepare and
loader workers under signals in tests/data/test_workers.py, synthesis input in tests/test_infer.py.
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from myxtts.cli import build_parser, main, parse
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.models.checkpoint import save_model
from myxtts.models.xtts import XTTS
from myxtts.train.loop import StopRequested
from tests.train.conftest import FAST, LJ, ROOT, lj_cache, losses, run_train  # noqa: F401

WORKERS = [f for f in FAST if not f.startswith("data.num_workers")] + ["data.num_workers=1"]


# ----------------------------------------------------------------------------- shared world

@pytest.fixture(scope="module")
def world(tmp_path_factory, lj_cache):  # noqa: F811
    """What the rows point at: the cache, a finished run, an exported model, damaged copies of
    the cache, small input files. Rows must leave all of it as it was."""
    w = tmp_path_factory.mktemp("world")
    run = w / "finished"
    r = run_train(lj_cache, run, "train.max_steps=3")
    assert r.returncode == 0, r.stderr
    shutil.copytree(run, w / "damaged-run")
    _truncate(w / "damaged-run" / "checkpoints" / "step-00000003" / "state.pt")
    cfg = load("tiny")
    vocab = Cache(lj_cache).vocab.symbols
    save_model(w / "model.safetensors", XTTS(cfg.model, len(vocab), cfg.audio.n_mels), cfg, vocab)
    (w / "empty").mkdir()
    (w / "file").write_text("not a folder")
    (w / "latin1.txt").write_bytes("Caf\xe9 au lait.\n".encode("latin-1"))
    (w / "blank.txt").write_text("\n  \n")
    (w / "bad.yaml").write_text("train: [\n")
    (w / "typo.yaml").write_text("train: {max_stepz: 3}\n")
    (w / "badplan").mkdir()
    (w / "badplan" / "plan.json").write_text('{"settings": ')
    for name, damage in DAMAGE.items():
        shutil.copytree(lj_cache, w / name)
        damage(w / name)
    nothing = w / "nothing-corpus"
    (nothing / "wavs").mkdir(parents=True)
    (nothing / "metadata.csv").write_text("a|No audio.\n")
    main(["prepare", str(nothing), "--out", str(w / "zero")])  # fails, leaving a 0-utterance folder
    return {"cache": lj_cache, "run": run, "model": w / "model.safetensors", "w": w}


def _snapshot(*roots: Path) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for root in roots
            for p in sorted(root.rglob("*")) if p.is_file()}


def _flip_to_nan(cache: Path) -> None:
    """Set the high byte of one float16 mel value to 0x7e: a flipped byte that reads as NaN."""
    f = cache / "shards/00000/mel.npy"
    mel = np.load(f, mmap_mode="r+")
    mel.view(np.uint8).reshape(-1)[2 * 1000 + 1] = 0x7E  # little-endian: odd bytes are high
    mel.flush()


def _flip_token(cache: Path) -> None:
    f = cache / "shards/00000/tokens.npy"
    tok = np.load(f, mmap_mode="r+")
    tok.view(np.uint8).reshape(-1)[2 * 3 + 1] ^= 0x40  # id + 16384: no such symbol
    tok.flush()


def _truncate(f: Path) -> None:
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


DAMAGE = {
    "shard-deleted": lambda c: (c / "shards/00000/mel.npy").unlink(),
    "mel-truncated": lambda c: _truncate(c / "shards/00000/mel.npy"),
    "meta-not-json": lambda c: (c / "meta.json").write_text('{"format_version": 1, "sett'),
    "index-deleted": lambda c: (c / "index.json").unlink(),
    "nan-byte": _flip_to_nan,
    "token-byte": _flip_token,
}


def _fill(argv: list[str], world: dict, tmp: Path) -> list[str]:
    names = {"{cache}": world["cache"], "{run}": world["run"], "{model}": world["model"],
             "{w}": world["w"], "{tmp}": tmp, "{lj}": LJ}
    out = []
    for a in argv:
        for k, v in names.items():
            a = a.replace(k, str(v))
        out.append(a)
    return out


def _the_error_line(stderr: str, command: str) -> str:
    """The one error line: no traceback, no other error line, and it names the command."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith(f"myxtts {command}"), stderr
    return errors[0]


# ------------------------------------------------------------------- usage and input errors

TRAIN = ["train", "--config", "tiny", "--data", "{cache}", "--out", "{tmp}/run"]
SYNTH = ["synthesize", "--checkpoint", "{model}", "--device", "cpu", "--out", "{tmp}/o.wav"]
FIX = "run `myxtts cache verify"
BENCH_LOADER = ["bench", "loader", "--config", "tiny", "--data", "{cache}", "--quick"]
BENCH_TRAIN = ["bench", "train", "--config", "tiny", "--data", "{cache}", "--quick", "--modes", "eager_fp32"]

# id: (argv, exit code, what the one error line must say). Each runs in this process through
# `myxtts.cli.main`, the entry point the console script calls.
ROWS = {
    "preset-typo": (["train", "--config", "tinyy", "--data", "{cache}", "--out", "{tmp}/r"], 2,
                    ["--config tinyy", "did you mean 'tiny'?"]),
    "key-typo": ([*TRAIN, "train.max_stesp=3"], 2, ["max_stesp", "did you mean 'max_steps'"]),
    "section-typo": ([*TRAIN, "trian.max_steps=3"], 2, ["trian", "did you mean 'train'"]),
    "not-a-number": ([*TRAIN, "train.max_steps=many"], 2, ["train.max_steps", "many"]),
    "out-of-range": ([*TRAIN, "train.max_steps=0"], 2, ["train.max_steps"]),
    "bad-choice": ([*TRAIN, "train.precision=fp8"], 2, ["train.precision", "fp8"]),
    "rate-above-fmax": (["prepare", "{lj}", "--out", "{tmp}/c", "audio.sample_rate=12345"], 2,
                        ["audio.fmax", "Nyquist"]),
    "negative-rate": (["prepare", "{lj}", "--out", "{tmp}/c", "audio.sample_rate=-22050"], 2,
                      ["audio.sample_rate"]),
    "no-such-corpus": (["prepare", "{tmp}/nosuch", "--out", "{tmp}/c"], 2,
                       ["nosuch", "dataset folder not found"]),
    "bad-shard-spec": (["prepare", "{lj}", "--out", "{tmp}/c", "--shard", "3/2"], 2, ["--shard"]),
    "prepare-over-a-file": (["prepare", "{lj}", "--out", "{w}/file"], 2,
                            ["--out", "file: cannot create the cache folder"]),
    "prepare-unreadable-plan": (["prepare", "{lj}", "--out", "{w}/badplan"], 2,
                                ["badplan/plan.json: unreadable", "delete"]),
    "train-out-over-a-file": ([*TRAIN[:5], "--out", "{w}/file"], 2,
                              ["--out", "file: cannot create the run folder (a file is in the way)"]),
    "config-not-yaml": ([*TRAIN[:1], "--config", "{w}/bad.yaml", *TRAIN[3:]], 2,
                        ["bad.yaml: not valid YAML", "line 2"]),
    "config-not-utf8": ([*TRAIN[:1], "--config", "{w}/latin1.txt", *TRAIN[3:]], 2,
                        ["latin1.txt: not UTF-8"]),
    "config-unknown-key": ([*TRAIN[:1], "--config", "{w}/typo.yaml", *TRAIN[3:]], 2,
                           ["train.max_stepz", "did you mean 'max_steps'"]),
    "setting-not-yaml": ([*TRAIN, "train.lr=[1"], 2, ["train.lr: cannot read the value '[1'"]),
    "setting-without-value": ([*TRAIN, "train.max_steps="], 2, ["train.max_steps"]),
    "resume-damaged-state": (["train", "--config", "tiny", "--data", "{cache}", "--out",
                              "{w}/damaged-run", *FAST, "train.deterministic=false",
                              "train.max_steps=5"], 2, ["step-00000003/state.pt: unreadable",
                                                        "move", "aside"]),
    "csv-header-missing": (["prepare", "{lj}", "--format", "csv", "--out", "{tmp}/c"], 2,
                           ["metadata.csv: header must name the columns", "concerned...'"]),
    "train-no-such-cache": (["train", "--config", "tiny", "--data", "{tmp}/nosuch", "--out",
                             "{tmp}/r"], 2, ["nosuch: no such folder"]),
    "train-not-a-cache": (["train", "--config", "tiny", "--data", "{w}/empty", "--out", "{tmp}/r"],
                          2, ["empty: not a prepared cache", "myxtts prepare"]),
    "train-zero-utterances": (["train", "--config", "tiny", "--data", "{w}/zero", "--out",
                               "{tmp}/r"], 2, ["holds 0 utterances"]),
    "train-shard-deleted": (["train", "--config", "tiny", "--data", "{w}/shard-deleted", "--out",
                             "{tmp}/r"], 2, ["shard 00000", "mel.npy missing", FIX, "--fix"]),
    "train-mel-truncated": (["train", "--config", "tiny", "--data", "{w}/mel-truncated", "--out",
                             "{tmp}/r"], 2, ["shard 00000", "mel.npy truncated", FIX]),
    "train-meta-not-json": (["train", "--config", "tiny", "--data", "{w}/meta-not-json", "--out",
                             "{tmp}/r"], 2, ["meta.json", "not JSON", FIX]),
    "train-index-deleted": (["train", "--config", "tiny", "--data", "{w}/index-deleted", "--out",
                             "{tmp}/r"], 2, ["index.json", "missing", FIX]),
    "profile-damaged-cache": (["profile", "--config", "tiny", "--data", "{w}/shard-deleted"], 2,
                              ["shard 00000", FIX]),
    "tune-damaged-cache": (["tune", "--config", "tiny", "--data", "{w}/meta-not-json"], 2,
                           ["meta.json", FIX]),
    "bench-loader-damaged-cache": (["bench", "loader", "--config", "tiny", "--data",
                                    "{w}/index-deleted"], 2, ["index.json", FIX]),
    "bench-train-damaged-cache": (["bench", "train", "--config", "tiny", "--data",
                                   "{w}/mel-truncated"], 2, ["mel.npy truncated", FIX]),
    "verify-no-such-folder": (["cache", "verify", "{tmp}/nosuch"], 2, ["nosuch: no such folder"]),
    "verify-not-a-cache": (["cache", "verify", "{w}/empty"], 2, ["not a prepared cache"]),
    "verify-zero-utterances": (["cache", "verify", "{w}/zero"], 2, ["holds 0 utterances"]),
    "synth-empty-text": ([*SYNTH, "--text", ""], 2, ["nothing to say"]),
    "synth-blank-texts-file": ([*SYNTH, "--texts", "{w}/blank.txt"], 2, ["nothing to say"]),
    "synth-latin1-texts": ([*SYNTH, "--texts", "{w}/latin1.txt"], 2, ["latin1.txt", "line 1",
                                                                       "not UTF-8"]),
    "synth-device-tpu": ([*SYNTH[:3], "--device", "tpu", "--text", "Hi."], 2, ["--device tpu"]),
    "synth-out-under-a-file": ([*SYNTH[:5], "--out", "{w}/file/x.wav", "--text", "Hi."], 2,
                               ["cannot write the wav"]),
    "synth-no-such-checkpoint": (["synthesize", "--checkpoint", "{tmp}/nosuch", "--text", "Hi."],
                                 2, ["nosuch"]),
    "synth-no-such-reference": ([*SYNTH, "--text", "Hi.", "--reference", "{tmp}/voice.wav"], 2,
                                ["voice.wav"]),
    # Phonemized (the default), "loch" ends in a sound (x) the model's clips never had.
    "synth-unknown-letter-in-long-text": ([*SYNTH, "--text", "The fox ran. " * 200 + "loch"], 2,
                                          ["not trained on: 'x'", "in 'loch'"]),
    "synth-batch-size-zero": ([*SYNTH, "--text", "Hi.", "--batch-size", "0"], 2, ["--batch-size"]),
    # Outputs that could never be written are refused before the measuring starts, not with a
    # traceback after it; numbers that mean nothing are refused, not taken as the default.
    "bench-loader-negative-workers": ([*BENCH_LOADER, "--workers", "-1"], 2, ["--workers", "-1"]),
    "bench-loader-negative-step-ms": ([*BENCH_LOADER, "--step-ms", "-5"], 2, ["--step-ms must be positive"]),
    "bench-loader-json-under-a-file": ([*BENCH_LOADER, "--json", "{w}/file/b.json"], 2,
                                       ["--json", "file is a file, not a folder"]),
    "bench-train-zero-steps": ([*BENCH_TRAIN, "--steps", "0"], 2, ["--steps must be at least 1, got 0"]),
    "bench-train-json-under-a-file": ([*BENCH_TRAIN, "--json", "{w}/file/t.json"], 2,
                                      ["--json", "cannot write there"]),
    "profile-out-over-a-file": (["profile", "--config", "tiny", "--data", "{cache}", "--out", "{w}/file"], 2,
                                ["--out", "cannot create the folder (a file is in the way)"]),
    "profile-json-under-a-file": (["profile", "--config", "tiny", "--data", "{cache}", "--out", "{tmp}/p",
                                   "--json", "{w}/file/p.json"], 2, ["--json", "cannot write there"]),
    "tune-out-under-a-file": (["tune", "--config", "tiny", "--data", "{cache}", "--out", "{w}/file/t.yaml"],
                              2, ["--out", "cannot write there"]),
    "tune-out-is-a-folder": (["tune", "--config", "tiny", "--data", "{cache}", "--out", "{w}/empty"], 2,
                             ["--out", "is a folder; give a file name"]),
    "eval-out-over-a-file": (["eval", "--checkpoint", "{run}", "--data", "{cache}", "--out", "{w}/file"], 2,
                             ["--out", "a file is in the way"]),
    "monitor-out-under-a-file": (["monitor", "--duration", "1", "--out", "{w}/file/g.csv"], 2,
                                 ["--out", "cannot write there"]),
    "demo-zero-steps": (["demo", "--steps", "0", "--out", "{tmp}/d"], 2, ["--steps must be at least 1"]),
    "demo-zero-minutes": (["demo", "--minutes", "0", "--out", "{tmp}/d"], 2, ["--minutes must be positive"]),
}


@pytest.mark.parametrize("row", ROWS)
def test_bad_input_is_one_line_and_changes_nothing(world, tmp_path, capsys, row):
    argv, code, says = ROWS[row]
    before = _snapshot(world["w"])
    try:
        rc = main(_fill(argv, world, tmp_path))
    except SystemExit as e:  # argparse's own usage errors
        rc = e.code
    err = capsys.readouterr().err
    line = _the_error_line(err, argv[0])
    assert rc == code, err
    for word in says:
        assert word in line, (word, line)
    assert len(line) < 400, line  # an echoed text is cut, not repeated in full
    assert _snapshot(world["w"]) == before
    if "--out" in argv and argv[argv.index("--out") + 1].startswith("{tmp}"):  # nothing left behind
        out = _fill(argv, world, tmp_path)[argv.index("--out") + 1]
        assert not os.path.exists(out), out


def test_a_damaged_cache_that_looks_whole_stops_training_naming_the_shard(world, tmp_path):
    """Flipped bytes in a shard's data keep its structure; the loader (in a worker) catches a
    NaN feature or an impossible token id where it reads it, before anything trains on it."""
    for name, what in (("nan-byte", "mel.npy: utterance LJ001-0001 has non-finite mel values"),
                       ("token-byte", "tokens.npy: utterance LJ001-0001 has token ids outside")):
        cache = world["w"] / name
        before = _snapshot(cache)
        r = run_train(cache, tmp_path / name, "train.max_steps=3", *WORKERS)
        line = _the_error_line(r.stderr, "train")
        assert r.returncode == 2 and what in line and f"{FIX} {cache} --fix`" in line, r.stderr
        assert not any((tmp_path / name).glob("checkpoints/step-*"))  # not one step trained on it
        assert _snapshot(cache) == before


def test_a_finished_run_is_kept_a_changed_model_is_named_and_more_steps_extend_it(world, tmp_path):
    run = world["run"]
    before = _snapshot(run)
    again = run_train(world["cache"], run, "train.max_steps=3")
    assert again.returncode == 0 and "already at step 3" in again.stderr, again.stderr
    assert "Traceback" not in again.stderr and _snapshot(run) == before  # summary.json too
    changed = run_train(world["cache"], run, "train.max_steps=5", "model.d_model=32",
                        "model.n_heads=1")
    line = _the_error_line(changed.stderr, "train")
    assert changed.returncode == 2 and "model.d_model=64 (now 32)" in line, changed.stderr
    assert "model.n_heads=2 (now 1)" in line and _snapshot(run) == before

    longer = tmp_path / "longer"
    shutil.copytree(run, longer)
    more = run_train(world["cache"], longer, "train.max_steps=5")
    assert more.returncode == 0, more.stderr
    assert losses(longer) == {**losses(run), **losses(longer)} and sorted(losses(longer)) == [1, 2, 3, 4, 5]
    assert json.loads((longer / "summary.json").read_text())["steps"] == 5


# ------------------------------------------------------------------------- command grammar

def _commands(parser=None, prefix=()):
    import argparse
    parser = parser or build_parser()
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _commands(sp, (*prefix, name))
            return
    yield prefix, parser


def _minimal_argv(prefix, parser) -> list[str]:
    argv = list(prefix)
    for a in parser._actions:
        if a.dest == "overrides" or a.dest == "help":
            continue
        if not a.option_strings:
            argv.append("X")
        elif a.required:
            argv += [a.option_strings[0], "X"]
    return argv


@pytest.mark.parametrize("prefix, parser", list(_commands()), ids=lambda v: " ".join(v) if
                         isinstance(v, tuple) else "")
def test_settings_go_anywhere_on_every_command_that_takes_them(prefix, parser, capsys):
    with pytest.raises(SystemExit) as e:
        main([*prefix, "--help"])
    assert e.value.code == 0 and "usage:" in capsys.readouterr().out
    if not any(a.dest == "overrides" for a in parser._actions):
        return
    argv = _minimal_argv(prefix, parser)
    n = len(prefix)
    for line in ([*argv, "train.lr=0.1", "data.num_workers=0"],  # after the positionals
                 [*argv[:n], "train.lr=0.1", *argv[n:], "data.num_workers=0"]):
        args = parse(build_parser(), line)
        assert args.overrides == ["train.lr=0.1", "data.num_workers=0"], line


# --------------------------------------------------------------------------------- signals

def _start(argv: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, start_new_session=True, env=dict(os.environ, **(env or {})))


def _wait_for_step(run: Path, step: int, proc: subprocess.Popen) -> None:
    metrics, deadline = run / "metrics.jsonl", time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and step in losses(run):
            return
        time.sleep(0.05)
    raise AssertionError(f"no step {step} logged: " + proc.communicate()[1][-2000:])


def _stop_group(proc: subprocess.Popen, sig) -> str:
    os.killpg(proc.pid, sig)  # the whole group: trainer, loader workers (and torchrun's ranks)
    _, err = proc.communicate(timeout=300)
    return err


def _stopped_at(err: str, run: Path) -> int:
    assert "stop requested: stopped at step" in err and "Resume with the same command" in err, err
    step = int(err.split("stop requested: stopped at step ")[1].split(";")[0])
    assert [p.name for p in (run / "checkpoints").iterdir()] == [f"step-{step:08d}"]
    return step


def test_ctrl_c_while_starting_is_one_line():
    proc = _start([sys.executable, "-m", "myxtts", "train", "--config", "tiny", "--data", "X",
                   "--out", "Y"])
    time.sleep(0.5)  # importing torch takes longer than this
    err = _stop_group(proc, signal.SIGINT)
    assert proc.returncode == 130 and err == "myxtts: interrupted\n", err


STEPS = [*WORKERS, "train.max_steps=8", "train.checkpoint_every=100"]


@pytest.fixture(scope="module")
def uninterrupted(world, tmp_path_factory) -> dict[int, float]:
    whole = tmp_path_factory.mktemp("whole") / "run"
    r = run_train(world["cache"], whole, *STEPS)
    assert r.returncode == 0, r.stderr
    return losses(whole)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_group_stop_checkpoints_exits_75_and_resumes_to_the_same_losses(world, uninterrupted,
                                                                          tmp_path, sig):
    steps = STEPS
    run = tmp_path / "stopped"
    proc = _start([sys.executable, "-m", "myxtts", "train", "--config", "tiny", "--data",
                   str(world["cache"]), "--out", str(run), "--no-progress", *steps])
    _wait_for_step(run, 2, proc)
    err = _stop_group(proc, sig)
    assert proc.returncode == 75 and "Traceback" not in err, err
    assert _stopped_at(err, run) < 8
    resumed = run_train(world["cache"], run, *steps)
    assert resumed.returncode == 0 and "resuming from" in resumed.stderr, resumed.stderr
    assert losses(run) == uninterrupted  # exactly, step by step


def test_the_vocoder_stage_stops_on_a_group_sigterm_and_resumes(world, tmp_path):
    def vocoder(out, wait=True):
        cmd = [sys.executable, "-m", "myxtts", "train", "--stage", "vocoder", "--config", "tiny",
               "--data", str(world["cache"]), "--out", str(out), "--no-progress",
               "train.max_steps=3", "train.log_every=1", "train.checkpoint_every=100",
               "train.deterministic=true", "data.num_workers=1", "vocoder.segment_frames=16",
               "data.max_batch_size=2"]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT) if wait else _start(cmd)

    whole = vocoder(tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr
    run = tmp_path / "stopped"
    proc = vocoder(run, wait=False)
    _wait_for_step(run, 1, proc)
    err = _stop_group(proc, signal.SIGTERM)
    assert proc.returncode == 75 and "Traceback" not in err, err
    assert _stopped_at(err, run) < 3
    resumed = vocoder(run)
    assert resumed.returncode == 0 and "resuming from" in resumed.stderr, resumed.stderr
    assert losses(run) == losses(tmp_path / "whole")


def test_torchrun_ranks_stop_together_on_a_group_sigterm_and_resume(world, tmp_path):
    steps = STEPS

    def torchrun(out, wait=True):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
               "--master_port", str(29000 + os.getpid() % 1000), "-m", "myxtts", "train",
               "--config", "tiny", "--data", str(world["cache"]), "--out", str(out),
               "--no-progress", *steps]
        env = {"OMP_NUM_THREADS": "1"}
        if wait:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600,
                                  env=dict(os.environ, **env))
        return _start(cmd, env)

    whole = torchrun(tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    run = tmp_path / "stopped"
    proc = torchrun(run, wait=False)
    _wait_for_step(run, 2, proc)
    err = _stop_group(proc, signal.SIGTERM)
    # torchrun itself reports the signal (exit 1); the ranks agree on one step, checkpoint it
    # together and exit 75, which a resumed run continues exactly.
    assert proc.returncode != 0
    step = _stopped_at(err, run)
    state = torch.load(run / "checkpoints" / f"step-{step:08d}" / "state.pt", weights_only=False)
    assert state["loop"]["step"] == step and len(state["rng"]) == 2  # both ranks' state
    resumed = torchrun(run)
    assert resumed.returncode == 0 and "resuming from" in resumed.stderr, resumed.stderr[-3000:]
    assert losses(run) == losses(tmp_path / "whole")


def test_a_repeated_sigterm_keeps_the_checkpoint_and_a_second_ctrl_c_means_now():
    for first in (signal.SIGTERM, signal.SIGINT):
        stop = StopRequested()
        try:
            os.kill(os.getpid(), first)
            os.kill(os.getpid(), signal.SIGTERM)  # a launcher forwarding the group's stop
            assert stop.flag  # and no KeyboardInterrupt: the step and checkpoint go on
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.1)
        finally:
            stop.restore()
