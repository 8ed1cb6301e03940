"""Naturalness: DNSMOS P.835, Microsoft's non-intrusive estimate of a listening test's scores.

DNSMOS predicts, from the audio alone (no clean reference), the 1-5 mean opinion scores of the
ITU-T P.835 test: SIG (the speech signal itself: distortion, artefacts), BAK (the background:
5 is no noise) and OVRL (the overall quality), plus the overall score of a P.808 test. Its
networks were trained on human ratings of noisy and processed speech (the Deep Noise Suppression
challenges), not of synthetic speech: read it as a trend and a comparison with the recordings
and copy synthesis next to it, not as an absolute MOS. The ONNX models ship in the ``speechmos``
package (the eval extra), which runs Microsoft's reference scoring: 16 kHz audio, 9.01 s
windows a second apart, shorter clips repeated until they fill one.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import soxr

SAMPLE_RATE = 16000  # the only rate the models take
SCORES = ("ovrl", "sig", "bak", "p808")


class Naturalness:
    """DNSMOS P.835 and P.808 with the models loaded once, on the CPU."""

    def __init__(self, threads: int = 0):
        import onnxruntime as ort
        from speechmos import dnsmos

        models = Path(dnsmos.__file__).parent / "dnsmos_models"
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads  # 0: onnxruntime's default, one per core

        class _DNSMOS(dnsmos.DNSMOS):
            # The package's own constructor takes no session options: the sessions are built
            # here so the scorer keeps to the threads it is given (in training, torch's).
            def __init__(self):
                self.onnx_sess, self.p808_onnx_sess = (
                    ort.InferenceSession(str(models / name), options, providers=["CPUExecutionProvider"])
                    for name in ("sig_bak_ovr.onnx", "model_v8.onnx"))

        self.model = _DNSMOS()

    def score(self, wav: np.ndarray, sample_rate: int) -> dict[str, float | None]:
        """(S,) float waveform at any rate → {ovrl, sig, bak, p808}; all None for audio with no
        sound in it (empty, all zeros) or none that can be played (not finite): nothing to judge."""
        wav = np.asarray(wav, dtype=np.float32)
        if not wav.size or not np.any(wav) or not np.all(np.isfinite(wav)):
            return dict.fromkeys(SCORES)
        if sample_rate != SAMPLE_RATE:
            wav = soxr.resample(wav, sample_rate, SAMPLE_RATE).astype(np.float32)
        # the models take full-scale audio; an overshooting vocoder's peaks are clipped as a DAC would
        mos = self.model(np.clip(wav, -1.0, 1.0), SAMPLE_RATE, False)  # False: not personalized
        return {k: float(mos[f"{k}_mos"]) for k in SCORES}
