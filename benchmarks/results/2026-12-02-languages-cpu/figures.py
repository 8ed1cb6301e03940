"""The record's table: each eval.json's error rates (and per language, where it has several),
the synthesized output's beside the recordings' by the same recogniser.
Usage: python figures.py EVAL_JSON..."""
import json
import sys
from pathlib import Path

KEYS = ("wer", "cer", "wer_ground_truth", "cer_ground_truth", "speaker_cosine", "speaker_cosine_mismatched")


def figures(summary: dict) -> dict:
    return {k: summary.get(k) for k in KEYS}


if __name__ == "__main__":
    out = {}
    for path in sys.argv[1:]:
        e = json.loads(Path(path).read_text())
        row = {"step": e["step"], "sentences": e["sentences"], "asr": e.get("asr"), **figures(e)}
        if "by_language" in e:
            row["by_language"] = {lang: figures(s) for lang, s in e["by_language"].items()}
        out[Path(path).stem] = row
    print(json.dumps(out, indent=1, ensure_ascii=False))
