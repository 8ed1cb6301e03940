"""The English and Persian demo corpora as one LJSpeech-format corpus, as a user would join two
corpora: each row names its language (the fifth column), ids and speakers take a language prefix
(both corpora call their voices spk1...), the audio is linked, and val.txt holds both corpora's
held-out clips. Usage: python bilingual_corpus.py OUT"""
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[3] / "data"
CORPORA = {"en": (DATA / "demo", "en-us"), "fa": (DATA / "demo-fa", "fa")}


def main(out: Path) -> None:
    (out / "wavs").mkdir(parents=True, exist_ok=True)
    rows, held_out = [], []
    for prefix, (root, language) in CORPORA.items():
        for line in (root / "metadata.csv").read_text(encoding="utf-8").splitlines():
            uid, text, normalized, speaker = line.split("|")[:4]
            (audio,) = (root / "wavs").glob(f"{uid}.*")
            link = out / "wavs" / f"{prefix}-{uid}{audio.suffix}"
            if not link.exists():
                link.symlink_to(audio)
            rows.append(f"{prefix}-{uid}|{text}|{normalized}|{prefix}-{speaker}|{language}")
        held_out += [f"{prefix}-{uid}" for uid in (root / "val.txt").read_text().split()]
    (out / "metadata.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (out / "val.txt").write_text("\n".join(held_out) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
