"""BatchBuilder with each feature strategy (cached mels, decoded audio) on a small real cache
(LJSpeech + CMU ARCTIC fixtures)."""
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from myxtts.audio import LOG_FLOOR
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.dataset import BatchBuilder
from myxtts.data.features import MEL_PAD, CachedMels, DecodedAudio
from myxtts.data.prepare import prepare
from myxtts.data.sampler import make_sampler

FIXTURES = Path(__file__).parent.parent / "fixtures"
_BUILT = {}


def multi_speaker_cache(tmp_path_factory) -> Path:
    """10 real clips, 4 speakers: 'a' and 'b' have 4 clips each (LJSpeech), 'c' and 'd' one
    each (CMU ARCTIC, 16 kHz, so resampled). Prepared once per test session."""
    if "path" not in _BUILT:
        root = tmp_path_factory.mktemp("corpus")
        (root / "wavs").mkdir()
        lines = []
        meta = (FIXTURES / "ljspeech" / "metadata.csv").read_text().splitlines()
        for n, line in enumerate(meta):
            uid, text, norm = line.split("|")[:3]
            (root / "wavs" / f"{uid}.wav").write_bytes((FIXTURES / "ljspeech" / "wavs" / f"{uid}.wav").read_bytes())
            lines.append(f"{uid}|{text}|{norm}|{'a' if n < 4 else 'b'}")
        voices = (("arctic_a0007_male", "c", "And you always want to see it in the superlative degree."),
                  ("arctic_a0009_slt_female", "d", "He turned sharply, and faced Gregson across the table."))
        for name, spk, text in voices:
            (root / "wavs" / f"{name}.wav").write_bytes((FIXTURES / "reference_voices" / f"{name}.wav").read_bytes())
            lines.append(f"{name}|{text}|{text}|{spk}")
        (root / "metadata.csv").write_text("\n".join(lines) + "\n")
        out = tmp_path_factory.mktemp("cache") / "c"
        prepare(root, out, load(None, ["data.val_fraction=0.2"]), workers=1, progress=False)
        _BUILT["path"] = out
    return _BUILT["path"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return Cache(multi_speaker_cache(tmp_path_factory))


@pytest.fixture(scope="module")
def cfg():
    return load(None, ["data.pad_multiple=16", "data.frame_budget=2000"])


def batches(cache, cfg, split="train", epoch=0, with_wav=False, features=CachedMels):
    """(sampler, builder, [(plan, batch contract)]) of one epoch, built in this process."""
    sampler = make_sampler(cache, cfg, split)
    sampler.set_epoch(epoch)
    ds = BatchBuilder(cache, features(cache, with_wav), ref_seconds=cfg.data.ref_seconds,
                      pad_multiple=cfg.data.pad_multiple, seed=sampler.seed, ref_pool=cache.indices("train"))
    out = []
    for p in sampler:
        batch = ds[p]
        assert batch.plan == p or np.array_equal(batch.plan.indices, p.indices)  # the plan travels with it
        out.append((p, ds.features.finish(batch.tensors)))
    return sampler, ds, out


def test_batch_contract_and_content(cache, cfg):
    sampler, ds, out = batches(cache, cfg, with_wav=True)
    tr = math.ceil(cfg.data.ref_seconds * cache.audio_cfg.sample_rate / cache.audio_cfg.hop_length)
    Tr = -(-tr // 16) * 16
    hop = cache.audio_cfg.hop_length
    seen = []
    for plan, b in out:
        B, Tt, Tm = len(plan.indices), plan.text_len, plan.mel_len
        assert (B, Tt, Tm) in sampler.shapes() and Tm % 16 == 0
        expect = {"tokens": ((B, Tt), torch.int64), "token_lens": ((B,), torch.int64),
                  "mel": ((B, Tm, 80), torch.float32), "mel_lens": ((B,), torch.int64),
                  "ref_mel": ((B, Tr, 80), torch.float32), "ref_lens": ((B,), torch.int64),
                  "speaker": ((B,), torch.int64), "index": ((B,), torch.int64),
                  "wav": ((B, Tm * hop), torch.float32)}
        assert {k: (tuple(v.shape), v.dtype) for k, v in b.items()} == expect
        for r, i in enumerate(b["index"].tolist()):
            n, t = cache.index.n_frames[i], cache.index.n_tokens[i]
            assert b["mel_lens"][r] == n and b["token_lens"][r] == t
            assert torch.equal(b["mel"][r, :n], torch.from_numpy(cache.mel(i).astype(np.float32)))
            assert (b["mel"][r, n:] == np.float32(math.log(LOG_FLOOR))).all()
            assert torch.equal(b["tokens"][r, :t], torch.from_numpy(cache.tokens(i).astype(np.int64)))
            assert (b["tokens"][r, t:] == 0).all()
            assert torch.equal(b["wav"][r, :n * hop], torch.from_numpy(cache.wav(i) / np.float32(32768)))
            assert (b["wav"][r, n * hop:] == 0).all()
            assert b["speaker"][r] == cache.index.speaker[i]
            assert (b["ref_mel"][r, b["ref_lens"][r]:] == np.float32(MEL_PAD)).all()
            assert 0 < b["ref_lens"][r] <= tr
        seen += b["index"][:plan.n_real].tolist()
    assert sorted(seen) == sorted(cache.indices("train").tolist())


def test_reference_is_another_utterance_of_the_same_speaker(cache, cfg):
    train = set(cache.indices("train").tolist())
    pool_size = {s: sum(cache.index.speaker[j] == s for j in train) for s in range(len(cache.speakers))}
    for epoch in (0, 1, 2):
        _, ds, out = batches(cache, cfg, epoch=epoch)
        for plan, b in out:
            idx = np.asarray(plan.indices)
            ref, off, length = ds.refs.pick(idx, epoch)
            for r, i in enumerate(idx):
                s = cache.index.speaker[i]
                assert cache.index.speaker[ref[r]] == s and ref[r] in train
                others = pool_size[s] - (i in train)
                assert (ref[r] != i) if others > 0 else (ref[r] == i)
                # the delivered reference is exactly that crop of the cached mel
                seg = cache.mel(ref[r])[off[r]:off[r] + length[r]].astype(np.float32)
                assert torch.equal(b["ref_mel"][r, :length[r]], torch.from_numpy(seg))
    # a pure function of (seed, epoch, index): the same again, and it varies across epochs
    _, ds, _ = batches(cache, cfg)
    idx = cache.indices("train")
    assert all(np.array_equal(x, y) for x, y in zip(ds.refs.pick(idx, 0), ds.refs.pick(idx, 0)))
    picks = {tuple(ds.refs.pick(idx, e)[0]) + tuple(ds.refs.pick(idx, e)[1]) for e in range(6)}
    assert len(picks) > 1


def test_single_utterance_speaker_uses_a_segment_of_itself(cache, cfg):
    # 'c' and 'd' have one clip each; whichever is in the pool must reference itself
    _, ds, _ = batches(cache, cfg)
    for name in ("c", "d"):
        i = cache.speakers.index(name)
        j = int(np.flatnonzero(cache.index.speaker == i)[0])
        ref, off, length = ds.refs.pick(np.array([j]), 3)
        assert ref[0] == j and off[0] + length[0] <= cache.index.n_frames[j]


def test_on_the_fly_batches_match_the_cached_ones(cache, cfg):
    _, _, cached = batches(cache, cfg)
    _, _, raw = batches(cache, cfg, with_wav=True, features=DecodedAudio)
    for (plan, c), (plan2, r) in zip(cached, raw):
        assert np.array_equal(plan.indices, plan2.indices)
        assert r["mel"].shape == c["mel"].shape and r["ref_mel"].shape == c["ref_mel"].shape
        for key in ("tokens", "token_lens", "mel_lens", "ref_lens", "speaker", "index"):
            assert torch.equal(c[key], r[key]), key
        for row, n in enumerate(c["mel_lens"].tolist()):
            # same features up to float16 storage and int16 audio (which moves the quietest
            # bins by ~0.1 in log), except the last 2 frames (they see the edge padding)
            diff = (c["mel"][row, :n - 2] - r["mel"][row, :n - 2]).abs()
            assert diff.mean() < 0.01 and diff.max() < 0.3, (diff.mean(), diff.max())
            assert (r["mel"][row, n:] == np.float32(MEL_PAD)).all()
        assert r["wav"].shape == (len(plan.indices), plan.mel_len * cache.audio_cfg.hop_length)


def test_a_too_small_plan_is_refused(cache, cfg):
    sampler, ds, _ = batches(cache, cfg)
    plan = next(iter(sampler))
    with pytest.raises(ValueError, match="too small"):
        ds[plan._replace(mel_len=16)]
