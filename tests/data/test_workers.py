"""Stop signals to the whole process group (scancel, preemption, Ctrl-C) reach the main
process only: loader and prepare workers ignore them, the main process decides, and workers
still end with it, however it ends."""
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.loader import make_loader
from myxtts.data.prepare import prepare
from myxtts.data.workers import hold_stop_signals, ignore_stop_signals

from .test_dataset import multi_speaker_cache

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

ROOT = Path(__file__).resolve().parents[2]
LJ = ROOT / "tests" / "fixtures" / "ljspeech"
ENV = dict(os.environ, PYTHONPATH=str(ROOT))

# A training-like main process: SIGTERM sets a flag, the loop goes on until it sees it.
TRAINER = """
import signal, sys
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.loader import make_loader
stop = []
signal.signal(signal.SIGTERM, lambda s, f: stop.append(s))
cfg = load(None, ["data.pad_multiple=16", "data.frame_budget=1800"])
loader = make_loader(Cache(sys.argv[1]), cfg, num_workers=1)
loader.sampler.infinite = True
it = iter(loader)
next(it)
print("ready", flush=True)
if sys.argv[2] == "sleep":
    signal.pause()
while not stop:
    next(it)
more = sum(int(next(it).tensors["mel_lens"].sum() > 0) for _ in range(20))
print(f"the main process stopped itself; {more} batches read after the signal", flush=True)
"""


def _proc_stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # state, ppid, pgrp, ...


def _alive(pid: int) -> bool:
    st = _proc_stat(pid)
    return st is not None and st[0] != "Z"


def _live(where: int, field: int) -> list[int]:
    """Live processes whose ppid (field 1) or process group (field 2) is ``where``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _proc_stat(int(d.name))
            if st is not None and st[0] != "Z" and int(st[field]) == where:
                out.append(int(d.name))
    return out


def _wait_until_gone(pids, timeout: float) -> list[int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _kill_group(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return multi_speaker_cache(tmp_path_factory)


def test_a_loader_worker_ignores_stop_signals_and_keeps_building(cache_dir):
    cfg = load(None, ["data.pad_multiple=16", "data.frame_budget=1800", "data.prefetch_factor=2"])
    before = {p.pid for p in mp.active_children()}
    loader = make_loader(Cache(cache_dir), cfg, num_workers=1)
    loader.sampler.infinite = True
    it = iter(loader)
    next(it)
    workers = [p.pid for p in mp.active_children() if p.pid not in before]
    assert len(workers) == 1
    for sig in ("TERM", "INT"):  # from another process: a worker obeys only its parent's SIGTERM
        subprocess.run(["kill", f"-{sig}", str(workers[0])], check=True)
    time.sleep(0.3)
    batches = [next(it) for _ in range(20)]  # far more than were ready before the signals
    assert _alive(workers[0])
    assert all(b.tensors["mel"].isfinite().all() and b.tensors["mel_lens"].min() > 0 for b in batches)


def test_a_group_sigterm_reaches_the_main_process_only(cache_dir):
    p = subprocess.Popen([sys.executable, "-c", TRAINER, str(cache_dir), "run"], env=ENV,
                         start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        os.killpg(p.pid, signal.SIGTERM)  # what scancel and preemption do
        out, err = p.communicate(timeout=120)  # also: exit does not wait on a worker forever
    finally:
        _kill_group(p)
    assert p.returncode == 0, err
    assert "20 batches read after the signal" in out
    assert "Traceback" not in err and "killed by signal" not in err
    assert _wait_until_gone(_live(p.pid, 2), 10) == []


def test_loader_workers_end_when_the_main_process_is_killed(cache_dir):
    p = subprocess.Popen([sys.executable, "-c", TRAINER, str(cache_dir), "sleep"], env=ENV,
                         start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        workers = _live(p.pid, 1)
        assert workers
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        assert _wait_until_gone(workers, 30) == []  # torch's watchdog polls every 5 s
    finally:
        _kill_group(p)


def _blocked_signals(q) -> None:
    status = Path("/proc/self/status").read_text()
    q.put(int(status.split("SigBlk:")[1].split()[0], 16))


def test_workers_start_holding_stop_signals_and_the_main_process_loses_none():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with pytest.raises(KeyboardInterrupt):
        with hold_stop_signals(spawn=True):
            child = ctx.Process(target=_blocked_signals, args=(q,))
            child.start()
            os.kill(os.getpid(), signal.SIGINT)  # the main process's: delivered, now or after
        time.sleep(1)
    mask = q.get(timeout=60)
    child.join(60)
    for sig in (signal.SIGINT, signal.SIGTERM):  # held from the child's first instruction
        assert mask & (1 << (sig - 1))


def _slow_start() -> None:
    time.sleep(3)  # a spawned worker importing torch on a busy machine
    ignore_stop_signals(starting_slowly=True)


def test_a_pool_worker_signalled_while_starting_still_ends_with_the_pool():
    ctx = mp.get_context("spawn")
    before = {p.pid for p in mp.active_children()}
    with hold_stop_signals(spawn=True):
        pool = ctx.Pool(1, initializer=_slow_start)
    (worker,) = [p.pid for p in mp.active_children() if p.pid not in before]
    try:
        time.sleep(0.5)
        subprocess.run(["kill", "-TERM", str(worker)], check=True)  # the group's, held
        ender = threading.Thread(target=pool.terminate)  # the parent's, merged into it
        ender.start()
        ender.join(60)
        assert not ender.is_alive(), "Pool.terminate() waits for the worker forever"
    finally:
        if _alive(worker):
            os.kill(worker, signal.SIGKILL)


def _square(x: int) -> int:
    return x * x


def test_a_prepare_pool_worker_leaves_the_group_and_ends_only_with_the_pool():
    """Out of the group, no SIGTERM of the group's can merge with (and hide) the parent's; and
    the worker does not end on its own while idle, holding the task queue's lock that
    Pool.terminate() takes first."""
    from myxtts.data.prepare import _init_worker

    ctx = mp.get_context("spawn")
    before = {p.pid for p in mp.active_children()}
    with hold_stop_signals(spawn=True):
        pool = ctx.Pool(1, initializer=_init_worker)
    (worker,) = [p.pid for p in mp.active_children() if p.pid not in before]
    try:
        assert pool.map(_square, range(4)) == [0, 1, 4, 9]  # started: its initializer has run
        assert int(_proc_stat(worker)[2]) == worker != os.getpgid(0)
        subprocess.run(["kill", "-TERM", str(worker)], check=True)  # not its parent's: ignored
        time.sleep(1.5)  # longer than the watching thread's poll
        assert _alive(worker)
        assert pool.map(_square, [5]) == [25]
        ender = threading.Thread(target=pool.terminate)
        ender.start()
        ender.join(60)
        assert not ender.is_alive(), "Pool.terminate() waits for the worker forever"
        assert _wait_until_gone([worker], 15) == []
    finally:
        if _alive(worker):
            os.kill(worker, signal.SIGKILL)


@pytest.fixture
def corpus(tmp_path):
    """32 utterances (the 8 real clips, each listed 4 times): 16 chunks of 2."""
    root = tmp_path / "corpus"
    (root / "wavs").mkdir(parents=True)
    lines = []
    for line in (LJ / "metadata.csv").read_text().splitlines():
        uid, text, norm = line.split("|")[:3]
        for r in range(4):
            (root / "wavs" / f"{uid}-{r}.wav").symlink_to(LJ / "wavs" / f"{uid}.wav")
            lines.append(f"{uid}-{r}|{text}|{norm}")
    (root / "metadata.csv").write_text("\n".join(lines) + "\n")
    return root


def _start_prepare(corpus: Path, out: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "myxtts", "prepare", str(corpus), "--out", str(out),
                          "--workers", "2", "--chunk-size", "2"], env=ENV, start_new_session=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 180
    while not (out / "shards" / "00000").is_dir() and p.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    assert p.poll() is None, "prepare ended before it could be interrupted"
    return p


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)],
                         ids=["SIGTERM", "SIGINT"])
def test_prepare_stops_cleanly_on_a_group_signal_and_resumes(corpus, tmp_path, sig, status,
                                                             capsys):
    out = tmp_path / "cache"
    p = _start_prepare(corpus, out)
    try:
        workers = _live(p.pid, 1)  # and the resource tracker; the workers have left the group
        os.killpg(p.pid, sig)
        _, err = p.communicate(timeout=120)
    finally:
        _kill_group(p)
    assert p.returncode == status, err
    assert "Traceback" not in err
    m = re.search(r"prepare stopped: (\d+) of 16 chunks are prepared and kept in ", err)
    assert m, err
    kept = int(m.group(1))
    assert 1 <= kept < 16
    assert sum((d / "shard.json").is_file() for d in (out / "shards").iterdir()) == kept
    assert not (out / "meta.json").exists()
    assert _wait_until_gone(workers + _live(p.pid, 2), 15) == []
    if sig == signal.SIGTERM:  # the rerun does the rest only
        report = prepare(corpus, out, load(), workers=1, chunk_size=2, progress=False)
        assert f"resuming: {kept} of 16 chunks already prepared in {out}" in capsys.readouterr().err
        assert report["utterances"] == 32 and report["timing"]["utterances_computed"] == 32 - 2 * kept
        assert len(Cache(out)) == 32


def test_prepare_workers_end_when_the_main_process_is_killed(corpus, tmp_path):
    p = _start_prepare(corpus, tmp_path / "cache")
    try:
        children = _live(p.pid, 1)
        assert len(children) >= 2  # two workers (and multiprocessing's resource tracker)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        assert _wait_until_gone(children, 15) == []
    finally:
        _kill_group(p)
