"""One trial of the record beside this folder: train `tiny` on the demo cache for --steps steps with
the schedule a time budget gives (the peak rate, then a cosine over the last 20 %, ending at the
last step: what a machine that makes that many steps in the 3-minute demo gets), then say the
demo's sentence in three held-out voices and the 32 held-out sentences (with --new also the 20 new
ones) and score them with Whisper tiny.en, as `myxtts eval` does. One row per trial is appended
to OUT/trials.jsonl.

    PYTHONPATH=. python benchmarks/results/2026-11-28-tiny-rate-cpu/trial.py --cache CACHE \
        --out OUT --name NAME --seed S [--steps 350] [--new] [KEY=VALUE ...]

CACHE: `myxtts prepare data/demo --out CACHE`. Run with OMP_NUM_THREADS=1, two trials at a time.
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import soundfile as sf

from myxtts.demo import SENTENCE
from myxtts.data.cache import Cache
from myxtts.evaluate.asr import Recognizer
from myxtts.evaluate.evaluation import plan, plan_texts, speak_sentences
from myxtts.evaluate.metrics import cer, wer, word_errors
from myxtts.infer import Synthesizer

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "data" / "demo"
VOICES = ["spk5-0097", "spk1-0097", "spk3-0097"]  # the demo's own voice first

p = argparse.ArgumentParser()
p.add_argument("--cache", type=Path, required=True)
p.add_argument("--out", type=Path, required=True)
p.add_argument("--name", required=True)
p.add_argument("--seed", type=int, required=True)
p.add_argument("--steps", type=int, default=350)
p.add_argument("--new", action="store_true", help="also the 20 sentences found nowhere in the corpus")
p.add_argument("settings", nargs="*")
a = p.parse_args()
out = a.out / f"{a.name}-s{a.seed}"
out.mkdir(parents=True, exist_ok=True)
t = time.time()
if not (out / "run" / "summary.json").exists():
    # A budget far beyond the run: the schedule's end is then max_steps, and the budget's
    # peak-then-cool-down schedule applies (train/optim.py, Horizon).
    subprocess.run([sys.executable, "-m", "myxtts", "train", "--config", "tiny", "--data", str(a.cache),
                    "--out", str(out / "run"), "--no-progress", f"train.max_steps={a.steps}",
                    "train.time_budget_s=100000", f"train.seed={a.seed}", *a.settings],
                   check=True, stdout=open(out / "train.log", "w"), stderr=subprocess.STDOUT)
train_s = time.time() - t

synth = Synthesizer(out / "run")
rec = Recognizer(threads=1)
demo = {}
for voice in VOICES:
    wav_path = out / f"demo-{voice}.wav"
    synth.synthesize_to_file([SENTENCE], wav_path, reference=DEMO / "wavs" / f"{voice}.flac")
    w, sr = sf.read(wav_path)
    heard = rec.transcribe(w, sr)
    demo[voice] = {"heard": heard, "errors": word_errors(SENTENCE, heard).edits}

cache = Cache(a.cache)


def score(sentences):
    spoken = speak_sentences(synth, cache, sentences, seed=0, log=lambda *_a, **_k: None)
    hyps = [rec.transcribe(s.wav, synth.sample_rate) for s in spoken]
    refs = [s.text for s in sentences]
    return refs, hyps


refs, hyps = score(plan(cache))
row = {"name": a.name, "seed": a.seed, "settings": a.settings, "steps": a.steps, "train_s": round(train_s, 1),
       "demo": demo, "wer": wer(refs, hyps), "cer": cer(refs, hyps)}
if a.new:
    nrefs, nhyps = score(plan_texts(cache, (DEMO / "new_sentences.txt").read_text().splitlines()))
    row["new_wer"] = wer(nrefs, nhyps)
val = [json.loads(line) for line in open(out / "run" / "metrics.jsonl") if "val_loss" in line][-1]
row.update(val_loss=val["val_loss"], val_mel_l1=val["val_mel_l1"])
(out / "heard.json").write_text(json.dumps(list(zip(refs, hyps)), indent=1))
with open(a.out / "trials.jsonl", "a") as f:
    f.write(json.dumps(row) + "\n")
print(a.name, a.seed, "demo", [d["errors"] for d in demo.values()], f"wer {row['wer']:.3f}",
      f"val {row['val_loss']:.3f}")
