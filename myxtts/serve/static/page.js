// The page's behaviour: every call goes to this server's OpenAI speech API or its own /v1/ endpoints.
// Speaking asks for stream_format "sse": base64 pcm pieces (24 kHz, 16-bit) are played through Web
// Audio as they arrive, and the word events light each word while it is heard.
"use strict";
const $ = (id) => document.getElementById(id);
const PCM_RATE = 24000;
let key = sessionStorage.getItem("myxtts-key") || "";
let audioCtx = null;
// what the page measured, read by whoever drives it (the browser test, a person in the console)
window.myxtts = { firstAudioMs: null, spokenSeconds: 0, wordsLit: 0, done: false };

class ApiError extends Error {}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {}, key ? { Authorization: `Bearer ${key}` } : {});
  const r = await fetch(path, Object.assign({}, options, { headers }));
  if (r.status === 401) {
    $("keyform").classList.remove("hidden");
    throw new ApiError("this server needs its API key (above)");
  }
  if (!r.ok) {
    let message = `${r.status} ${r.statusText}`;
    try { message = (await r.json()).error.message; } catch (e) { /* not the API's error shape */ }
    throw new ApiError(message);
  }
  return r;
}

function showError(e) {
  $("error").textContent = e ? String(e.message || e) : "";
}

// ------------------------------------------------------------------ voices, run and load
async function loadVoices(select) {
  const { voices } = await (await api("/v1/audio/voices")).json();
  const box = $("voice");
  box.replaceChildren(...voices.map((v) => {
    const o = document.createElement("option");
    o.value = v.name;
    o.textContent = `${v.name} (${v.source}${v.reference_seconds ? `, ${v.reference_seconds} s` : ""})`;
    o.dataset.seconds = v.reference_seconds;
    return o;
  }));
  if (select) box.value = select;
  refState();
}

function refState() {
  const o = $("voice").selectedOptions[0];
  $("refplay").disabled = !o || !Number(o.dataset.seconds);
}

function row(label, value) {
  const tr = document.createElement("tr");
  for (const text of [label, value]) {
    const td = document.createElement("td");
    if (text instanceof Node) td.append(text); else td.textContent = text;
    tr.append(td);
  }
  return tr;
}

function fixed(v, digits) { return v === undefined || v === null ? "not measured" : Number(v).toFixed(digits); }

async function loadStatus() {
  const s = await (await api("/v1/status")).json();
  const run = s.run;
  $("served").textContent = `serving ${run.folder}, step ${run.step ?? "?"}`;
  const rows = [row("run", run.folder), row("weights", run.weights), row("chosen because", run.why),
    row("step", `${run.step ?? "?"}` + (run.steps_trained ? ` (trained ${run.steps_trained} steps)` : ""))];
  if (run.eval) {
    const e = run.eval;
    rows.push(row("held-out WER", e.eval_wer === undefined ? "not measured" : `${(100 * e.eval_wer).toFixed(1)} %`),
      row("speaker cosine", fixed(e.eval_speaker_cosine, 3)), row("DNSMOS overall", fixed(e.eval_dnsmos_ovrl, 2)));
  } else {
    rows.push(row("evaluation", "these weights were not evaluated while training (myxtts eval measures them)"));
  }
  if (run.report) {
    const a = document.createElement("a");
    a.href = "#";
    a.id = "report";
    a.textContent = "report.html";
    a.addEventListener("click", openReport);
    rows.push(row("report", a));
  }
  $("run").replaceChildren(...rows);
  $("format").replaceChildren(...s.formats.filter((f) => f !== "pcm").map((f) => new Option(f, f)));
  $("uplimits").textContent = `WAV, FLAC, Ogg or MP3; at most ${s.upload.max_bytes / 1048576} MiB and ` +
    `${s.upload.max_seconds} s; a few seconds of clear speech. ` +
    (s.upload.kept ? "Kept in the server's voices folder." : "Kept until the server stops (start it with --voices DIR to keep them).");
  showLoad(s.load);
}

function showLoad(l) {
  const p50 = l.first_audio_p50_ms === null ? "none in the last minute" : `${l.first_audio_p50_ms} ms p50`;
  $("load").textContent = `${l.in_flight} request(s) in flight; first audio ${p50} ` +
    `(${l.requests_last_minute} request(s) in the last minute)`;
}

async function refreshLoad() {
  if (document.body.dataset.key === "required" && !key) return;
  try { showLoad((await (await api("/v1/status")).json()).load); } catch (e) { /* shown on the next action */ }
}

async function openReport(ev) {
  ev.preventDefault();
  try {
    const html = await (await api("/v1/report")).blob();
    window.open(URL.createObjectURL(new Blob([html], { type: "text/html" })), "_blank");
  } catch (e) { showError(e); }
}

async function playReference() {
  showError(null);
  try {
    const blob = await (await api(`/v1/audio/voices/${encodeURIComponent($("voice").value)}/reference`)).blob();
    const ref = $("ref");
    ref.src = URL.createObjectURL(blob);
    ref.classList.remove("hidden");
    await ref.play();
  } catch (e) { showError(e); }
}

// ------------------------------------------------------------------ speaking
function wavBlob(pcm) {  // Int16Array at PCM_RATE → a WAV file
  const head = new DataView(new ArrayBuffer(44));
  const text = (o, s) => [...s].forEach((c, i) => head.setUint8(o + i, c.charCodeAt(0)));
  text(0, "RIFF"); head.setUint32(4, 36 + pcm.byteLength, true); text(8, "WAVEfmt ");
  head.setUint32(16, 16, true); head.setUint16(20, 1, true); head.setUint16(22, 1, true);
  head.setUint32(24, PCM_RATE, true); head.setUint32(28, PCM_RATE * 2, true);
  head.setUint16(32, 2, true); head.setUint16(34, 16, true); text(36, "data"); head.setUint32(40, pcm.byteLength, true);
  return new Blob([head, pcm], { type: "audio/wav" });
}

function body(extra) {
  return JSON.stringify(Object.assign({ model: "myxtts", input: $("text").value, voice: $("voice").value,
    speed: Number($("speed").value), language: $("language").value }, extra));
}

async function speak() {
  showError(null);
  const t0 = performance.now();
  Object.assign(window.myxtts, { firstAudioMs: null, spokenSeconds: 0, wordsLit: 0, done: false });
  audioCtx = audioCtx || new AudioContext({ sampleRate: PCM_RATE });
  await audioCtx.resume();
  $("play").disabled = true;
  $("timing").textContent = "";
  $("words").replaceChildren();
  $("out").classList.add("hidden");
  $("wav").classList.add("hidden");
  const words = [], pieces = [], schedule = [];  // schedule: {at: context time, from: audio seconds, seconds}
  let next = 0, samples = 0;
  const lit = new Set();
  const light = () => {  // the word being heard now, from where the playing piece is
    const now = audioCtx.currentTime;
    const p = schedule.find((s) => s.at <= now && now < s.at + s.seconds);
    if (p) {
      const t = p.from + (now - p.at);
      words.forEach((w, i) => {
        const on = w.start <= t && t < w.end;
        w.span.classList.toggle("now", on);
        if (t >= w.start) w.span.classList.add("said");
        if (on) lit.add(i);
      });
      window.myxtts.wordsLit = lit.size;
    }
    if (!window.myxtts.done || (schedule.length && now < next)) requestAnimationFrame(light);
    else words.forEach((w) => w.span.classList.remove("now"));
  };
  requestAnimationFrame(light);
  try {
    const r = await api("/v1/audio/speech", { method: "POST", headers: { "Content-Type": "application/json" },
      body: body({ stream_format: "sse", response_format: "pcm" }) });
    const reader = r.body.getReader(), text = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += text.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const line = buf.slice(0, cut).trim();
        buf = buf.slice(cut + 2);
        if (!line.startsWith("data: ")) continue;
        const ev = JSON.parse(line.slice(6));
        if (ev.type === "speech.word") {
          const span = document.createElement("span");
          span.textContent = ev.word;
          $("words").append(span, " ");
          words.push(Object.assign(ev, { span }));
        } else if (ev.type === "speech.audio.delta") {
          const bytes = Uint8Array.from(atob(ev.audio), (c) => c.charCodeAt(0));
          const pcm = new Int16Array(bytes.buffer, 0, bytes.length >> 1);
          if (!pcm.length) continue;
          pieces.push(pcm);
          const buffer = audioCtx.createBuffer(1, pcm.length, PCM_RATE);
          buffer.getChannelData(0).set(Float32Array.from(pcm, (v) => v / 32768));
          const src = audioCtx.createBufferSource();
          src.buffer = buffer;
          src.connect(audioCtx.destination);
          const at = Math.max(next, audioCtx.currentTime);  // late: play now, the words follow the sound
          src.start(at);
          if (window.myxtts.firstAudioMs === null) {
            window.myxtts.firstAudioMs = performance.now() - t0 + 1000 * (at - audioCtx.currentTime);
            $("timing").textContent = `first audio after ${Math.round(window.myxtts.firstAudioMs)} ms`;
          }
          schedule.push({ at, from: samples / PCM_RATE, seconds: pcm.length / PCM_RATE });
          samples += pcm.length;
          next = at + pcm.length / PCM_RATE;
        } else if (ev.type === "error") {
          throw new ApiError(ev.error.message);
        }
      }
    }
    const all = new Int16Array(samples);
    let o = 0;
    for (const p of pieces) { all.set(p, o); o += p.length; }
    const url = URL.createObjectURL(wavBlob(all));
    $("out").src = url;
    $("wav").href = url;
    $("out").classList.remove("hidden");
    $("wav").classList.remove("hidden");
    window.myxtts.spokenSeconds = samples / PCM_RATE;
    $("timing").textContent += `; ${window.myxtts.spokenSeconds.toFixed(2)} s of audio`;
  } catch (e) {
    showError(e);
  } finally {
    window.myxtts.done = true;
    $("play").disabled = false;
    refreshLoad();
  }
}

async function download() {
  showError(null);
  const fmt = $("format").value;
  try {
    const blob = await (await api("/v1/audio/speech", { method: "POST", headers: { "Content-Type": "application/json" },
      body: body({ response_format: fmt }) })).blob();
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = `myxtts.${fmt === "opus" ? "ogg" : fmt}`;
    a.click();
  } catch (e) { showError(e); }
}

// ------------------------------------------------------------------ your voice
async function upload(ev) {
  ev.preventDefault();
  showError(null);
  const name = $("upname").value.trim();
  const form = new FormData();
  form.append("name", name);
  form.append("audio_sample", $("upfile").files[0]);
  $("upstatus").textContent = "conditioning…";
  try {
    const v = await (await api("/v1/audio/voices", { method: "POST", body: form })).json();
    $("upstatus").textContent = `added ${v.name} (${v.reference_seconds} s of reference)`;
    await loadVoices(v.name);
  } catch (e) {
    $("upstatus").textContent = "";
    showError(e);
  }
}

async function start() {
  showError(null);
  if (document.body.dataset.key === "required" && !key) {  // ask first: no call is refused for want of it
    $("keyform").classList.remove("hidden");
    $("key").focus();
    return;
  }
  try {
    await Promise.all([loadVoices(), loadStatus()]);
    $("keyform").classList.add("hidden");
  } catch (e) { showError(e); }
}

$("keyform").addEventListener("submit", (ev) => {
  ev.preventDefault();
  key = $("key").value.trim();
  sessionStorage.setItem("myxtts-key", key);
  start();
});
$("voice").addEventListener("change", refState);
$("refplay").addEventListener("click", playReference);
$("speed").addEventListener("input", () => { $("speedval").textContent = Number($("speed").value).toFixed(2); });
$("play").addEventListener("click", speak);
$("download").addEventListener("click", download);
$("upload").addEventListener("submit", upload);
setInterval(refreshLoad, 5000);
start();
