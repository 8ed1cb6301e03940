"""``NAME.onnx.json``: what Piper's loader (``PiperConfig.from_dict``) reads beside the graph.

Fields as Piper's own voices carry them: ``audio.sample_rate``, ``espeak.voice``,
``phoneme_type`` (``espeak``), ``phoneme_id_map`` (phoneme → [id]), ``num_symbols``,
``num_speakers``, ``speaker_id_map`` (name → sid; empty for one voice), ``inference``
(``noise_scale``, ``length_scale``, ``noise_w``), ``hop_length`` (the alignment output is in
frames of it), ``language``, ``dataset`` and ``piper_version``. The noise scales are Piper's
defaults, written because its loader expects them; this graph has no noise to scale.
"""
from __future__ import annotations

import unicodedata
from pathlib import Path

from myxtts import __version__
from myxtts.errors import UserError
from myxtts.files import write_json

PIPER_VERSION = "1.0.0"  # the voice format's version, as Piper's own exports write it
NOISE_SCALE, NOISE_W = 0.667, 0.8  # Piper's defaults: read by the graph, and ignored


def check_name(name: str) -> str:
    """A speaker name Piper's JSON and its users can carry: not empty, no control characters,
    and valid Unicode (a name from undecodable bytes holds lone surrogates, which no UTF-8
    JSON file can hold). Returns the name; raises UserError naming what is wrong."""
    if not name.strip():
        raise UserError(f"voice name {name!r} is empty")
    bad = [c for c in name if unicodedata.category(c) in ("Cc", "Cs")]
    if bad:
        raise UserError(f"voice name {name.encode('utf-8', 'backslashreplace').decode()!r} holds "
                        f"{', '.join(ascii(c) for c in dict.fromkeys(bad))}, which Piper's voice file "
                        "cannot carry; use letters, digits, spaces and punctuation")
    return name


def language(espeak_voice: str) -> dict:
    """espeak-ng's ``en-us`` → Piper's ``{"code": "en_US", "family": "en", "region": "US"}``."""
    family, _, region = espeak_voice.partition("-")
    code = f"{family}_{region.upper()}" if region else family
    return {"code": code, "family": family, "region": region.upper()}


def voice_config(*, sample_rate: int, hop_length: int, espeak_voice: str, phoneme_id_map: dict,
                 num_symbols: int, speakers: list[str], dataset: str, source: dict) -> dict:
    """The JSON as a dict; ``source``: where the weights came from (step, why those)."""
    return {
        "dataset": dataset,
        "audio": {"sample_rate": sample_rate},
        "espeak": {"voice": espeak_voice},
        "language": language(espeak_voice),
        "inference": {"noise_scale": NOISE_SCALE, "length_scale": 1.0, "noise_w": NOISE_W},
        "phoneme_type": "espeak",
        "phoneme_map": {},
        "phoneme_id_map": phoneme_id_map,
        "num_symbols": num_symbols,
        "num_speakers": len(speakers),
        "speaker_id_map": {name: i for i, name in enumerate(speakers)} if len(speakers) > 1 else {},
        "hop_length": hop_length,
        "piper_version": PIPER_VERSION,
        "myxtts": {"version": __version__, **source},
    }


def write(path: Path, config: dict) -> None:
    """Atomic, as the model files are: a killed export leaves no half-written voice."""
    write_json(path, config, indent=2)
