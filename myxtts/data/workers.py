"""Worker processes leave stop signals to the main process.

``kill -TERM -- -PGID`` (Slurm's scancel and preemption, a terminal's Ctrl-C as SIGINT) reaches
every process of the job at once. A loader or prepare worker that died of it first would crash
the main process ("DataLoader worker ... is killed by signal") before the main process could
checkpoint or keep what it finished. So workers ignore SIGINT, and take SIGTERM only from their
parent: the main process reacts, and ends its workers itself (``Process.terminate()``, which
``Pool.terminate()`` and multiprocessing's exit clean-up use, sends SIGTERM).

How, in a worker: SIGTERM stays blocked in every thread, and one thread waits for it with
``sigtimedwait``, which says who sent it (torch's own worker handler checks the sender the same
way, in C). Workers are started inside :func:`hold_stop_signals`, so the block holds from their
first instruction, not only once their start-up (seconds, for a spawned process that imports
torch) reaches the initializer. The same thread ends the worker within a second of its parent
dying without ending it (SIGKILL, a crash); a pool worker would otherwise wait for tasks forever.
Where the platform lacks ``sigtimedwait`` (macOS), workers ignore SIGINT only.

A worker of a ``multiprocessing.Pool`` (prepare's) leaves the job's process group as it starts.
Two pending SIGTERMs merge into one, so on a machine too busy to run the watching thread
between them, the group's signal could hide the parent's, and ``Pool.terminate()`` would wait
for that worker forever. Nor may a pool worker end on its own while its parent still uses the
pool: an idle worker holds the task queue's lock while it waits for a task, and
``Pool.terminate()`` takes that lock first, so it would wait forever too. Out of the group, a
pool worker hears SIGTERM from its parent only (and from a user who names its pid).
"""
from __future__ import annotations

import contextlib
import multiprocessing.resource_tracker
import os
import signal
import threading

PARENT_POLL_S = 1.0
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
_CAN_HOLD = hasattr(signal, "pthread_sigmask")
_CAN_WAIT = _CAN_HOLD and hasattr(signal, "sigtimedwait")


@contextlib.contextmanager
def hold_stop_signals(spawn: bool = False):
    """Start workers inside this, so they hold SIGINT and SIGTERM from their first instruction
    until :func:`ignore_stop_signals` takes over.

    Both are blocked in the calling thread; the processes it starts inherit the mask (through
    fork, and through the exec of a spawn). The main process loses nothing: the kernel hands a
    signal to one of its threads that does not block it, or holds it for the calling thread
    until the block ends. ``spawn``: start multiprocessing's resource tracker first, since
    starting it unblocks both signals in the thread that starts it."""
    if not _CAN_HOLD:
        yield
        return
    if spawn:
        multiprocessing.resource_tracker.ensure_running()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def ignore_stop_signals(starting_slowly: bool = False, poll_s: float = PARENT_POLL_S,
                        own_group: bool = False) -> None:
    """In a worker process, from its initializer: ignore SIGINT; exit on a SIGTERM from the
    parent only, or when the parent is gone.

    The exit status is 0, as with torch's own handler, so the main process does not take the
    worker's end for a crash. ``own_group``: leave the process group first (a pool worker, see
    above). ``starting_slowly`` (a spawned worker that spent seconds importing torch): exit at
    once if any SIGTERM arrived meanwhile, the group's included, since it may hide the parent's;
    the worker holds no lock and has done no work yet, so leaving is safe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if own_group:  # before the check below: a group signal from now on cannot reach this process
        os.setpgid(0, 0)
    if not _CAN_WAIT:
        return
    # Threads started from here on inherit the block; those started before it (while held)
    # have it already. A SIGTERM therefore waits, pending, for the thread below.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # should a thread not block it: end, not hang
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # held since start; now dropped
    if starting_slowly and signal.SIGTERM in signal.sigpending():
        os._exit(0)
    parent = os.getppid()

    def watch():
        while True:
            info = signal.sigtimedwait({signal.SIGTERM}, poll_s)
            if (info is not None and info.si_pid == parent) or os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="myxtts-stop-signals", daemon=True).start()
