"""How well ``myxtts serve``'s word timings (from the model's durations) agree with a recogniser's
word timestamps on the held-out sentences of a cache.

Each sentence is asked of the server's app (in this process) with ``word_timestamps: true`` in
its own speaker's voice; the audio goes to faster-whisper (Whisper tiny.en from the eval extra,
``word_timestamps=True``). The two word lists are matched in order on their normalised spelling
(difflib), and the distance between the two starts of each matched word is reported.

    PYTHONPATH=. python benchmarks/serve_word_timing.py RUN CACHE [--vocoder griffin-lim] [--json F]
"""
from __future__ import annotations

import argparse
import base64
import difflib
import io
import json
import re
import statistics

import numpy as np
import soundfile as sf
import soxr


def norm(word: str) -> str:
    return re.sub(r"[^a-z0-9']", "", word.lower())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("cache")
    ap.add_argument("--vocoder")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--json")
    args = ap.parse_args()
    from fastapi.testclient import TestClient
    from faster_whisper import WhisperModel

    from myxtts.data.cache import Cache
    from myxtts.evaluate.asr import default_model_path
    from myxtts.serve import build
    from myxtts.serve.openai_api import create_app

    cache = Cache(args.cache)
    engine, voices = build(args.checkpoint, args.vocoder, "cpu", args.cache, None, log=lambda m: None)
    whisper = WhisperModel(str(default_model_path()), device="cpu", compute_type="int8", local_files_only=True)
    val = cache.indices("val")[:args.limit]
    distances, later, rows = [], [], []  # later: all but each sentence's first word (both often 0)
    with TestClient(create_app(engine, voices)) as client:
        for i in val:
            text, voice = cache.index.text[i], cache.speakers[cache.index.speaker[i]]
            r = client.post("/v1/audio/speech", json={"model": "myxtts", "input": text, "voice": voice,
                                                      "response_format": "wav", "word_timestamps": True})
            got = r.json()
            wav, sr = sf.read(io.BytesIO(base64.b64decode(got["audio"])), dtype="float32")
            segments, _ = whisper.transcribe(soxr.resample(wav, sr, 16000).astype(np.float32), language="en",
                                             beam_size=1, word_timestamps=True, condition_on_previous_text=False,
                                             vad_filter=False)
            heard = [w for s in segments for w in s.words]
            ours = got["words"]
            a, b = [norm(w["word"]) for w in ours], [norm(w.word) for w in heard]
            matched = []
            for blk in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks():
                for k in range(blk.size):
                    o, h = ours[blk.a + k], heard[blk.b + k]
                    matched.append({"word": o["word"], "position": blk.a + k, "ours": o["start"],
                                    "whisper": round(h.start, 3),
                                    "distance_ms": round(1000 * abs(o["start"] - h.start), 1)})
            distances += [m["distance_ms"] for m in matched]
            later += [m["distance_ms"] for m in matched if m["position"] > 0]
            rows.append({"id": cache.index.id[i], "text": text, "voice": voice, "our_words": len(ours),
                         "heard_words": len(heard), "matched": matched})
            print(f"{cache.index.id[i]}: {len(matched)}/{len(ours)} words matched; "
                  + ", ".join(f"{m['word']} {m['distance_ms']:.0f}" for m in matched), flush=True)
    engine.stop()
    summary = {"sentences": len(rows), "words": sum(r["our_words"] for r in rows), "matched": len(distances),
               "median_ms": round(statistics.median(distances), 1) if distances else None,
               "p90_ms": round(float(np.percentile(distances, 90)), 1) if distances else None,
               "median_ms_after_first_word": round(statistics.median(later), 1) if later else None}
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "sentences": rows}, f, indent=1)


if __name__ == "__main__":
    main()
