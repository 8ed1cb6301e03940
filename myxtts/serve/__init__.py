"""``myxtts serve``: a trained voice behind the OpenAI speech API and Wyoming.

One :class:`~myxtts.serve.engine.Engine` turns the sentences of every request in flight into
audio through the loaded run's :meth:`~myxtts.infer.Synthesizer.speak_ids` (batched across
requests), and streams each request its pieces in order; the HTTP app
(:mod:`myxtts.serve.openai_api`) and the Wyoming server (:mod:`myxtts.serve.wyoming`) are two doors to it.
"""
from __future__ import annotations


def build(checkpoint, vocoder=None, device=None, data=None, voices_dir=None, max_batch: int = 16,
          max_jobs: int = 64, log=print, step: int | None = None):
    """Load the run, its vocoder and its voices once (:meth:`myxtts.infer.Synthesizer.voices`:
    ``data`` defaults to the cache the run recorded); start the engine → (engine, voices)."""
    from myxtts.infer import Synthesizer
    from myxtts.serve.engine import Engine
    from myxtts.serve.voices import load_voices
    from myxtts.vocode import GRIFFIN_LIM_NOTE

    synth = Synthesizer(checkpoint, vocoder, device, log=log, step=step)
    voices = load_voices(synth, data, voices_dir)
    log(GRIFFIN_LIM_NOTE if synth.to_wave.griffin_lim else f"vocoder: {synth.to_wave.name}")
    return Engine(synth, max_batch, max_jobs, log), voices
