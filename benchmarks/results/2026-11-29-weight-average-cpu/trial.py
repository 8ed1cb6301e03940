"""One trial of the record beside this folder: train `tiny` on the demo cache for --steps steps
(the budget's schedule ending at the step cap, as the tiny-rate record's trial.py), keeping
power-function averages of the weights beside the run (Karras et al. 2024, EDM2: after step t,
avg = beta avg + (1 - beta) weights with beta = (1 - 1/t)^(gamma + 1)); then say the demo's
sentence in three voices and the 32 held-out sentences with the last weights and with each
average, and score them with Whisper tiny.en. One row per variant goes to OUT/trials.jsonl.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/results/2026-11-29-weight-average-cpu/trial.py \
        --cache CACHE --out OUT --seed S [--steps 350]

The averages are kept by wrapping Loop.step_once in this process; nothing in the package changed.
"""
import argparse
import json
import shutil
import time
from pathlib import Path

import soundfile as sf
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import myxtts.train.loop as L
from myxtts.cli import main as cli_main
from myxtts.demo import SENTENCE
from myxtts.data.cache import Cache
from myxtts.evaluate.asr import Recognizer
from myxtts.evaluate.evaluation import plan, plan_texts, speak_sentences
from myxtts.evaluate.metrics import cer, wer, word_errors
from myxtts.infer import Synthesizer

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "data" / "demo"
VOICES = ["spk5-0097", "spk1-0097", "spk3-0097"]
GAMMAS = {"ema_s10": 6.94, "ema_s15": 3.56}

p = argparse.ArgumentParser()
p.add_argument("--cache", type=Path, required=True)
p.add_argument("--out", type=Path, required=True)
p.add_argument("--seed", type=int, required=True)
p.add_argument("--steps", type=int, default=350)
p.add_argument("--new", action="store_true")
a = p.parse_args()
out = a.out / f"s{a.seed}"
out.mkdir(parents=True, exist_ok=True)

emas: dict = {}
keys: list = []
orig = L.Loop.step_once


def step_once(self):
    got = orig(self)
    t = self.state.step
    sd = self.run.model.state_dict()
    if not keys:
        keys.extend(k for k, v in sd.items() if v.is_floating_point())
    cur = [sd[k].detach().float() for k in keys]
    with torch.no_grad():
        for name, g in GAMMAS.items():
            if name not in emas:
                emas[name] = [q.clone() for q in cur]
                continue
            beta = (1 - 1 / t) ** (g + 1)
            torch._foreach_lerp_(emas[name], cur, 1 - beta)
    return got


L.Loop.step_once = step_once
t0 = time.time()
run = out / "run"
if not (run / "summary.json").exists():
    rc = cli_main(["train", "--config", "tiny", "--data", str(a.cache), "--out", str(run), "--no-progress",
                   f"train.max_steps={a.steps}", "train.time_budget_s=100000", f"train.seed={a.seed}"])
    assert rc in (0, None), rc
train_s = time.time() - t0

last = sorted((run / "checkpoints").iterdir())[-1] / "model.safetensors"
with safe_open(last, "pt") as f:
    meta = f.metadata()
    tensors = {k: f.get_tensor(k) for k in f.keys()}
variants = {"raw": run}
for name in GAMMAS:
    dst = out / f"run-{name}"
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    shutil.copy(run / "data.json", dst / "data.json")
    new = dict(tensors)
    hit = 0
    for k, v in zip(keys, emas[name]):
        if k in new:
            new[k] = v.to(new[k].dtype).contiguous()
            hit += 1
    assert hit == len(new), (hit, len(new))
    save_file(new, dst / "model.safetensors", metadata=meta)
    variants[name] = dst
# the raw variant: its last weights, as the EMAs are
rawdst = out / "run-raw"
if rawdst.exists():
    shutil.rmtree(rawdst)
rawdst.mkdir(parents=True)
shutil.copy(run / "data.json", rawdst / "data.json")
shutil.copy(last, rawdst / "model.safetensors")
variants["raw"] = rawdst

rec = Recognizer(threads=1)
cache = Cache(a.cache)
for name, path in variants.items():
    synth = Synthesizer(path)
    demo = {}
    for voice in VOICES:
        wav_path = out / f"demo-{name}-{voice}.wav"
        synth.synthesize_to_file([SENTENCE], wav_path, reference=DEMO / "wavs" / f"{voice}.flac")
        w, sr = sf.read(wav_path)
        heard = rec.transcribe(w, sr)
        demo[voice] = {"heard": heard, "errors": word_errors(SENTENCE, heard).edits}

    def score(sentences):
        spoken = speak_sentences(synth, cache, sentences, seed=0, log=lambda *_a, **_k: None)
        return [s.text for s in sentences], [rec.transcribe(s.wav, synth.sample_rate) for s in spoken]

    refs, hyps = score(plan(cache))
    row = {"variant": name, "seed": a.seed, "steps": a.steps, "train_s": round(train_s, 1), "demo": demo,
           "wer": wer(refs, hyps), "cer": cer(refs, hyps)}
    if a.new:
        nrefs, nhyps = score(plan_texts(cache, (DEMO / "new_sentences.txt").read_text().splitlines()))
        row["new_wer"] = wer(nrefs, nhyps)
    (out / f"heard-{name}.json").write_text(json.dumps(list(zip(refs, hyps)), indent=1))
    with open(a.out / "trials.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    print(name, a.seed, "demo", [d["errors"] for d in demo.values()], f"wer {row['wer']:.3f}", flush=True)
