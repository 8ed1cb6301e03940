"""The demos' wavs heard as a user hears them: `myxtts demo`'s (English) and `myxtts demo
--language fa`'s, each transcribed by eval's recogniser of its language and scored against the
sentence the demo says (word errors for English, character error rate for Persian).
Usage: python demo_wavs.py EN_DEMO_OUT FA_DEMO_OUT"""
import json
import sys
from pathlib import Path

from myxtts.audio import load_audio
from myxtts.demo import DEMOS
from myxtts.evaluate import metrics
from myxtts.evaluate.asr import SAMPLE_RATE, Recognizer


def heard(folder: Path, language: str, code: str) -> dict:
    wav = load_audio(folder / "demo.wav", SAMPLE_RATE)
    text = Recognizer(language=code).transcribe(wav, SAMPLE_RATE)
    said = DEMOS[language].sentence
    words, chars = metrics.word_errors(said, text, code), metrics.char_errors(said, text, code)
    return {"sentence": said, "transcript": text, "word_errors": words.edits, "words": words.length,
            "cer": chars.rate}


if __name__ == "__main__":
    out = {"en": heard(Path(sys.argv[1]), "en", "en-us"), "fa": heard(Path(sys.argv[2]), "fa", "fa")}
    print(json.dumps(out, ensure_ascii=False, indent=1))
