"""Build a messy LJSpeech-format corpus from the real fixture clips: every kind of bad input
prepare must survive, next to good clips in awkward formats it must convert and keep."""
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

LJ = Path(__file__).parent.parent / "fixtures" / "ljspeech"

# Clips in awkward but usable formats: converted and kept.
KEPT = ("plain", "stereo", "eightbit", "hi44k", "lo16k", "asflac", "asogg", "numbers")
# Lines that cannot become an utterance: {id: word expected in the reason it was skipped}.
SKIPPED = {"missing": "not found", "corrupt": "unreadable", "empty": "empty", "short": "too short",
           "long": "too long", "silent": "silent", "notext": "empty text",
           "emoji": "no usable characters", "badlang": "unknown language code 'xx'", "plain": "duplicate id",
           "../../etc/passwd": "path separator", "no pipe on this line": "expected 'id|text'"}


def real_clip(n: int = 2) -> tuple[np.ndarray, int]:
    wav, sr = sf.read(LJ / "wavs" / f"LJ001-000{n}.wav", dtype="float32")
    return wav, sr


def make_messy_corpus(root: Path) -> tuple[set[str], dict[str, str]]:
    """Returns (ids that must be kept, {id: word expected in its skip reason})."""
    wavs = root / "wavs"
    wavs.mkdir(parents=True)
    wav, sr = real_clip(2)
    lines = []
    keep, bad = set(), {}

    def good(uid, text="In being comparatively modern."):
        keep.add(uid)
        lines.append(f"{uid}|{text}|{text}")

    sf.write(wavs / "plain.wav", wav, sr, subtype="PCM_16")
    good("plain")
    sf.write(wavs / "stereo.wav", np.stack([wav, wav * 0.5], 1), sr, subtype="PCM_16")
    good("stereo")
    sf.write(wavs / "eightbit.wav", wav, sr, subtype="PCM_U8")
    good("eightbit")
    sf.write(wavs / "hi44k.wav", soxr.resample(wav, sr, 44100), 44100, subtype="PCM_24")
    good("hi44k")
    sf.write(wavs / "lo16k.wav", soxr.resample(wav, sr, 16000), 16000, subtype="PCM_16")
    good("lo16k")
    sf.write(wavs / "asflac.flac", wav, sr, subtype="PCM_16")
    good("asflac")
    sf.write(wavs / "asogg.ogg", wav, sr, format="OGG", subtype="VORBIS")
    good("asogg")
    sf.write(wavs / "numbers.wav", wav, sr)
    good("numbers", "Dr. Who paid $5 in 1990.")

    lines.append("")  # empty lines are not utterances
    lines.append("missing|This file does not exist.|This file does not exist.")
    bad["missing"] = "not found"
    (wavs / "corrupt.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunkjunkjunk" * 4)
    lines.append("corrupt|A corrupt header.|A corrupt header.")
    bad["corrupt"] = "unreadable"
    (wavs / "empty.wav").write_bytes(b"")
    lines.append("empty|Zero bytes.|Zero bytes.")
    bad["empty"] = "empty"
    sf.write(wavs / "short.wav", wav[: sr // 10], sr)
    lines.append("short|Too short.|Too short.")
    bad["short"] = "too short"
    sf.write(wavs / "long.wav", np.tile(wav, 12), sr)
    lines.append("long|Much too long.|Much too long.")
    bad["long"] = "too long"
    sf.write(wavs / "silent.wav", np.zeros(sr * 2, np.float32), sr)
    lines.append("silent|Nothing at all.|Nothing at all.")
    bad["silent"] = "silent"
    sf.write(wavs / "notext.wav", wav, sr)
    lines.append("notext||")
    bad["notext"] = "empty text"
    sf.write(wavs / "emoji.wav", wav, sr)
    lines.append("emoji|\U0001F389\U0001F389|\U0001F389\U0001F389")
    bad["emoji"] = "no usable characters"
    sf.write(wavs / "badlang.wav", wav, sr)
    lines.append("badlang|A language nobody knows.|A language nobody knows.|speaker|xx")
    bad["badlang"] = "unknown language code 'xx'"
    lines.append("plain|A second line with the same id.|A second line with the same id.")
    bad["plain"] = "duplicate id"
    lines.append("../../etc/passwd|Escaping the folder.|Escaping the folder.")
    bad["../../etc/passwd"] = "path separator"
    lines.append("no pipe on this line")
    bad["no pipe on this line"] = "expected 'id|text'"
    (root / "metadata.csv").write_text("\n".join(lines) + "\n")
    assert keep == set(KEPT) and bad == SKIPPED
    return keep, bad
