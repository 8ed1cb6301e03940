"""The memorised clips said through ``myxtts synthesize`` exactly as a user types it, one command
per clip with the clip's reference recording as ``--reference`` (the reference eval's plan picks:
another training utterance of the speaker), scored by the same listener against the texts, with
the recordings scored beside them.

    PYTHONPATH=. python synthesize_cli.py RUN CACHE CLIPS OUT [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from myxtts import audio
from myxtts.data.cache import Cache
from myxtts.evaluate import metrics
from myxtts.evaluate.asr import Recognizer
from myxtts.evaluate.evaluation import plan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run"), ap.add_argument("cache"), ap.add_argument("clips"), ap.add_argument("out")
    ap.add_argument("--json")
    args = ap.parse_args()
    cache, clips, out = Cache(args.cache), Path(args.clips), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    myxtts = Path(sys.executable).parent / "myxtts"
    asr = Recognizer(threads=os.cpu_count())
    sr = cache.audio_cfg.sample_rate
    rows = []
    for s in plan(cache, split="train"):
        ref = clips / "wavs" / f"{cache.index.id[s.ref]}.wav"
        wav = out / f"{s.id}.wav"
        cmd = [str(myxtts), "synthesize", "--checkpoint", args.run, "--text", s.text,
               "--reference", str(ref), "--out", str(wav)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{' '.join(cmd)}\n{done.stderr}")
        said = asr.transcribe(audio.load_audio(wav, sr).astype(np.float32), sr)
        heard = asr.transcribe(audio.load_audio(clips / "wavs" / f"{s.id}.wav", sr).astype(np.float32), sr)
        rows.append({"id": s.id, "reference": ref.name, "text": s.text, "synthesize": said,
                     "recording": heard, "command": f"myxtts synthesize --checkpoint RUN --text TEXT --reference CLIPS/wavs/{ref.name} "
                                f"--out OUT/{wav.name}",
                     "log": done.stderr.strip().splitlines()})
        print(f"{s.id}: {said}", flush=True)
    refs = [r["text"] for r in rows]
    result = {"clips": len(rows), "rows": rows}
    for key in ("synthesize", "recording"):
        hyps = [r[key] for r in rows]
        result[f"wer_{key}"], result[f"cer_{key}"] = metrics.wer(refs, hyps), metrics.cer(refs, hyps)
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
