"""make_loader / DevicePrefetcher / BatchStream on a small real cache: same tensors whichever
way they travel (workers + shared-memory ring, in-process, worker form + finished), each with
the plan it was built from, exact resume."""
import numpy as np
import pytest
import torch

from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.device import BatchStream, DevicePrefetcher
from myxtts.data.loader import make_loader

from .test_dataset import multi_speaker_cache


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return Cache(multi_speaker_cache(tmp_path_factory))


@pytest.fixture(scope="module")
def cfg():
    # a tiny budget so the 8 training clips make several batches and shapes
    return load(None, ["data.pad_multiple=16", "data.frame_budget=1800", "data.num_workers=2",
                       "data.prefetch_factor=2"])


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)


def planned(batches):
    """Each Batch's tensors, checked to be the rows of the plan that came with them."""
    for b in batches:
        assert np.array_equal(b.tensors["index"].numpy(), b.plan.indices)
    return [b.tensors for b in batches]


def take(it, n):
    return planned([next(it) for _ in range(n)])


def stream_batches(stream, n):
    """``n`` batches of a BatchStream, and their plans."""
    got = [next(stream) for _ in range(n)]
    return planned(got), [b.plan for b in got]


def endless(loader, worker_form=False):
    loader.sampler.infinite = True
    if worker_form:  # what a GPU consumer takes; finished by the caller
        return (type(b)(b.plan, loader.features.finish(b.tensors)) for b in loader.iterate(None))
    return iter(loader)


def test_workers_ring_inprocess_and_worker_form_paths_agree(cache, cfg):
    n = 12  # several epochs: the ring is reused many times over
    ref = take(endless(make_loader(cache, cfg, num_workers=0, with_wav=True)), n)
    ring_loader = make_loader(cache, cfg, with_wav=True)
    assert ring_loader.ring is not None  # persistent workers on Linux: the shared-memory ring
    got = take(endless(ring_loader), n)
    compact = take(endless(make_loader(cache, cfg, with_wav=True), worker_form=True), n)
    fresh = take(endless(make_loader(cache, cfg, with_wav=True, persistent_workers=False)), n)
    for r, g, c, f in zip(ref, got, compact, fresh):
        assert same(r, g) and same(r, c) and same(r, f)
        assert r["mel"].dtype == torch.float32 and r["wav"].dtype == torch.float32


def test_a_finite_loader_is_one_epoch_and_batches_survive_later_ones(cache, cfg):
    loader = make_loader(cache, cfg)
    first = planned(list(loader))
    assert len(first) == len(loader) == len(loader.sampler)
    snapshot = [{k: v.clone() for k, v in b.items()} for b in first]
    loader.sampler.set_epoch(1)
    list(loader)  # reuses the ring slots; earlier batches must not change under the caller
    assert all(same(a, b) for a, b in zip(first, snapshot))
    real = np.concatenate([b["index"].numpy()[:p.n_real] for b, p in zip(first, loader.sampler.plan(0))])
    assert sorted(real) == sorted(cache.indices("train"))


def test_prefetcher_delivers_the_plain_loaders_tensors(cache, cfg):
    plain = planned(list(make_loader(cache, cfg)))
    pf = DevicePrefetcher(make_loader(cache, cfg), "cpu")
    got = planned(list(pf))
    assert len(got) == len(plain) == pf.batches
    assert all(same(a, b) for a, b in zip(plain, got))
    assert pf.total_wait_s >= pf.last_wait_s >= 0.0


def test_stream_resumes_exactly_mid_epoch_and_across_epochs(cache, cfg):
    first = BatchStream(make_loader(cache, cfg))
    epoch_len = first.epoch_len
    steps = epoch_len + 2  # stop inside the second epoch
    run, plans = stream_batches(first, steps)
    assert [p.epoch for p in plans] == [0] * epoch_len + [1] * 2
    state = first.state_dict()
    assert (state["epoch"], state["position"]) == (1, 2)
    expected, _ = stream_batches(first, epoch_len + 3)  # what the uninterrupted run trains on next
    resumed = BatchStream(make_loader(cache, cfg))
    resumed.load_state_dict(state)
    again, _ = stream_batches(resumed, epoch_len + 3)
    assert all(same(a, b) for a, b in zip(expected, again))
    total = 2 + epoch_len + 3
    assert (resumed.state_dict()["epoch"], resumed.state_dict()["position"]) == \
        (1 + total // epoch_len, total % epoch_len)
    assert not same(run[0], run[epoch_len]) or epoch_len == 1  # epochs reshuffle


def test_ddp_ranks_split_the_epoch(cache, cfg):
    for world in (2, 3):
        loaders = [make_loader(cache, cfg, rank=r, world_size=world, num_workers=0) for r in range(world)]
        plans = [ld.sampler.plan(0) for ld in loaders]
        assert len({len(p) for p in plans}) == 1
        real = [i for p in plans for b in p for i in b.indices[:b.n_real]]
        assert sorted(real) == sorted(cache.indices("train"))
        for ld, p in zip(loaders, plans):  # each rank's tensors are its own plan's batches
            for b, plan in zip(ld, p):
                assert np.array_equal(b.tensors["index"].numpy(), plan.indices) and b.plan.indices is not None


def test_validation_uses_the_training_buckets(cache, cfg):
    train, val = make_loader(cache, cfg), make_loader(cache, cfg, "val")
    buckets = {(bk.text_len, bk.mel_len): bk.batch_size for bk in train.sampler.buckets}
    assert [bk.shape for bk in val.sampler.buckets] == [bk.shape for bk in train.sampler.buckets]
    assert all(b <= buckets[(tt, tm)] for b, tt, tm in val.sampler.shapes())
    seen = sorted(i for b in val for i in b.tensors["index"][:b.plan.n_real].tolist())
    assert seen == sorted(cache.indices("val"))


def test_on_the_fly_stream_yields_the_contract(cache, cfg):
    otf = load(None, ["data.pad_multiple=16", "data.frame_budget=1800", "data.on_the_fly=true",
                      "data.num_workers=1"])
    stream = BatchStream(make_loader(cache, otf), "cpu")
    cached = BatchStream(make_loader(cache, cfg, num_workers=0))
    for a, b in zip(stream_batches(stream, 2)[0], stream_batches(cached, 2)[0]):
        assert a.keys() == b.keys()
        assert all(a[k].shape == b[k].shape for k in a)
        assert torch.equal(a["index"], b["index"]) and torch.equal(a["tokens"], b["tokens"])


def test_rewinding_a_running_stream_on_the_same_loader(cache, cfg):
    # the persistent workers and the ring are reused; the old pass must be fully stopped
    stream = BatchStream(make_loader(cache, cfg))
    take(stream, 3)
    state = stream.state_dict()
    expected, _ = stream_batches(stream, 5)
    for _ in range(2):
        stream.load_state_dict(state)  # the old pass's plans in flight must not pair with new batches
        assert all(same(a, b) for a, b in zip(expected, stream_batches(stream, 5)[0]))


def test_bench_loader_quick_writes_the_record(cache, tmp_path, capsys):
    import argparse
    import json

    from myxtts.commands.bench import add_parser

    parser = argparse.ArgumentParser(prog="myxtts")
    add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "loader.json"
    args = parser.parse_args(["bench", "loader", "--data", str(cache.path), "--quick", "--workers", "1",
                              "--step-ms", "1", "--json", str(out), "data.pad_multiple=16"])
    assert args.func(args) == 0
    r = json.loads(out.read_text())
    for key in ("frames_per_s",):
        assert r["loader"]["naive"][key] > 0 and r["loader"]["cached"][key] > 0
    assert 0 <= r["loader"]["cached"]["input_bound_pct"] <= 100 and r["workers"] == 1
    assert r["device"] and 0 <= r["loader"]["padding_pct"] < 100
    assert r["simulated_step"]["source"] == "--step-ms"
    assert "input-bound" in capsys.readouterr().out

    # Without --step-ms the step time comes from the model's FLOPs, counted on meta tensors.
    args = parser.parse_args(["bench", "loader", "--data", str(cache.path), "--quick", "--workers", "1",
                              "--config", "tiny", "--json", str(out), "data.pad_multiple=16"])
    assert args.func(args) == 0
    step = json.loads(out.read_text())["simulated_step"]
    assert step["source"] == "derived" and step["model_params"] > 0
    assert all(ms > 0 for ms in step["per_shape_ms"].values())


def test_a_model_conditioned_on_speaker_embeddings_gets_its_references_rows(cache, cfg, tmp_path):
    import shutil

    from myxtts.data import embeddings

    shutil.copytree(cache.path, tmp_path / "c")  # the embeddings file stays out of the shared cache
    own = Cache(tmp_path / "c")
    ge2e = load(None, ["data.pad_multiple=16", "data.frame_budget=1800", "model.speaker_embedding=ge2e"])
    loader = make_loader(own, ge2e, num_workers=0)
    stored = embeddings.load(own)  # computed by make_loader, once
    assert stored is not None and stored.shape == (len(own), 256)
    rows = 0
    for b in loader:
        t = b.tensors
        B = len(b.plan.indices)
        assert t["ref_emb"].shape == (B, 256) and t["ref_emb"].dtype == torch.float32
        ref, _, _ = loader.dataset.refs.pick(np.asarray(b.plan.indices), b.plan.epoch)
        for r, i in enumerate(t["index"].tolist()):
            assert own.index.speaker[ref[r]] == own.index.speaker[i]
            assert torch.equal(t["ref_emb"][r], torch.from_numpy(stored[ref[r]]))  # the reference's own row
        rows += b.plan.n_real
    assert rows == len(own.indices("train"))
    # the same through the workers and the shared-memory ring
    ring = make_loader(own, load(None, ["data.pad_multiple=16", "data.frame_budget=1800", "data.num_workers=2",
                                        "data.prefetch_factor=2", "model.speaker_embedding=ge2e"]))
    assert ring.ring is not None
    assert all(same(a, b) for a, b in zip(planned(list(make_loader(own, ge2e, num_workers=0))), planned(list(ring))))
    # a model without them: no such key, and nothing computed
    assert all("ref_emb" not in b.tensors for b in make_loader(cache, cfg, num_workers=0))
    assert not embeddings.path_of(cache).exists()
