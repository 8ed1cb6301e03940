"""``myxtts serve``: a trained voice behind the OpenAI speech API and Wyoming.

One :class:`~myxtts.serve.engine.Engine` turns the sentences of every request in flight into
audio through :func:`myxtts.speak.speak` (batched across requests), and streams each request
its pieces in order; the HTTP app (:mod:`myxtts.serve.openai_api`) and the Wyoming server
(:mod:`myxtts.serve.wyoming`) are two doors to it.
"""
from __future__ import annotations

from pathlib import Path


def build(checkpoint, vocoder=None, device=None, data=None, voices_dir=None, max_batch: int = 16,
          max_jobs: int = 64, log=print, step: int | None = None):
    """Load the model, its vocoder and the voices once; start the engine → (engine, voices)."""
    from myxtts.errors import UserError
    from myxtts.infer import Synthesizer
    from myxtts.rundir import default_cache
    from myxtts.serve.engine import Engine
    from myxtts.serve.voices import load_voices
    from myxtts.vocode import GRIFFIN_LIM_NOTE

    synth = Synthesizer(checkpoint, vocoder, device, log=log, step=step)
    if data is None:
        try:
            data = default_cache(checkpoint)  # the one the run recorded when training started
        except UserError:
            log("note: no --data cache given or recorded by the run: no training speakers, only "
                "--voices and neutral")
    voices = load_voices(synth.model, synth.cfg, Path(data) if data is not None else None,
                         Path(voices_dir) if voices_dir is not None else None, log)
    log(GRIFFIN_LIM_NOTE if synth.to_wave.griffin_lim else f"vocoder: {synth.to_wave.name}")
    return Engine(synth, max_batch, max_jobs, log), voices
