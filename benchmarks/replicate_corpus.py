"""Make a larger LJSpeech-style corpus from the demo corpus by linking each clip N times under
new ids (same audio, same text): enough data for minutes of training without shipping more.

    python benchmarks/replicate_corpus.py data/demo OUT --copies 20
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--copies", type=int, default=20)
    a = ap.parse_args()
    src, out = Path(a.src).resolve(), Path(a.out)
    (out / "wavs").mkdir(parents=True, exist_ok=True)
    lines = []
    for line in (src / "metadata.csv").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        uid, rest = line.split("|", 1)
        audio = next((src / "wavs").glob(f"{uid}.*"))
        for c in range(a.copies):
            new = f"{uid}-c{c:03d}"
            dst = out / "wavs" / f"{new}{audio.suffix}"
            if not dst.exists():
                try:
                    os.symlink(audio, dst)
                except OSError:
                    shutil.copy(audio, dst)
            lines.append(f"{new}|{rest}")
    (out / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} utterances in {out}")


if __name__ == "__main__":
    main()
