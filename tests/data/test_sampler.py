"""BucketSampler on plain length arrays: no utterance lost, fixed shapes, budget, DDP, resume."""
import numpy as np
import pytest

from myxtts.config import DataConfig
from myxtts.data.sampler import BucketSampler, batch_size_for, plan_boundaries
from myxtts.errors import UserError


def lengths(n, seed=0, kind="lognormal"):
    rng = np.random.default_rng(seed)
    if kind == "lognormal":
        mel = np.clip(rng.lognormal(5.3, 0.45, n), 30, 1700).astype(np.int64)
    elif kind == "uniform":
        mel = rng.integers(86, 860, n)
    else:  # bimodal: short prompts and long paragraphs
        mel = np.where(rng.random(n) < 0.7, rng.integers(40, 200, n), rng.integers(600, 1500, n))
    text = np.maximum(3, (mel * rng.uniform(0.12, 0.3, n)).astype(np.int64))
    return mel, text


def all_ranks(world_size, mel, text, indices=None, epoch=0, **kw):
    samplers = [BucketSampler(mel, text, indices, rank=r, world_size=world_size, **kw)
                for r in range(world_size)]
    for s in samplers:
        s.set_epoch(epoch)
    return samplers, [list(s) for s in samplers]


def check_epoch(samplers, plans, mel, text, indices):
    """Every served utterance is a real row exactly once; filler only fills; shapes fixed."""
    s0 = samplers[0]
    shapes = set(s0.shapes())
    assert len({len(p) for p in plans}) == 1, "ranks must get the same number of batches"
    assert all(len(p) == len(s) for s, p in zip(samplers, plans))
    real = np.concatenate([b.indices[:b.n_real] for p in plans for b in p])
    assert np.array_equal(np.sort(real), np.sort(indices)), "lost or duplicated utterances"
    for p in plans:
        for b in p:
            B = len(b.indices)
            assert (B, b.text_len, b.mel_len) in shapes
            assert mel[b.indices].max() <= b.mel_len and text[b.indices].max() <= b.text_len
            assert np.isin(b.indices, indices).all()  # filler comes from the same split
            assert (s0.bucket_of[b.indices] == b.bucket).all()  # ... and the same bucket
            assert B == s0.buckets[b.bucket].batch_size  # every batch full, its last included


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_every_utterance_exactly_once_per_epoch_on_every_rank_count(world_size):
    mel, text = lengths(700, seed=world_size)
    idx = np.arange(700)[np.arange(700) % 10 != 3]  # a train split with holes
    for epoch in (0, 1):
        samplers, plans = all_ranks(world_size, mel, text, idx, epoch=epoch, seed=5,
                                    frame_budget=6000, pad_multiple=16)
        check_epoch(samplers, plans, mel, text, idx)


def test_property_random_corpora():
    """Invariants over many random corpora and settings (the sampler will meet corpora we
    did not see)."""
    rng = np.random.default_rng(42)
    for case in range(40):
        n = int(rng.choice([1, 2, 7, 50, 333, 2000]))
        mel, text = lengths(n, seed=case, kind=["lognormal", "uniform", "bimodal"][case % 3])
        cfg = dict(frame_budget=int(rng.choice([2000, 12000, 40000])),
                   max_batch_size=int(rng.choice([1, 16, 64])),
                   pad_multiple=int(rng.choice([1, 2, 16, 64])),
                   max_buckets=int(rng.choice([1, 3, 8, 16])), seed=case)
        ws = int(rng.choice([1, 2, 3]))
        idx = np.sort(rng.choice(n, size=max(1, n * 9 // 10), replace=False))
        samplers, plans = all_ranks(ws, mel, text, idx, **cfg)
        check_epoch(samplers, plans, mel, text, idx)
        s = samplers[0]
        assert len(s.shapes()) <= cfg["max_buckets"] <= 16
        for B, Tt, Tm in s.shapes():
            assert Tm % cfg["pad_multiple"] == 0 and Tt % cfg["pad_multiple"] == 0
            assert 1 <= B <= cfg["max_batch_size"]
            if B > 1:  # a single utterance longer than the budget still trains, alone
                assert B * Tm <= cfg["frame_budget"]
        rep = s.padding_report()
        assert 0 <= rep["mel_padding_pct"] < 100 and 0 <= rep["filler_pct"] < 100


def test_padding_on_a_large_corpus_is_small():
    # Padding is set by how many shapes we allow: about (bucket width / 2) / mean length.
    for kind in ("lognormal", "uniform", "bimodal"):
        mel, text = lengths(13000, seed=1, kind=kind)
        pads = []
        for k in (4, 8, 16):
            s = BucketSampler.from_config(mel, text, DataConfig(pad_multiple=16, max_buckets=k))
            rep = s.padding_report()
            assert rep["filler_pct"] <= 3.0, (kind, rep)
            pads.append(rep["mel_padding_pct"])
        assert pads[0] > pads[1] > pads[2] and pads[2] <= 10.0, (kind, pads)
    mel, text = lengths(13000, seed=1, kind="uniform")  # LJSpeech-like spread: 1-10 s
    assert BucketSampler(mel, text, pad_multiple=16).padding_report()["mel_padding_pct"] <= 10.0


def test_boundaries_beat_quantiles():
    mel, _ = lengths(5000, seed=3, kind="bimodal")
    ours = plan_boundaries(mel, 16, 6, 12000)
    quant = sorted({int(-(-np.quantile(mel, q) // 16) * 16) for q in np.linspace(1 / 6, 1, 6)})

    def padded(bounds):
        b = np.asarray(bounds)[np.searchsorted(bounds, mel)]
        return (b - mel).sum()
    assert len(ours) <= 6 and ours[-1] >= mel.max()
    assert padded(ours) <= padded(quant)


def test_batch_size_rules():
    assert batch_size_for(100, 12000, 64) == 64
    assert batch_size_for(400, 12000, 64) == 30
    assert batch_size_for(20000, 12000, 64) == 1


def test_resume_mid_epoch_continues_exactly():
    mel, text = lengths(900, seed=7)
    kw = dict(frame_budget=5000, pad_multiple=16, seed=3, world_size=2, rank=1)
    a = BucketSampler(mel, text, **kw)
    a.set_epoch(4)
    it = iter(a)
    for _ in range(5):
        next(it)
    state = a.state_dict()
    rest = list(it)
    b = BucketSampler(mel, text, **kw)
    b.load_state_dict(state)
    b.set_epoch(4)  # a trainer calling set_epoch after resuming must not lose the position
    again = list(b)
    assert len(again) == len(rest) > 0
    for x, y in zip(rest, again):
        assert np.array_equal(x.indices, y.indices) and x[1:] == y[1:]


def test_infinite_mode_runs_into_next_epochs_and_resumes_there():
    mel, text = lengths(300, seed=9)
    kw = dict(frame_budget=8000, pad_multiple=16, seed=1, infinite=True)
    a = BucketSampler(mel, text, **kw)
    n = len(a)
    it = iter(a)
    seq = [next(it) for _ in range(3 * n)]
    assert [p.epoch for p in seq] == [e for e in range(3) for _ in range(n)]
    b = BucketSampler(mel, text, **kw)
    b.load_state_dict({"epoch": 1, "position": 2, "seed": 1, "world_size": 1,
                       "fingerprint": a.fingerprint})
    it_b = iter(b)
    for x in seq[n + 2:]:
        assert np.array_equal(next(it_b).indices, x.indices)


def test_order_depends_on_seed_and_epoch_only():
    mel, text = lengths(400, seed=2)
    one = [p.indices for p in BucketSampler(mel, text, seed=1, frame_budget=4000)]
    same = [p.indices for p in BucketSampler(mel, text, seed=1, frame_budget=4000)]
    s = BucketSampler(mel, text, seed=1, frame_budget=4000)
    s.set_epoch(1)
    other = [p.indices for p in s]
    assert all(np.array_equal(x, y) for x, y in zip(one, same))
    assert not all(np.array_equal(x, y) for x, y in zip(one, other))


def test_unshuffled_split_is_in_bucket_order():
    mel, text = lengths(200, seed=4)
    plans = list(BucketSampler(mel, text, shuffle=False, frame_budget=3000))
    assert [p.mel_len for p in plans] == sorted(p.mel_len for p in plans)


def test_explicit_boundaries_and_overflow_bucket():
    mel = np.array([50, 100, 120, 300, 999])
    text = np.array([5, 10, 12, 30, 90])
    s = BucketSampler(mel, text, boundaries=[100, 200], pad_multiple=64, frame_budget=4000)
    assert [b.mel_len for b in s.buckets] == [128, 256, 1024]  # rounded up; 999 gets its own
    assert sorted(np.concatenate([p.indices[:p.n_real] for p in s])) == [0, 1, 2, 3, 4]


def test_changed_data_resets_resume_position_with_a_warning():
    mel, text = lengths(300, seed=5)
    a = BucketSampler(mel, text, frame_budget=3000)
    it = iter(a)
    next(it)
    state = a.state_dict()
    b = BucketSampler(mel, text, frame_budget=6000)
    with pytest.warns(UserWarning, match="restarting the epoch"):
        b.load_state_dict(state)
    assert b.state_dict()["position"] == 0
    c = BucketSampler(mel, text, frame_budget=3000, seed=7)  # same data, other seed
    with pytest.warns(UserWarning, match="restarting the epoch"):
        c.load_state_dict(state)
    assert c.state_dict()["position"] == 0


def test_another_world_size_continues_from_the_same_global_position():
    mel, text = lengths(900, seed=7)
    kw = dict(frame_budget=5000, pad_multiple=16, seed=3)
    a = BucketSampler(mel, text, world_size=2, **kw)
    a.set_epoch(2)
    it = iter(a)
    for _ in range(6):
        next(it)
    b = BucketSampler(mel, text, world_size=3, **kw)
    b.load_state_dict(a.state_dict())
    assert (b.state_dict()["epoch"], b.state_dict()["position"]) == (2, 6 * 2 // 3)


@pytest.mark.parametrize("change, message", [
    (lambda s: s.pop("seed"), "lacks 'seed'"),
    (lambda s: (s.pop("fingerprint"), s.pop("world_size")), "lacks 'world_size', 'fingerprint'"),
    (lambda s: s.update(generation=3), "has unknown 'generation'"),
])
def test_restore_is_strict_about_keys(change, message):
    mel, text = lengths(300, seed=5)
    a = BucketSampler(mel, text, frame_budget=3000)
    a.set_epoch(3)
    next(iter(a))
    state = a.state_dict()
    change(state)
    kept = dict(state)
    b = BucketSampler(mel, text, frame_budget=3000)
    with pytest.raises(UserError, match=f"data sampler state {message}.*another version") as e:
        b.load_state_dict(state)
    assert "\n" not in str(e.value)
    assert state == kept  # the caller's dict is read, not emptied
    assert (b.epoch, b.state_dict()["position"]) == (0, 0)  # nothing half-restored
