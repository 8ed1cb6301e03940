"""data.embeddings: each cache clip's GE2E speaker embedding, computed once beside the cache
(model.speaker_embedding=ge2e), on the real LJSpeech + CMU ARCTIC fixture clips."""
import shutil

import numpy as np
import pytest

from myxtts import speaker_encoder as speaker
from myxtts.config import load
from myxtts.data import embeddings
from myxtts.data.cache import Cache
from myxtts.data.prepare import prepare
from myxtts.errors import UserError

from .test_dataset import FIXTURES, multi_speaker_cache


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A private copy of the 10-clip, 4-voice cache ('a', 'b': LJSpeech; 'c', 'd': CMU ARCTIC):
    the embeddings file written here is not seen by other modules' tests."""
    path = tmp_path_factory.mktemp("emb") / "c"
    shutil.copytree(multi_speaker_cache(tmp_path_factory), path)
    return Cache(path)


@pytest.fixture(scope="module")
def computed(cache):
    """(embeddings, mtime_ns of their file) as the first ``ensure`` left them."""
    assert embeddings.load(cache) is None  # nothing before the first run that needs them
    emb = embeddings.ensure(cache, progress=False)
    return emb, embeddings.path_of(cache).stat().st_mtime_ns


def test_ensure_writes_one_unit_row_per_clip(cache, computed):
    emb, _ = computed
    assert emb.shape == (len(cache), speaker.DIM) == (10, 256) and emb.dtype == np.float32
    stored = np.load(embeddings.path_of(cache))
    assert stored.dtype == np.float16 and stored.shape == emb.shape
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=2e-3)  # float16 rows
    # each row is the encoder's embedding of that clip's stored waveform
    enc = speaker.shared_encoder()
    for i in (0, 9):
        direct = enc.embed(cache.wav(i).astype(np.float32) / 32768.0, cache.audio_cfg.sample_rate)
        np.testing.assert_allclose(emb[i], direct, atol=2e-3)
    assert not list(cache.path.glob(".speaker_embeddings.npy.tmp*"))  # no temporary left behind


def test_a_second_ensure_reads_the_file_without_the_encoder(cache, computed, monkeypatch):
    emb, mtime = computed

    def never(*args, **kwargs):
        raise AssertionError("embeddings computed again")

    monkeypatch.setattr(speaker.SpeakerEncoder, "embed", never)
    again = embeddings.ensure(Cache(cache.path), progress=False)
    assert np.array_equal(again, emb) and embeddings.path_of(cache).stat().st_mtime_ns == mtime
    assert np.array_equal(embeddings.load(cache), emb)


def test_clips_of_one_voice_are_closer_than_clips_of_another(cache, computed):
    emb, _ = computed
    names = [cache.speakers[s] for s in cache.index.speaker]
    lj = [i for i, n in enumerate(names) if n in ("a", "b")]  # one reader, two names
    arctic = [i for i, n in enumerate(names) if n in ("c", "d")]
    assert len(lj) == 8 and len(arctic) == 2
    same = min(emb[i] @ emb[j] for i in lj for j in lj if i < j)
    other = max(emb[i] @ emb[j] for i in lj for j in arctic)
    assert same > other + 0.1, (same, other)  # measured: 0.79 and 0.61
    assert emb[arctic[0]] @ emb[arctic[1]] < same  # a man and a woman of CMU ARCTIC


@pytest.mark.parametrize("shape", [(3, 256), (10, 128)])
def test_a_file_of_another_shape_is_refused_saying_to_delete_it(cache, computed, tmp_path, shape):
    other = tmp_path / "c"
    shutil.copytree(cache.path, other)
    copy = Cache(other)
    np.save(embeddings.path_of(copy), np.zeros(shape, np.float16))
    for read in (embeddings.load, embeddings.ensure):
        with pytest.raises(UserError) as e:
            read(copy)
        assert str(embeddings.path_of(copy)) in str(e.value) and "delete it" in str(e.value)


def test_a_cache_without_waveforms_is_refused(tmp_path):
    root = tmp_path / "lj"
    (root / "wavs").mkdir(parents=True)
    shutil.copy(FIXTURES / "ljspeech" / "wavs" / "LJ001-0002.wav", root / "wavs")
    (root / "metadata.csv").write_text("LJ001-0002|in being comparatively modern.|in being comparatively modern.\n")
    prepare(root, tmp_path / "c", load(None, ["data.store_wav=false"]), progress=False)
    cache = Cache(tmp_path / "c")
    with pytest.raises(UserError, match="store_wav=true"):
        embeddings.ensure(cache, progress=False)
    assert embeddings.load(cache) is None and not embeddings.path_of(cache).exists()


def test_worker_processes_compute_the_rows_one_process_does(cache, computed, tmp_path, monkeypatch):
    copy = tmp_path / "c"
    shutil.copytree(cache.path, copy)
    embeddings.path_of(Cache(copy)).unlink()
    monkeypatch.setattr(embeddings, "CHUNK", 3)  # 4 tasks for the 2 processes
    # one thread per worker sums in another order: float32 rounding, then a float16 row may round apart
    np.testing.assert_allclose(embeddings.ensure(Cache(copy), progress=False, workers=2), computed[0], atol=1e-4)
