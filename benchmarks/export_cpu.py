"""An exported Piper voice against the PyTorch model it came from, on this CPU, in one run.

    python benchmarks/export_cpu.py --run RUN --data CACHE --out RECORD [--limit 16]
        [--device-label "CPU, 2 cores"]

Exports RUN (``myxtts export --format piper``) and, for the cache's first ``limit`` held-out
sentences in the speaker's voice:

- parity: the graph in onnxruntime against the run's own
  :meth:`~myxtts.infer.Synthesizer.speak_ids` on the same ids and voice: mel mean absolute error,
  largest audio difference, frame counts equal;
- speed: the real-time factor (seconds taken / seconds of audio, one sentence at a time) of the
  graph in onnxruntime, of Piper's own runtime (``PiperVoice.synthesize``: its phonemizer
  included) and of ``myxtts synthesize``'s path (``Synthesizer.synthesize``, PyTorch eager),
  interleaved sentence by sentence so the machine's load falls on all three alike;
- intelligibility: Whisper tiny.en's WER on Piper's audio and on ``synthesize``'s (where the
  ``eval`` extra is installed; else "not measured").

Writes ``RECORD.json`` and ``RECORD.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from myxtts.data.cache import Cache
from myxtts.export.phonemes import build
from myxtts.export.piper import export, run_onnx, session
from myxtts.infer import Synthesizer
from myxtts.speak import reference_from_mel


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True, help="record path without suffix")
    ap.add_argument("--limit", type=int, default=16)
    ap.add_argument("--device-label", default="CPU")
    args = ap.parse_args()
    torch.manual_seed(0)
    out = Path(args.out)
    voice_dir = out.parent / (out.name + "-voice")
    lines: list[str] = []
    done = export(args.run, voice_dir / "voice.onnx", data=args.data, say=lines.append)
    cache = Cache(args.data)
    synth = Synthesizer(done.weights, device="cpu", log=lambda _: None)
    cfg, text = synth.cfg, synth.text
    pmap = build(text.vocab.symbols)
    sess = session(done.onnx)
    voice = done.voices[0]
    multi = len(done.voices) > 1
    ref_index = next(int(i) for i in cache.indices("train"))
    assert voice.reference.frames == reference_from_mel(cache.mel(ref_index), cfg).frames
    sentences = [cache.index.text[int(i)] for i in cache.indices("val")][:args.limit]

    from piper import PiperVoice  # piper-tts: the dev extra

    piper_voice = PiperVoice.load(done.onnx)
    rows = []
    for s in sentences:
        tokens = synth.encode(s)  # the whole text as one utterance, as the graph reads it
        (spoken,) = synth.speak_ids([tokens], voice)
        ids = pmap.ids_of_tokens(tokens)
        t0 = time.perf_counter()
        wav, durations, mel = run_onnx(sess, ids, 0 if multi else None)
        t_onnx = time.perf_counter() - t0
        t0 = time.perf_counter()
        (ours,) = synth.synthesize([s], voice, batch_size=1)
        t_torch = time.perf_counter() - t0
        t0 = time.perf_counter()
        chunks = list(piper_voice.synthesize(s))
        t_piper = time.perf_counter() - t0
        heard = np.concatenate([c.audio_float_array for c in chunks])
        same = mel.shape == tuple(spoken.mel.shape)
        rows.append({
            "text": s, "frames_onnx": int(mel.shape[0]), "frames_torch": int(spoken.mel.shape[0]),
            "mel_mae": float(np.abs(mel - spoken.mel.numpy()).mean()) if same else None,
            "audio_max_diff": float(np.abs(wav - np.clip(spoken.wav, -1, 1)).max()) if same else None,
            "seconds": wav.size / cfg.audio.sample_rate, "piper_seconds": heard.size / cfg.audio.sample_rate,
            "synthesize_seconds": ours.seconds,
            "rtf_onnx": t_onnx / (wav.size / cfg.audio.sample_rate),
            "rtf_piper": t_piper / (heard.size / cfg.audio.sample_rate),
            "rtf_synthesize": t_torch / ours.seconds,
            "_piper_wav": heard, "_ours_wav": ours.wav})
    wer = {"piper": None, "synthesize": None, "note": "not measured: the eval extra is not installed"}
    try:
        from myxtts.evaluate.asr import Recognizer
        from myxtts.evaluate.metrics import wer as word_error_rate

        asr = Recognizer(threads=torch.get_num_threads())
        sr = cfg.audio.sample_rate
        for r in rows:
            r["piper_transcript"] = asr.transcribe(r["_piper_wav"], sr)
            r["synthesize_transcript"] = asr.transcribe(r["_ours_wav"], sr)
        wer = {"piper": word_error_rate([r["text"] for r in rows], [r["piper_transcript"] for r in rows]),
               "synthesize": word_error_rate([r["text"] for r in rows], [r["synthesize_transcript"] for r in rows]),
               "note": f"Whisper ({asr.name})"}
    except ImportError:
        pass
    for r in rows:
        del r["_piper_wav"], r["_ours_wav"]
    med = lambda k: statistics.median(r[k] for r in rows if r[k] is not None)
    summary = {
        "device": args.device_label, "torch_threads": torch.get_num_threads(),
        "load_average": os.getloadavg(), "run": str(args.run), "weights": str(done.weights), "why": done.why,
        "sentences": len(rows), "export_lines": lines,
        "frames_equal": all(r["frames_onnx"] == r["frames_torch"] for r in rows),
        "mel_mae_max": max(r["mel_mae"] for r in rows if r["mel_mae"] is not None),
        "audio_max_diff_max": max(r["audio_max_diff"] for r in rows if r["audio_max_diff"] is not None),
        "rtf_onnx_median": med("rtf_onnx"), "rtf_piper_median": med("rtf_piper"),
        "rtf_synthesize_median": med("rtf_synthesize"), "wer": wer,
        "onnx_bytes": done.onnx.stat().st_size,
    }
    out.with_suffix(".json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2, ensure_ascii=False))
    print(json.dumps(summary, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
