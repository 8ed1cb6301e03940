"""What the page says about the run it serves and about the server's load (``GET /v1/status``),
and a voice's reference as the model hears it."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

import httpx
import soundfile as sf

from myxtts.infer import about_weights
from myxtts.rundir import choose_weights
from myxtts.serve.page import LOAD_WINDOW_S, STATIC, language_options, load
from myxtts.serve.schemas import Status


def test_the_run_is_named_with_its_weights_why_and_their_evaluation(tmp_path):
    run = tmp_path / "lj-run"
    for step in (100, 200):
        (run / "checkpoints" / f"step-{step:08d}").mkdir(parents=True)
        (run / "checkpoints" / f"step-{step:08d}" / "model.safetensors").write_bytes(b"")
    lines = [{"step": s, "loss": 1.0 / s} for s in range(50, 201, 50)]
    lines += [{"step": 100, "loss": None, "eval_wer": 0.25, "eval_speaker_cosine": 0.8, "eval_dnsmos_ovrl": 2.9},
              {"step": 200, "loss": None, "eval_wer": 0.4, "eval_speaker_cosine": 0.9}]
    (run / "metrics.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n{\"step\": 2")  # a line cut short
    info = about_weights(*choose_weights(run), 100)  # what the loaded run says of its weights
    assert info["folder"] == "lj-run" and info["weights"] == "checkpoints/step-00000100/model.safetensors"
    assert info["why"].startswith("step 100: the lowest held-out WER") and info["steps_trained"] == 200
    assert info["eval"] == {"eval_wer": 0.25, "eval_speaker_cosine": 0.8, "eval_dnsmos_ovrl": 2.9}
    assert info["report_path"] == str(run.resolve() / "report.html")
    asked = about_weights(*choose_weights(run, 200), 200)  # --step 200: its own figures, no DNSMOS
    assert asked["why"] == "step 200, as asked" and asked["eval"] == {"eval_wer": 0.4, "eval_speaker_cosine": 0.9}


def test_the_load_is_the_last_minute_of_first_audio():
    engine = SimpleNamespace(in_flight=2, first_audio=[(0.0, 9.0), (100.0, 0.1), (110.0, 0.3), (115.0, 0.2)])
    assert load(engine, now=100.0 + LOAD_WINDOW_S) == {"in_flight": 2, "requests_last_minute": 3,
                                                        "first_audio_p50_ms": 200.0}
    assert load(engine, now=1000.0)["first_audio_p50_ms"] is None


def test_the_served_status_is_its_declared_schema(served):
    r = httpx.get(f"{served.url}/v1/status", headers=served.headers(), timeout=30)
    assert r.status_code == 200
    status = Status.model_validate(r.json())
    assert status.run.folder == served.run.name and status.run.step == 1
    assert status.run.weights == "checkpoints/step-00000001/model.safetensors"
    assert status.upload.kept and "pcm" in status.formats  # the server was given --voices DIR


def test_a_voices_reference_is_its_mel_through_the_vocoder(served):
    """Vocoded by the engine's worker; a voice without a reference, or none, is a 404 naming it."""
    url = f"{served.url}/v1/audio/voices/%s/reference"
    r = httpx.get(url % "arctic-male", headers=served.headers(), timeout=60)
    assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
    wav, sr = sf.read(io.BytesIO(r.content), dtype="float32")
    assert abs(wav.size / sr - 3.01) < 0.05 and abs(wav).max() > 1e-3  # the 3 s training cut
    for name, code in (("neutral", "no_reference"), ("nobody", "invalid_value")):
        err = httpx.get(url % name, headers=served.headers(), timeout=30)
        assert err.status_code == 404 and (err.json()["error"]["param"], err.json()["error"]["code"]) == ("name", code)


def test_the_language_picker_lists_the_models_languages_its_own_chosen():
    assert language_options(["fa", "en-us"]) == ('<option value="fa" selected>fa</option>'
                                                 '<option value="en-us">en-us</option>')
    assert 'language: $("language").value' in (STATIC / "page.js").read_text()  # sent with each request


def test_the_served_page_offers_the_models_language_and_speaks_in_it(served):
    page = httpx.get(f"{served.url}/", timeout=30).text
    assert ('<select id="language" aria-label="language"><option value="en-us" selected>en-us</option></select>'
            in page)
    r = httpx.post(f"{served.url}/v1/audio/speech", headers=served.headers(), timeout=60, json={
        "model": "myxtts", "input": "Hello there.", "voice": "neutral", "response_format": "wav", "language": "en-us"})
    assert r.status_code == 200 and sf.info(io.BytesIO(r.content)).duration > 0.1
    bad = httpx.post(f"{served.url}/v1/audio/speech", headers=served.headers(), timeout=30, json={
        "model": "myxtts", "input": "Hello there.", "voice": "neutral", "language": "fa"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "language"
    assert bad.json()["error"]["message"] == "language 'fa': this model speaks en-us only"
