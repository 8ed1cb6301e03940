"""A run → a Piper voice: ``NAME.onnx`` and ``NAME.onnx.json`` (``myxtts export --format piper``).

What goes in: the weights :meth:`myxtts.rundir.RunDir.choose_weights` picks (the lowest
held-out WER of the periodic evaluation where it ran), the run's own trained vocoder (a run
without one is refused: Griffin-Lim has no place in a graph), and the voices the loaded run
lists for ``myxtts serve`` too (:meth:`myxtts.infer.Synthesizer.voices`): every speaker of the
cache the run trained on (``--data``, else the one it recorded), each from its first utterance,
each ``--voice NAME=FOLDER`` from all the clips of its folder, and the neutral voice last.

The voice file names the espeak-ng voice of the model's own language
(:attr:`myxtts.infer.Synthesizer.languages`, the first), so Piper's runtime phonemises in it.
After writing, the graph is run in onnxruntime on a sentence of that language at three paces and compared with
:meth:`myxtts.infer.Synthesizer.synthesize` on the same text, voice and pace; the figures are
printed and returned.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from myxtts import speak, vocode
from myxtts.errors import UserError
from myxtts.export import voice_json
from myxtts.export.graph import PiperGraph
from myxtts.export.istft import ExportableVocoder
from myxtts.export.phonemes import PhonemeMap, build, coverage
from myxtts.files import atomic_write
from myxtts.infer import Synthesizer
from myxtts.rundir import RunDir
from myxtts.voice import CLIP_SUFFIXES, NEUTRAL, Voice, clips, from_folder

OPSET = 17
INPUTS = ["input", "input_lengths", "scales"]  # + "sid" for several speakers
OUTPUTS = ["output", "durations", "mel"]
CHECK_SENTENCE = "This is how the exported voice sounds."
# the check sentence in the languages with one of their own (by family); others say the English one
CHECK_SENTENCES = {"en": CHECK_SENTENCE, "fa": "این صدای خروجی است."}
INSTALL_HINT = "pip install 'myxtts[export]'"
PACES = (0.8, 1.0, 1.25)  # length scales the export is checked at: slower, as trained, faster


@dataclass
class Exported:
    onnx: Path
    config: Path
    voices: list[Voice]
    weights: Path
    why: str
    coverage: str  # the coverage line, or why it was not measured
    mel_mae: float  # ONNX against PyTorch on the check sentence, first voice, the worst of PACES
    wav_max_diff: float


def parse_voice(arg: str) -> tuple[str, Path]:
    """``NAME=FOLDER`` → (name, folder), checked: the folder holds sound files."""
    name, sep, folder = arg.partition("=")
    if not sep or not folder:
        raise UserError(f"--voice {arg}: give NAME=FOLDER (a folder of reference clips)")
    name, path = voice_json.check_name(name), Path(folder)
    if not path.is_dir():
        raise UserError(f"--voice {name}={folder}: no such folder")
    if not clips(path):
        raise UserError(f"--voice {name}={folder}: the folder holds no sound files "
                        f"({', '.join(CLIP_SUFFIXES)})")
    return name, path


def folder_voice(name: str, folder: Path, cfg, say) -> Voice:
    v = from_folder(name, folder, cfg, say, source=str(folder))
    if v is None:
        raise UserError(f"--voice {name}={folder}: no clip of the folder can be used (said above)")
    return v


def load_run(checkpoint, vocoder, step: int | None, say) -> Synthesizer:
    """The run loaded as every command loads it, on the CPU, checked for what a Piper voice needs."""
    held: list[str] = []  # what loading says waits for the checks: a refused run is one line
    synth = Synthesizer(checkpoint, vocoder, "cpu", log=held.append, step=step)
    cfg, weights, to_wave = synth.cfg, synth.weights, synth.to_wave
    if cfg.model.decoder != "duration":
        raise UserError(f"{weights}: a Piper voice needs the duration decoder (model.decoder=duration); "
                        f"this run uses the {cfg.model.decoder} one")
    if cfg.text.mode != "phonemes":
        raise UserError(f"{weights}: a Piper voice reads espeak-ng phonemes; this run was trained on "
                        f"text.mode={cfg.text.mode}")
    if to_wave.griffin_lim:
        raise UserError("the run has no trained vocoder, and a Piper voice carries one: train it with "
                        "`myxtts train --stage vocoder --data CACHE --out RUN/vocoder`, or name one with --vocoder")
    for line in held:
        say(line)
    synth.log = say
    return synth


def build_graph(model, cfg, to_wave, latents: torch.Tensor, pmap: PhonemeMap,
                language: int | None = None) -> PiperGraph:
    """``language``: the row of the model's language table the voice speaks (a Piper voice
    speaks one language, the one its file names), None for a model of one language."""
    a = cfg.audio
    vocoder = ExportableVocoder(to_wave.vocoder, a.n_fft, a.hop_length).eval()
    return PiperGraph(model, vocoder, latents, pmap.table(), vocode.min_frames(a),
                      a.hop_length, language).eval()


def write_onnx(graph: PiperGraph, path: Path, speakers: int) -> None:
    ids = torch.tensor([[1, 0, 3, 0, 4, 0, 2]])  # a dummy sentence: its shape is not kept
    args = [ids, torch.tensor([ids.shape[1]]), torch.tensor([0.667, 1.0, 0.8])]
    names, axes = list(INPUTS), {"input": {0: "batch", 1: "phonemes"}, "input_lengths": {0: "batch"},
                                 "output": {0: "batch", 2: "time"}, "durations": {0: "batch", 1: "phonemes"},
                                 "mel": {0: "batch", 1: "frames"}}
    if speakers > 1:
        args.append(torch.tensor([0]))
        names.append("sid")
        axes["sid"] = {0: "batch"}
    with atomic_write(path) as tmp, warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the tracer's notes on shape arithmetic it records as such
        torch.onnx.export(graph, tuple(args), str(tmp), input_names=names, output_names=OUTPUTS,
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False)


def session(path: Path):
    try:
        import onnxruntime
    except ImportError:
        raise UserError(f"checking the exported voice needs onnxruntime: {INSTALL_HINT}") from None
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = torch.get_num_threads()
    return onnxruntime.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def run_onnx(sess, ids: list[int], sid: int | None = None, length_scale: float = 1.0):
    """One sentence of Piper ids through the graph → (wav (S,), durations (N,), mel (T, M))."""
    feed = {"input": np.array([ids], dtype=np.int64), "input_lengths": np.array([len(ids)], dtype=np.int64),
            "scales": np.array([0.667, length_scale, 0.8], dtype=np.float32)}
    if sid is not None:
        feed["sid"] = np.array([sid], dtype=np.int64)
    wav, durations, mel = sess.run(OUTPUTS, feed)
    return wav[0, 0], durations[0], mel[0]


def parity(sess, synth: Synthesizer, pmap: PhonemeMap, voice: Voice, multi: bool,
           sentence: str | None = None) -> tuple[float, float]:
    """ONNX at each of ``PACES`` against ``synthesize`` at the same pace (``speed`` =
    1 / ``length_scale``) on ``sentence`` in ``voice`` → the worst (mel mean absolute error,
    largest audio difference); frames that differ are an error. By default the sentence is in the
    model's own language (``CHECK_SENTENCES``)."""
    if sentence is None:
        sentence = CHECK_SENTENCES.get(synth.language().partition("-")[0], CHECK_SENTENCE)
    ids = pmap.ids_of_tokens(synth.encode(sentence))
    worst = (0.0, 0.0)
    for scale in PACES:
        (spoken,) = synth.synthesize([sentence], voice, speed=1.0 / scale)
        wav, _, mel = run_onnx(sess, ids, 0 if multi else None, length_scale=scale)
        if mel.shape != tuple(spoken.mel.shape):
            raise RuntimeError(f"at length_scale {scale:g} the exported graph made {mel.shape[0]} frames "
                               f"where PyTorch made {spoken.mel.shape[0]}")
        worst = (max(worst[0], float(np.abs(mel - spoken.mel.numpy()).mean())),
                 max(worst[1], float(np.abs(wav - np.clip(spoken.wav, -1, 1)).max())))
    return worst


def export(checkpoint, out, data=None, voices: list[str] = (), vocoder=None, step: int | None = None,
           say=print) -> Exported:
    """Write ``out`` (``NAME.onnx``) and ``out.json``; see the module's docstring."""
    out = Path(out)
    if out.suffix != ".onnx":
        raise UserError(f"--out {out}: a Piper voice is a NAME.onnx file")
    asked = [parse_voice(v) for v in voices]  # before any work: a bad folder is one line at once
    synth = load_run(checkpoint, vocoder, step, say)
    model, cfg, text, to_wave = synth.model, synth.cfg, synth.text, synth.to_wave
    symbols = text.vocab.symbols
    say(f"vocoder: {to_wave.name}")
    cache = synth.cache(data, required=False)
    if cache is not None and cache.vocab != text.vocab:
        raise UserError(f"--data {cache.path}: not the cache this run trained on (another vocabulary)")
    listed = synth.voices(cache)  # as serve lists them
    chosen = [dataclasses.replace(v, name=voice_json.check_name(v.name), source=f"{cache.path}, {v.source}")
              for v in listed if v.name != NEUTRAL]
    chosen += [folder_voice(name, folder, cfg, say) for name, folder in asked] + listed[-1:]
    names = [v.name for v in chosen]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"voice name {dup[0]!r} is given twice; each voice needs a name of its own")
    pmap = build(symbols)
    latents = torch.stack([speak.with_latents(model, v.reference).latents for v in chosen])  # (S, K, d)
    graph = build_graph(model, cfg, to_wave, latents, pmap, synth.language_row())
    write_onnx(graph, out, len(chosen))
    config_path = out.with_name(out.name + ".json")
    weights, why = synth.weights, synth.why
    source = {"weights": str(weights), "step": synth.meta["step"], "chosen_because": why}
    voice_json.write(config_path, voice_json.voice_config(
        sample_rate=cfg.audio.sample_rate, hop_length=cfg.audio.hop_length, espeak_voice=synth.language(),
        phoneme_id_map=pmap.piper_json(), num_symbols=pmap.num_symbols, speakers=names,
        dataset=(RunDir.of(weights) or RunDir(weights.parent)).path.name, source=source))
    for i, v in enumerate(chosen):
        say(f"voice {i if len(chosen) > 1 else '-'}: {v.name} ({v.source})")
    if cache is not None:
        held_out = [cache.index.text[int(i)] for i in cache.indices("val")]
        line = coverage(pmap, held_out, text).line() + f" over {len(held_out)} held-out sentence(s)" \
            if held_out else "phoneme map coverage: not measured (the cache holds no held-out sentences)"
    else:
        line = "phoneme map coverage: not measured (give --data CACHE to measure it on its held-out sentences)"
    say(line)
    mae, diff = parity(session(out), synth, pmap, chosen[0], len(chosen) > 1)
    paces = ", ".join(f"{p:g}" for p in PACES)
    say(f"checked in onnxruntime against PyTorch at length_scale {paces}: mel mean abs diff {mae:.2e}, "
        f"audio max diff {diff:.2e}")
    if not math.isfinite(mae):
        raise RuntimeError("the exported graph gives no finite mel")
    return Exported(out, config_path, chosen, weights, why, line, mae, diff)
