"""How the training step is compiled: the one function that applies compile to a step, the
``auto`` mode, a compile cache that survives the run, and compiling before the first step.

``train.compile=default`` and ``cudagraphs`` compile the whole step (forward, loss and, through
AOTAutograd, backward) once, with the batch size and the lengths as symbols rather than
constants: every bucket shape runs the same compiled graphs, so a run with 8 shapes starts about
as fast as a run with one, and ``cudagraphs`` then records one CUDA graph per shape, which costs
a step or two each, not a compile. A few places in torch would otherwise fix a dimension to the
first batch's value and compile again for every shape; ``train.symbolic`` undoes each. A
dimension of size 1 (a batch of one utterance) is still specialised by PyTorch and compiles
graphs of its own.

``train.compile=regional`` compiles only the repeated transformer blocks, also once for every
shape, and runs the rest of the step eagerly (see ``compile_blocks``).

``train.compile=auto`` (the default) means, on a CUDA GPU, inductor with CUDA graphs: an eager
step of a small TTS model launches thousands of few-microsecond kernels and leaves the GPU
waiting on the host; replaying the whole step as one graph removes that. Under DDP it means
inductor without graphs, and the run header says so. On a CPU it means eager, because inductor
compiles for minutes on a CPU and gains little there.

Compiled kernels go to ``$MYXTTS_COMPILE_CACHE``, else ``$XDG_CACHE_HOME/myxtts/compile``, else
``~/.cache/myxtts/compile`` (``train.compile_cache`` overrides both), so a resumed run or a
second run on the same shapes loads them instead of compiling again.
"""
from __future__ import annotations

import os
import time
import types
from functools import partial
from pathlib import Path

import torch

from myxtts.data.sampler import shape_plans
from myxtts.errors import UserError
from myxtts.files import atomic_write, user_cache
from myxtts.train.batches import BucketBatches
from myxtts.train.precision import sync
from myxtts.train.symbolic import keep_shapes_symbolic, lookup

# torch.compile's mode for each whole-step setting.
COMPILE_MODES = {"default": None, "cudagraphs": "reduce-overhead"}


def resolve_compile(setting: str, device: torch.device, distributed: bool,
                    host_copies: bool = False) -> tuple[str, str]:
    """``train.compile`` → the mode this machine runs, and a note for the run header.
    ``host_copies``: the step copies to the host (``train.aligner_on_host`` with the duration
    decoder), which no CUDA graph can hold."""
    if host_copies and device.type == "cuda" and setting == "cudagraphs":
        raise UserError("train.compile=cudagraphs cannot capture the copies to the host that "
                        "train.aligner_on_host makes every step; use train.compile=default")
    if setting != "auto":
        return setting, ""
    if device.type != "cuda":
        return "off", "auto: eager on the CPU"
    if distributed:
        return "default", ("auto: inductor without CUDA graphs under DDP (the gradient all-reduce "
                           "runs between the compiled pieces, outside any graph)")
    if host_copies:
        return "default", ("auto: inductor without CUDA graphs (train.aligner_on_host copies to the "
                           "host every step)")
    return "cudagraphs", "auto: inductor with CUDA graphs"


# SDPA's CUDA kernels check an attention bias's row stride for 8-element alignment; on a
# symbolic length that check is a guard, and a bucket length that is not a multiple of 8 would
# compile the step again. Bucket lengths are multiples of ``data.pad_multiple``.
ATTENTION_ALIGNMENT = 8


def check_padding(pad_multiple: int, device: torch.device, mode: str) -> None:
    """Refuse, in one line, a ``data.pad_multiple`` that would split a compiled GPU step's one
    graph by the attention bias's alignment."""
    if device.type == "cuda" and mode != "off" and pad_multiple % ATTENTION_ALIGNMENT:
        raise UserError(f"data.pad_multiple={pad_multiple}: a step compiled on a GPU needs bucket lengths "
                        f"that are multiples of {ATTENTION_ALIGNMENT} (the attention kernels' alignment; "
                        f"otherwise lengths compile apart): use a multiple of {ATTENTION_ALIGNMENT}, or "
                        "train.compile=off")


def compile_step(step, mode: str, backend: str | None = None) -> list[str]:
    """Apply ``train.compile`` (already resolved: off, default, cudagraphs or regional) to a
    training step: the one place a step is compiled. ``backend`` overrides torch.compile's
    (inductor); the tests pass aot_eager. → one line for each way this torch release keeps the
    shapes less symbolic than the newest (``train.symbolic``), also kept as
    ``step.compile_notes`` for the run header."""
    step.compile_mode, step.compile_notes = mode, []
    if mode == "off":
        return []
    device = step.precision.device
    if mode == "cudagraphs" and device.type != "cuda":
        raise UserError("train.compile=cudagraphs needs a CUDA GPU; use default or off")
    step.compile_notes = keep_shapes_symbolic(device) + keep_region_inputs()
    if mode == "regional":
        compile_blocks(step.core, backend)
        return step.compile_notes
    if mode == "cudagraphs" and not count_recordings():
        step.compile_notes.append(f"torch {torch.__version__} has no dynamo compile callbacks: CUDA "
                                  "graph recordings are not counted")
    step.compile(COMPILE_MODES[mode], backend)
    return step.compile_notes


def keep_region_inputs() -> list[str]:
    """Inductor plans a compiled graph's buffers without seeing that a compile region (a block,
    ``layers.repeated``) keeps some of its inputs for the backward, so it may give such an
    input's memory to a later kernel: on torch 2.13 the attention bias every block keeps was
    overwritten after the last layer, and the attention gradients came out wrong while the loss
    was right (benchmarks/results/2026-11-28-compile-regions-cpu.md). With buffer reuse off,
    each buffer goes back to the allocator once nothing holds it, and the allocator gives the
    memory out again. → a note for the run header where this torch lacks the setting (a private
    name, checked like ``train.symbolic``'s: the step then compiles with torch's own choice)."""
    try:
        lookup("torch._inductor.config:allow_buffer_reuse")
    except (AttributeError, ImportError):
        return [f"torch {torch.__version__} has no inductor allow_buffer_reuse: the blocks compile "
                "as regions whose saved inputs inductor may reuse"]
    lookup("torch._inductor.config").allow_buffer_reuse = False
    return []


def _counters():
    """dynamo's counters (a private name: an empty table where this torch lacks it)."""
    try:
        return lookup("torch._dynamo.utils:counters")
    except (AttributeError, ImportError):
        from collections import Counter, defaultdict
        return defaultdict(Counter)


_recordings = [0]  # CUDA graphs recorded in this process (count_recordings)


def count_recordings() -> bool:
    """Count the CUDA graphs torch records from now on, once per process, through dynamo's
    compile callbacks (a private API: False, and nothing counted, where this torch lacks it)."""
    if getattr(count_recordings, "on", False):
        return True
    try:
        handler = lookup("torch._dynamo.callback:callback_handler")
        recording = lookup("torch._dynamo.callback:CallbackTrigger").CUDAGRAPH_RECORDING
    except (AttributeError, ImportError):
        return False

    def seen(args) -> None:
        if args.callback_trigger == recording:
            _recordings[0] += 1

    handler.register_start_callback(seen)
    count_recordings.on = True
    return True


def cudagraph_counts() -> dict:
    """CUDA graphs torch skipped (the step then ran without one: it reads as launch-bound;
    ``TORCH_LOGS=cudagraphs`` says why) and recorded in this process. A shape records its
    graphs once (forward and backward); more recordings than that are re-recordings."""
    return {"cudagraph_skips": int(_counters()["inductor"]["cudagraph_skips"]),
            "cudagraph_recordings": _recordings[0] if getattr(count_recordings, "on", False) else None}


def compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process so far (one per new shape or recompile)."""
    return int(_counters()["stats"]["unique_graphs"])


def compile_blocks(model: torch.nn.Module, backend: str | None = None) -> int:
    """``train.compile=regional``: compile every transformer block of ``model`` on its own with
    dynamic shapes (batch size and lengths are symbols, not constants), so the graphs compiled
    for the first bucket shape serve all the others. Only the training step runs compiled: in eval
    mode (validation, samples, generation with its KV cache growing every step) a block runs
    eagerly, as those passes are rare and would each bring shapes of their own. A dimension of
    size 1 (a bucket of one utterance) is specialised by PyTorch and compiles graphs of its own.
    Returns how many blocks were compiled."""
    from myxtts.models.layers import CrossBlock, DecoderBlock, EncoderBlock

    blocks = [m for m in model.modules() if isinstance(m, (EncoderBlock, CrossBlock, DecoderBlock))]
    # One compiled function per block class, taking the block as an argument: dynamo treats
    # the block's weights as graph inputs, so every layer of a stack shares one graph.
    compiled = {cls: torch.compile(cls.forward, dynamic=True, **({"backend": backend} if backend else {}))
                for cls in {type(b) for b in blocks}}
    for block in blocks:
        # A bound method, not a closure over the block: a deep copy of the model then runs
        # its own weights.
        block.forward = types.MethodType(partial(_regional_forward, compiled=compiled[type(block)]), block)
    return len(blocks)


def _regional_forward(self, *args, compiled, **kw):
    return compiled(self, *args, **kw) if self.training else type(self).forward(self, *args, **kw)


def cache_dir(setting: str = "") -> Path:
    if setting:
        return Path(setting).expanduser()
    if os.environ.get("MYXTTS_COMPILE_CACHE"):
        return Path(os.environ["MYXTTS_COMPILE_CACHE"]).expanduser()
    return user_cache("myxtts", "compile")


def use_cache(setting: str = "") -> Path:
    """Point inductor's (and Triton's) caches at the durable folder, unless the user chose one
    through torch's own variables. Call before anything compiles.

    Torch writes its default folder (under /tmp) into ``TORCHINDUCTOR_CACHE_DIR`` the first time
    anything asks for it (``torch.use_deterministic_algorithms`` does), so a value equal to that
    default was chosen by nobody and is replaced; ``train.compile_cache`` replaces any value."""
    path = cache_dir(setting)
    path.mkdir(parents=True, exist_ok=True)
    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if setting or chosen is None or os.path.abspath(chosen) == os.path.abspath(_torch_default_cache()):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path / "inductor")
    if setting or "TRITON_CACHE_DIR" not in os.environ:
        os.environ["TRITON_CACHE_DIR"] = str(path / "triton")
    return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


def _torch_default_cache() -> str:
    """The folder inductor writes to when nobody chose one (a private name; where this torch
    lacks it, the rule of torch 2.11 to 2.14: the temp folder's torchinductor_USER)."""
    try:
        return lookup("torch._inductor.runtime.cache_dir_utils:default_cache_dir")()
    except (AttributeError, ImportError):
        import getpass
        import tempfile
        return os.path.join(tempfile.gettempdir(), "torchinductor_" + getpass.getuser().replace(os.sep, "_"))


def save_artifacts(path: Path) -> int | None:
    """Write every compiled artifact this process made (inductor's kernels, AOTAutograd's
    graphs) to ``path`` as one file, so a process on a machine with an empty compile cache (a
    new cloud machine, a resumed run elsewhere) loads them instead of compiling again. → bytes
    written; None where this torch has no portable cache (``torch.compiler.save_cache_artifacts``,
    torch 2.7 and newer) or nothing was compiled."""
    save = getattr(torch.compiler, "save_cache_artifacts", None)
    saved = save() if save is not None else None
    if not saved or not saved[0]:
        return None
    with atomic_write(path) as tmp:  # a resume never reads half a file
        tmp.write_bytes(saved[0])
    return len(saved[0])


def load_artifacts(path: Path) -> str | None:
    """Load the artifacts ``save_artifacts`` wrote into this process's compile caches, before
    anything compiles. → None when none were loaded (no file, a torch without the portable
    cache), else a line for the run header."""
    load = getattr(torch.compiler, "load_cache_artifacts", None)
    if load is None or not path.is_file():
        return None
    try:
        info = load(path.read_bytes())
    except Exception as e:  # noqa: BLE001 - another torch's or a damaged file: compile as if none
        info, why = None, f"{type(e).__name__}: {e}"
    else:
        why = "torch read nothing from it: another torch's, or damaged"
    if info is None:
        return f"compiled kernels in {path} not loaded ({why}); compiling anew"
    return f"compiled kernels loaded from {path} ({path.stat().st_size / 2**20:.1f} MiB)"


# dynamo's timers for the phases of a compile, as torch 2.13 names them: ``all`` is the whole
# compile, and within it tracing, AOTAutograd's two passes, inductor's forward and backward
# (the backward outside ``all`` where AOTAutograd lowers it at the first backward) and,
# inside those, the wait for the C++ or Triton compilers it started (timed only where it
# compiles in more than one worker).
COMPILE_PHASES = {"all": "_compile.compile_inner", "dynamo": "bytecode_tracing",
                  "aot_metadata": "aot_collect_metadata", "aot_joint_graph": "aot_trace_joint_graph",
                  "inductor_forward": "compile_fx.<locals>.fw_compiler_base",
                  "inductor_backward": "compile_fx.<locals>.bw_compiler", "compilers_wait": "async_compile.wait"}


def _phase_seconds() -> dict[str, float]:
    """Seconds of each of ``COMPILE_PHASES`` in this process so far (a private table: none where
    this torch lacks it; a phase it does not time is left out)."""
    try:
        timed = lookup("torch._dynamo.utils:compilation_time_metrics")
    except (AttributeError, ImportError):
        return {}
    return {name: sum(timed[key]) for name, key in COMPILE_PHASES.items() if key in timed}


def _compile_counts() -> tuple[int, int, int]:
    """(graphs compiled, compiled-graph cache hits, misses) in this process so far."""
    c = _counters()["inductor"]
    return compiled_graphs(), int(c["fxgraph_cache_hit"]), int(c["fxgraph_cache_miss"])


class CompileTally:
    """What a stretch of compiling did, counted from its construction: ``read()`` gives the
    graphs compiled, the compile cache's hits and misses, the seconds of each compile phase
    (``phases_s``, ``COMPILE_PHASES``; ``torch._dynamo.reset()`` clears those timers, so a
    stretch across one reads no phases worth having) and the seconds since."""

    def __init__(self):
        self._counts, self._phases, self._t = _compile_counts(), _phase_seconds(), time.perf_counter()

    def read(self) -> dict:
        graphs, hits, misses = (a - b for a, b in zip(_compile_counts(), self._counts))
        phases = {k: round(v - self._phases.get(k, 0.0), 1) for k, v in _phase_seconds().items()}
        return {"graphs_compiled": graphs, "compile_cache_hits": hits, "compile_cache_misses": misses,
                "phases_s": phases, "seconds": time.perf_counter() - self._t}


def compile_shapes(run, progress=None, batches=None) -> list[float]:
    """Compile the step for every bucket shape before training: forward, loss and backward of a
    batch of each shape (``batches``, device tensors; one per bucket of the run's sampler when
    not given), with the gradients dropped and the random state put back, so the run trains
    exactly as it would have without this (exact resume included). ``progress(k, n,
    elapsed_s)`` is called after each shape. Returns the seconds each shape took (none when
    eager)."""
    if run.step_fn.compile_mode == "off":
        return []
    if batches is None:
        bb = BucketBatches(run.cache, run.cfg, run.device)
        batches = [bb.device_batch(plan).tensors for plan in shape_plans(run.sampler)]
    devices = [run.device] if run.device.type == "cuda" else []
    seconds: list[float] = []
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=devices):
        for batch in batches:
            t = time.perf_counter()
            run.step_fn.compile_shape(batch)
            sync(run.device)
            seconds.append(time.perf_counter() - t)
            if progress is not None:
                progress(len(seconds), len(batches), time.perf_counter() - t0)
    return seconds
