"""The page at ``/`` in a real headless Chromium (the system's, driven by Playwright), as a new
user uses it: give the API key it asks for, see the voices, speak a typed sentence and hear it
while the words light up, then add a voice from the ARCTIC clip and hear that one.

Set ``MYXTTS_PAGE_OUT=DIR`` to keep the page's screenshot (``page.png``: the README's) and its
own timings (``page-timing.json``: first audio after pressing play) in DIR."""
from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import httpx
import pytest
import soundfile as sf

from myxtts.observe.measured import Measured
from myxtts.observe.report import write_report
from tests.serve.conftest import API_KEY, VOICES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed")
# a headless browser that reaches nothing but the server: no updates, sync or first-run pages
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
SENTENCE = "The quick brown fox jumps over the lazy dog. Then it sleeps."

# the audio element's file, decoded by the browser: its length and its loudest sample
DECODED = """async () => {
  const data = await (await fetch(document.querySelector('#out').src)).arrayBuffer();
  const buf = await new OfflineAudioContext(1, 1, 24000).decodeAudioData(data);
  return {seconds: buf.duration, peak: buf.getChannelData(0).reduce((m, v) => Math.max(m, Math.abs(v)), 0)};
}"""


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright  # the dev extra's; the browser is the system's

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def speak(page) -> dict:
    """Press play, wait until the answer has arrived and been heard; → the page's own timings."""
    page.click("#play")
    page.wait_for_function("window.myxtts.done", timeout=60_000)
    assert page.text_content("#error") == ""
    page.wait_for_function("window.myxtts.wordsLit > 0", timeout=20_000)  # played in real time
    return page.evaluate("({...window.myxtts})")


def wav_seconds(served, voice: str) -> float:
    r = httpx.post(f"{served.url}/v1/audio/speech", headers=served.headers(), timeout=60,
                   json={"model": "myxtts", "input": SENTENCE, "voice": voice, "response_format": "wav"})
    return sf.info(io.BytesIO(r.content)).duration


def test_a_new_user_speaks_a_sentence_and_their_own_voice(served, browser):
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    problems = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    # the run's report, as training leaves it: the page links it
    write_report(served.run / "report.html", Measured(), title=f"MyXTTS report: {served.run}")
    page.goto(served.url)
    # the server was started with an API key: the page asks for it before calling anything
    page.wait_for_selector("#keyform:not(.hidden)")
    page.fill("#key", API_KEY)
    page.click("#keyform button")
    page.wait_for_function("document.querySelectorAll('#voice option').length >= 3")
    listed = page.eval_on_selector_all("#voice option", "os => os.map(o => o.value)")
    assert {"speaker", "arctic-male", "neutral"} <= set(listed)
    # the voices and the run's status arrive by separate requests, in either order
    page.wait_for_function("document.querySelector('#run').textContent.includes('newest checkpoint')")
    assert "in flight" in page.text_content("#load")
    with page.expect_popup() as opened:
        page.click("#report")
    report = opened.value
    report.wait_for_load_state()
    assert report.title() == f"MyXTTS report: {served.run}"
    report.close()

    page.select_option("#voice", "arctic-male")
    page.click("#refplay")  # its reference, as the model hears it: the 3 s training cut
    page.wait_for_function("document.querySelector('#ref').duration > 0", timeout=30_000)
    assert abs(page.eval_on_selector("#ref", "a => a.duration") - 3.01) < 0.05
    page.fill("#text", SENTENCE)
    timings = [speak(page)]
    got = page.evaluate(DECODED)
    assert abs(got["seconds"] - wav_seconds(served, "arctic-male")) < 0.05, got  # all of it, at 24 kHz
    assert got["peak"] > 1e-3
    assert page.eval_on_selector_all("#words span", "s => s.length") == 12  # "the quick ... sleeps"
    page.select_option("#format", "flac")
    with page.expect_download() as saved:
        page.click("#download")
    wav, sr = sf.read(saved.value.path(), dtype="float32")
    assert saved.value.suggested_filename == "myxtts.flac" and abs(wav.size / sr - got["seconds"]) < 0.05

    page.set_input_files("#upfile", str(VOICES / "arctic_a0009_slt_female.wav"))
    page.fill("#upname", "from-the-page")
    page.click("#upload button")
    page.wait_for_function("document.querySelector('#voice').value === 'from-the-page'", timeout=60_000)
    assert "added from-the-page" in page.text_content("#upstatus")
    timings.append(speak(page))
    got = page.evaluate(DECODED)
    assert abs(got["seconds"] - wav_seconds(served, "from-the-page")) < 0.05 and got["peak"] > 1e-3, got
    assert (served.voices / "from-the-page").is_dir()
    assert problems == []

    out = os.environ.get("MYXTTS_PAGE_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(out) / "page.png"), full_page=True)
        (Path(out) / "page-timing.json").write_text(json.dumps(
            [{k: t[k] for k in ("firstAudioMs", "spokenSeconds", "wordsLit")} for t in timings], indent=1))
    page.close()
