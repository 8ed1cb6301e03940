import json
import subprocess
from pathlib import Path

import pytest

from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.format import with_cache_settings
from myxtts.data.prepare import prepare
from myxtts.data.verify import verify
from myxtts.errors import UserError

LJ = Path(__file__).parent.parent / "fixtures" / "ljspeech"


def test_verify_detects_a_flipped_byte_and_fix_repairs_only_that_shard(tmp_path, myxtts_cmd):
    cache = tmp_path / "c"
    prepare(LJ, cache, load(), chunk_size=3, progress=False)
    before = {p: p.read_bytes() for p in sorted(cache.glob("shards/*/*.npy"))}
    ok = subprocess.run(myxtts_cmd + ["cache", "verify", str(cache)], capture_output=True, text=True)
    assert ok.returncode == 0 and "OK" in ok.stdout

    victim = cache / "shards" / "00001" / "mel.npy"
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    assert verify(cache) == [("00001", "mel.npy checksum mismatch (corrupted)")]
    bad = subprocess.run(myxtts_cmd + ["cache", "verify", str(cache)], capture_output=True, text=True)
    assert bad.returncode == 1 and "00001" in bad.stdout and "mel.npy" in bad.stdout

    untouched = cache / "shards" / "00000" / "mel.npy"
    mtime = untouched.stat().st_mtime_ns
    fixed = subprocess.run(myxtts_cmd + ["cache", "verify", str(cache), "--fix", "--workers", "1"],
                           capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert untouched.stat().st_mtime_ns == mtime  # only the broken shard was re-prepared
    assert {p: p.read_bytes() for p in sorted(cache.glob("shards/*/*.npy"))} == before
    assert len(Cache(cache)) == 8


def test_verify_tells_an_unfinished_cache_from_no_cache(tmp_path):
    (tmp_path / "plan.json").write_text("{}")  # prepare started, never merged
    assert verify(tmp_path) == [("meta.json", "missing: the cache is incomplete (prepare did not finish)")]
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a prepared cache"):
        verify(tmp_path / "empty")


def test_a_new_run_takes_the_cache_settings_it_was_not_given(tmp_path):
    cache = tmp_path / "c"
    prepare(LJ, cache, load(None, ["text.lowercase=false", "audio.fmax=7600"]), progress=False)
    cfg, taken = with_cache_settings(load("tiny"), cache, pinned=set())
    assert sorted(taken) == ["audio.fmax=7600.0", "text.lowercase=False"]
    assert cfg.text.lowercase is False and cfg.audio.fmax == 7600 and cfg.model == load("tiny").model
    Cache(cache, expect=cfg)  # opens: nothing left to refuse

    # A setting the user gave stays theirs, and the cache still refuses it, naming it.
    cfg, taken = with_cache_settings(load("tiny", ["text.lowercase=true"]), cache, {"text.lowercase"})
    assert taken == ["audio.fmax=7600.0"] and cfg.text.lowercase is True
    with pytest.raises(UserError, match="text.lowercase: cache has False, requested True"):
        Cache(cache, expect=cfg)
    # No cache there: nothing taken, the error comes where the cache is opened.
    assert with_cache_settings(load("tiny"), tmp_path / "nothing", set()) == (load("tiny"), [])


def test_pseudo_speakers_decide_a_caches_content_and_an_older_cache_reads_as_none(tmp_path):
    """Training with data.pseudo_speakers on a cache prepared without them would do nothing: the
    cache is refused, naming the setting. A cache from before the setting was recorded was made
    without pseudo-speakers and reads so."""
    cache = tmp_path / "c"
    prepare(LJ, cache, load(), progress=False)
    with pytest.raises(UserError, match="data.pseudo_speakers: cache has 0, requested 2"):
        Cache(cache, expect=load(None, ["data.pseudo_speakers=2"]))
    meta = json.loads((cache / "meta.json").read_text(encoding="utf-8"))
    del meta["settings"]["data"]["pseudo_speakers"]  # as an older cache records its settings
    (cache / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    Cache(cache, expect=load())
    with pytest.raises(UserError, match="data.pseudo_speakers: cache has 0, requested 2"):
        Cache(cache, expect=load(None, ["data.pseudo_speakers=2"]))
    cfg, taken = with_cache_settings(load(None, ["data.pseudo_speakers=2"]), cache, pinned=set())
    assert cfg.data.pseudo_speakers == 0 and taken == ["data.pseudo_speakers=0"]  # the cache's, said
