"""DNSMOS, the naturalness judge: clean recordings must sound better than the same under noise,
and audio with nothing in it must not be judged."""
import json

import numpy as np
import pytest
import torch

from myxtts.config import load
from myxtts.evaluate.evaluation import DNSMOS, FIGURES, NO_RECORDING, PERIODIC, Result, summarize
from myxtts.evaluate.naturalness import SCORES
from myxtts.evaluate.report import write_report
from myxtts.speak import Spoken

from .conftest import SR, lj_wav

# At 16 kHz, repeated to DNSMOS's 9.01 s window, each of these fills a single window: one run of
# the models each (a 2 s clip repeats to 15 s, six windows). Measured clean: OVRL 3.33 and 3.07,
# SIG 3.66 and 3.50, BAK 3.95 and 3.79; at 0 dB SNR OVRL 1.63 and 1.81, SIG 3.07 and 3.20, BAK
# 1.36 and 1.63. On all eight fixture clips the noise takes 0.3-0.9 off SIG, 1.3-1.7 off OVRL,
# 1.8-2.7 off BAK and 1.4-1.9 off P.808.
CLIPS = ("LJ001-0003", "LJ001-0004")


def _with_white_noise(wav: np.ndarray, snr_db: float, seed: int = 0) -> np.ndarray:
    noise = np.random.default_rng(seed).standard_normal(wav.size).astype(np.float32)
    return wav + noise * np.sqrt(np.mean(wav ** 2)) * 10 ** (-snr_db / 20)


def test_noise_lowers_overall_signal_and_background(listener):
    for uid in CLIPS:
        wav = lj_wav(uid)
        clean, noisy = listener.naturalness.score(wav, SR), listener.naturalness.score(_with_white_noise(wav, 0), SR)
        assert all(1 <= clean[k] <= 5 and 1 <= noisy[k] <= 5 for k in SCORES), (clean, noisy)
        assert clean["ovrl"] > 2.8, clean  # a clean audiobook read
        assert clean["ovrl"] > noisy["ovrl"] + 1.0, (uid, clean, noisy)
        assert clean["sig"] > noisy["sig"] + 0.2, (uid, clean, noisy)
        assert clean["bak"] > noisy["bak"] + 1.5, (uid, clean, noisy)
        assert clean["p808"] > noisy["p808"] + 1.0, (uid, clean, noisy)


def test_silence_is_not_judged_but_faint_noise_is(listener):
    for nothing in (np.zeros(SR, np.float32), np.zeros(0, np.float32), np.full(SR, np.nan, np.float32)):
        assert listener.naturalness.score(nothing, SR) == dict.fromkeys(SCORES)
    # 5 s of hiss at -80 dBFS is audio: judged as what it is, no speech (measured SIG 2.78, OVRL 2.15)
    hiss = np.random.default_rng(0).standard_normal(5 * SR).astype(np.float32) * 1e-4
    scores = listener.naturalness.score(hiss, SR)
    assert all(isinstance(scores[k], float) for k in SCORES) and scores["sig"] < 3.2, scores


def _row(synthesized=(), ground_truth=(), copy_synthesis=(), **more) -> dict:
    """A row of evaluate()'s as summarize() reads it, with these DNSMOS scores (none: silent)."""
    dnsmos = {f"dnsmos_{k}{of}": v for of, scores in (("", synthesized), ("_ground_truth", ground_truth),
                                                       ("_copy_synthesis", copy_synthesis))
              for k, v in zip(SCORES, scores or (None,) * 4)}
    return {"language": "en-us", "text": "a", "transcript": "a", "speaker_cosine": 0.9,
            "speaker_cosine_mismatched": None,
            "mismatched_reference": None, "stopped": True, "seconds": 1.0, "duration_ratio": 1.0,
            "rtf": 0.1, **dnsmos, **more}


def test_summary_means_dnsmos_over_files_and_says_why_one_is_missing():
    cfg = load("tiny")
    no_recording = {"transcript_ground_truth": None, "transcript_copy_synthesis": "a"}
    rows = [_row((3.0, 3.5, 4.0, 3.8), copy_synthesis=(2.0, 2.5, 3.0, 3.2), **no_recording),
            _row((2.0, 2.5, 3.0, 2.8), **no_recording)]  # silent copy synthesis: not in its mean
    s = summarize(rows, cfg)
    assert [s[k] for k in DNSMOS[:4]] == pytest.approx([2.5, 3.0, 3.5, 3.3])
    assert [s[k] for k in DNSMOS[8:]] == pytest.approx([2.0, 2.5, 3.0, 3.2])
    assert s["dnsmos_ovrl_ground_truth"] is None and s["not_measured"]["dnsmos_bak_ground_truth"] == NO_RECORDING
    assert not any(k in s["not_measured"] for k in DNSMOS[:4] + DNSMOS[8:])
    periodic = summarize([_row((3.0, 3.5, 4.0, 3.8))], cfg, ground_truth=False)  # no recording scored
    assert periodic["dnsmos_ovrl"] == 3.0 and periodic["dnsmos_ovrl_copy_synthesis"] is None
    assert periodic["not_measured"]["dnsmos_ovrl_copy_synthesis"] == PERIODIC
    silent = summarize([_row()], cfg, ground_truth=False)
    assert silent["dnsmos_ovrl"] is None and silent["not_measured"]["dnsmos_sig"] == "every output was silent"


def test_eval_json_and_page_show_naturalness(tmp_path):
    row = _row((3.0, 3.5, 4.0, 3.8), (3.3, 3.6, 4.0, 4.1), (2.4, 3.4, 2.5, 3.3), transcript_ground_truth="a",
               transcript_copy_synthesis="a", id="LJ001-0002", speaker="lj", reference="LJ001-0001", wer=0.0,
               seconds_ground_truth=1.0)
    spoken = Spoken(torch.zeros(8, 80), np.zeros((4, 3)), np.zeros(SR // 10, np.float32), True, 0.1)
    write_report(tmp_path, Result(summarize([row], load("tiny")), [row], [spoken], [None], [None]), {}, SR)
    report = json.loads((tmp_path / "eval.json").read_text())
    assert all(key in report for key in FIGURES) and report["dnsmos_bak_ground_truth"] == 4.0
    assert report["per_sentence"][0]["dnsmos_p808_copy_synthesis"] == 3.3
    html = (tmp_path / "eval.html").read_text()
    assert "<td>DNSMOS overall, synthesized</td><td>3.00</td>" in html
    assert "<td>DNSMOS P.808, copy synthesis</td><td>3.30</td>" in html
    assert "3.00 synthesized; 3.30 recording; 2.40 copy synthesis" in html  # the sentence's own
