"""Can the judge of cross-lingual cloning tell these voices apart across languages? The four
espeak-ng voices of the English demo, with the same variant, pitch and rate but espeak-ng's Persian
voice, say 6 sentences of the Persian demo; the GE2E encoder places each recording against the
training voices of the joined corpus, as cross_lingual.py places the model's outputs. (flite's
four English voices speak no Persian, so they have no such recording.)
Usage: python judge_check.py OUT  (OUT as run.sh made it)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from cross_lingual import RATE, voice_places

from myxtts.audio import load_audio
from myxtts.speaker_encoder import shared_encoder

DATA = Path(__file__).resolve().parents[3] / "data"
SENTENCES = 6
# the English demo's espeak-ng voices (scripts/make_demo_corpus.py), their variant on Persian
SAME_VOICE_IN_PERSIAN = {"en-spk1": ("fa", 55, 175), "en-spk2": ("fa+f3", 90, 170),
                         "en-spk3": ("fa+m7", 8, 165), "en-spk4": ("fa+f2", 82, 185)}


def main(out: Path) -> None:
    encoder = shared_encoder()
    places = voice_places(out / "bilingual", encoder)
    rows = (DATA / "demo-fa" / "metadata.csv").read_text(encoding="utf-8").splitlines()[:SENTENCES]
    folder = out / "judge"
    folder.mkdir(exist_ok=True)
    result = {}
    for voice, (espeak, pitch, rate) in SAME_VOICE_IN_PERSIAN.items():
        nearest = []
        for k, row in enumerate(rows):
            wav = folder / f"{voice}-{k}.wav"
            subprocess.run(["espeak-ng", "-v", espeak, "-p", str(pitch), "-s", str(rate), "-w", str(wav),
                            "--", row.split("|")[2]], check=True)
            e = encoder.embed(load_audio(wav, RATE), RATE)
            nearest.append(max(places, key=lambda v: float(np.dot(e, places[v]))))
        result[voice] = nearest
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
