"""Cross-lingual cloning on the two-language run: each English demo voice speaks Persian held-out
sentences through `myxtts synthesize --voice V --language fa` (as a user types it), and the GE2E
speaker encoder (the one eval scores with) says which training voice each result is nearest: a
voice's place is the mean embedding of its first TRAIN_CLIPS training recordings.
Usage: python cross_lingual.py OUT N  (OUT as run.sh made it; N: the step spoken with)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from myxtts.audio import load_audio
from myxtts.speaker_encoder import shared_encoder

TRAIN_CLIPS = 10
SENTENCES = 2  # Persian held-out sentences per voice
RATE = 16000


def voice_places(corpus: Path, encoder) -> dict[str, np.ndarray]:
    held_out = set((corpus / "val.txt").read_text().split())
    clips: dict[str, list[Path]] = {}
    for line in (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines():
        uid, _, _, speaker, _ = line.split("|")
        if uid not in held_out and len(clips.setdefault(speaker, [])) < TRAIN_CLIPS:
            clips[speaker].append(next((corpus / "wavs").glob(f"{uid}.*")))
    places = {}
    for speaker, paths in clips.items():
        e = np.mean([encoder.embed(load_audio(p, RATE), RATE) for p in paths], axis=0)
        places[speaker] = e / np.linalg.norm(e)
    return places


def main(out: Path, step: int) -> None:
    corpus, encoder = out / "bilingual", shared_encoder()
    places = voice_places(corpus, encoder)
    texts = [line.split("|")[1] for line in (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines()
             if line.split("|")[0] in set((corpus / "val.txt").read_text().split()) and line.endswith("|fa")]
    (out / "fa-sentences.txt").write_text("\n".join(texts[:SENTENCES]) + "\n", encoding="utf-8")
    trials = []
    for voice in sorted(v for v in places if v.startswith("en-")):
        folder = out / "cross" / voice
        subprocess.run([sys.executable, "-m", "myxtts", "synthesize", "--checkpoint", str(out / "r-bi"),
                        "--step", str(step), "--voice", voice, "--language", "fa",
                        "--texts", str(out / "fa-sentences.txt"), "--out", str(folder)], check=True)
        for wav in sorted(folder.glob("*.wav")):
            e = encoder.embed(load_audio(wav, RATE), RATE)
            if e is None:  # no sound in it: no voice to place
                trials.append({"voice": voice, "wav": str(wav.relative_to(out)), "nearest": None})
                continue
            cos = {v: float(np.dot(e, p)) for v, p in places.items()}
            nearest = max(cos, key=cos.get)
            trials.append({"voice": voice, "wav": str(wav.relative_to(out)), "nearest": nearest,
                           "cosine_own": cos[voice], "cosine_best_other": max(c for v, c in cos.items() if v != voice)})
    result = {"step": step, "trials": len(trials), "nearest_is_own": sum(t["nearest"] == t["voice"] for t in trials),
              "details": trials}
    (out / "cross_lingual.json").write_text(json.dumps(result, indent=1))
    print(f"{result['nearest_is_own']} of {result['trials']} Persian sentences in an English voice are "
          "nearest that voice")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
