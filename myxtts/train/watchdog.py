"""The stall watchdog under torchrun: a rank that stops arriving is named within
``train.stall_timeout_s`` by every rank still able to say so, instead of the group waiting out
its 30-minute collective timeout and ending with an error that names no rank.

Each rank keeps where it is, its step and its phase (``PHASES``), in memory: setting it costs the
training loop no I/O. A thread of its own publishes that record, with a beat counter, to the
group's key-value store every ``interval`` seconds, and reads every other rank's. Clocks are
never compared across hosts: each rank times when it saw another rank's record change.

The group has stalled when no rank has moved on for ``stall_timeout_s``. The ranks missing are
those behind the furthest one (a dead loader, a stuck read, a full disk on rank 0 while the
others wait at the barrier) and those whose beat stopped (the process is gone or frozen). Then
every rank prints one block, the missing ranks with their last step and phase and its own main
thread's stack, and one line, and leaves with ``EXIT_STALLED``: through ``os._exit`` from the
thread, because the main thread may sit inside a collective that would not return for 30
minutes. When every rank is at the same place and beating, none is missing, and the watchdog
does not end the run (a long validation on every rank is work, not a stall).

The count starts once this process has completed its first step: that step may compile for
minutes. The store is the one the group joined through, under this attempt's keys
(``distributed.setup``); its client is safe to call from a second thread.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback

# 69 is EX_UNAVAILABLE (sysexits.h): a rank the run needs stopped arriving. Running the same
# command again resumes from the last checkpoint; torchrun --max-restarts does so by itself.
EXIT_STALLED = 69

# Where a rank can be within a step, in the order a step passes them: loading and step carry the
# step in progress, the rest the step just completed. Work one rank does alone (samples,
# evaluation, writing the checkpoint, the summary) has a phase after it that the others wait in,
# so the rank still at it is the one behind. "done": left the group after the run.
PHASES = ("loading", "step", "validation", "samples", "evaluation", "checkpoint", "saved", "summary",
          "leaving")
DONE = "done"


class Watch:
    """What the loop talks to: no watch at all (one process, or ``train.stall_timeout_s=0``)."""

    def phase(self, name: str, step: int) -> None:
        """This rank is now in phase ``name`` of step ``step``."""

    def stop(self, finished: bool = False) -> None:
        """Stop watching; ``finished``: this rank left the group after the run, never missing."""


def _position(step: int, phase: str) -> tuple[int, int]:
    return step, PHASES.index(phase)


class Watchdog(Watch):
    def __init__(self, store, rank: int, world_size: int, timeout_s: float, where: str = ""):
        self.store, self.rank, self.world = store, rank, world_size
        self.timeout_s = timeout_s
        self.interval = min(max(timeout_s / 10, 0.2), 5.0)
        self.where = where  # the store's address, for a store that stopped answering
        self._at = (0, "loading")  # (step, phase), replaced whole: read by the thread without a lock
        self._moves = self._beats = 0
        self._stepped = self._armed = False
        self._seen: dict[int, tuple[int, int, int, str]] = {}  # rank -> (beat, moves, step, phase)
        self._moved_at: dict[int, float] = {}
        self._beat_at: dict[int, float] = {}
        self._store_error = ""
        self._stop = threading.Event()
        self._main = threading.main_thread()
        self._publish()
        self._thread = threading.Thread(target=self._run, name="myxtts-stall-watchdog", daemon=True)
        self._thread.start()

    def phase(self, name: str, step: int) -> None:
        self._at = (step, name)
        self._moves += 1
        if self._stepped:
            self._armed = True  # a phase after this process's first step: that step is done
        self._stepped = self._stepped or name == "step"

    def stop(self, finished: bool = False) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=2 * self.interval + 5)
        if finished:
            self._at = (self._at[0], DONE)
            self._publish()

    # ------------------------------------------------------------------------ the thread
    def _publish(self) -> None:
        step, phase = self._at
        self._beats += 1
        self.store.set(f"r{self.rank}", f"{self._beats} {self._moves} {step} {phase}")

    def _read(self, now: float) -> None:
        for r in range(self.world):
            key = f"r{r}"
            if r == self.rank or not self.store.check([key]):
                continue
            beat, moves, step, phase = self.store.get(key).decode().split()
            rec = (int(beat), int(moves), int(step), phase)
            old = self._seen.get(r)
            if old is None or old[1] != rec[1]:
                self._moved_at[r] = now
            if old is None or old[0] != rec[0]:
                self._beat_at[r] = now
            self._seen[r] = rec

    def _run(self) -> None:
        last_moves = -1
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            try:
                self._publish()
                self._read(now)
                self._store_error = ""
            except Exception as e:  # noqa: BLE001 - a store gone is itself what to report
                self._store_error = f"{type(e).__name__}: {e}".splitlines()[0]
            if self._moves != last_moves or not self._armed:
                last_moves, self._moved_at[self.rank] = self._moves, now
            if not self._armed:  # nothing before this process's first step counts
                self._moved_at = dict.fromkeys(self._moved_at, now)
                self._beat_at = dict.fromkeys(self._beat_at, now)
                continue
            missing = self._missing(now)
            if missing:
                self._end(missing, now)

    def _missing(self, now: float) -> list[int]:
        """The ranks the group waits for, once no rank has moved on for the timeout; else []."""
        if now - max(self._moved_at.values()) < self.timeout_s:
            return []
        at = {r: (rec[2], rec[3]) for r, rec in self._seen.items()}
        at[self.rank] = self._at
        at = {r: a for r, a in at.items() if a[1] != DONE}  # gone after the run: waits for nobody
        furthest = max(_position(*a) for a in at.values())
        gone = [r for r in range(self.world) if r not in at and r not in self._seen]  # never heard of
        behind = [r for r, a in at.items() if _position(*a) < furthest]
        silent = [r for r in self._seen if self._seen[r][3] != DONE and now - self._beat_at[r] >= self.timeout_s]
        return sorted(set(gone + behind + silent))

    def _end(self, missing: list[int], now: float) -> None:
        """Say who is missing and where this rank is, then leave: the main thread may be
        blocked in a collective and cannot be asked to."""
        step, phase = self._at
        lines = [f"[rank {self.rank}] stalled: no rank has moved on for {self.timeout_s:g} s "
                 f"(train.stall_timeout_s); this rank is at step {step} ({phase})"]
        for r in missing:
            lines.append(f"  {self._describe(r, now)}")
        if self._store_error:
            lines.append(f"  the group's store {self.where} did not answer: {self._store_error}")
        frame = sys._current_frames().get(self._main.ident)
        lines.append(f"  rank {self.rank}'s main thread, where it waits:")
        lines += ["    " + s.rstrip().replace("\n", "\n    ") for s in traceback.format_stack(frame)] if frame else []
        who = ", ".join(f"rank {r}" for r in missing)
        lines.append(f"myxtts train: error: {who} stopped arriving for {self.timeout_s:g} s; rank {self.rank} "
                     f"ends with exit {EXIT_STALLED} (run the same command to resume from the last checkpoint)")
        sys.stdout.flush()
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()
        self._wait_for_the_others()
        os._exit(EXIT_STALLED)

    def _wait_for_the_others(self) -> None:
        """Leave once every other rank still beating has said its own (a few intervals at most):
        the first rank to leave breaks the others' collectives, which would then end them with
        the collective's error instead of their account."""
        deadline = time.monotonic() + 3 * self.interval + 2
        try:
            self.store.set(f"said{self.rank}", "1")
            now = time.monotonic()
            live = [r for r, rec in self._seen.items() if rec[3] != DONE and now - self._beat_at[r] < self.timeout_s]
            while time.monotonic() < deadline and not all(self.store.check([f"said{r}"]) for r in live):
                time.sleep(0.1)
        except Exception:  # noqa: BLE001 - a store gone: nobody left to wait for
            return

    def _describe(self, r: int, now: float) -> str:
        if r == self.rank:
            step, phase = self._at
            return f"rank {r} (this one): last at step {step} ({phase})"
        if r not in self._seen:
            return f"rank {r}: never heard from since this rank started"
        beat, _, step, phase = self._seen[r]
        quiet = now - self._beat_at[r]
        alive = (f"its process stopped beating {quiet:.0f} s ago (gone or frozen)" if quiet >= self.timeout_s
                 else "its process is alive")
        return f"rank {r}: last at step {step} ({phase}), not moved on for {now - self._moved_at[r]:.0f} s; {alive}"


def start(info, timeout_s: float) -> Watch:
    """The watchdog of this rank (``info``: ``distributed.DistInfo``), or no watch for one
    process or ``timeout_s`` 0."""
    if not info.enabled or not timeout_s:
        return Watch()
    import torch.distributed as dist

    where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
    return Watchdog(dist.PrefixStore("watchdog/", info.store), info.rank, info.world_size, timeout_s, where)
