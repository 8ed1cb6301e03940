import numpy as np

from myxtts import audio
from myxtts.speaker_encoder import cosine

from .conftest import SR, VOICES, lj_wav


def test_same_speaker_is_closer_than_another_speaker(listener):
    enc = listener.speaker
    a, b = (enc.embed(lj_wav(c), SR) for c in ("LJ001-0004", "LJ001-0006"))
    others = [enc.embed(audio.load_audio(p, SR), SR) for p in sorted(VOICES.glob("*.wav"))]
    assert abs(float(np.linalg.norm(a)) - 1.0) < 1e-5
    same = cosine(a, b)
    assert all(same > cosine(a, o) + 0.1 for o in others), (same, [cosine(a, o) for o in others])


def test_silence_has_no_voice(listener):
    assert listener.speaker.embed(np.zeros(SR, dtype=np.float32), SR) is None
    assert cosine(None, np.ones(3)) is None
