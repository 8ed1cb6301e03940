"""A trained model taught a new language (`prepare --language CODE --match RUN`, then `train
--init-from RUN`): its symbols keep their ids and rows, the new language's are appended, its
language table grows with the old language read exactly as before, and a corpus in the model's
own language still reads unknown symbols as known ones. A model trained on two languages at once
speaks each."""
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from myxtts.cli import main
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.format import with_cache_settings
from myxtts.errors import UserError
from myxtts.infer import Synthesizer
from myxtts.models.checkpoint import build_model, describe, load_model, read_metadata, save_model
from myxtts.text import TextProcessor, nearest_known
from myxtts.train import finetune
from myxtts.train.build import build_run, resolve_plan
from myxtts.train.trainer import train

from .conftest import FAST, LJ, losses, run_train

EMBED = "text_encoder.embed.weight"  # the one table sized by the vocabulary
LANGUAGES = "text_encoder.language.weight"  # the language table, in a model of several
PERSIAN = ["کتاب‌ها روی میز است.", "امروز هوا خیلی خوب است.", "ما ۳ کتاب خریدیم."]


@pytest.fixture(scope="module")
def english(lj_cache, tmp_path_factory):
    """An English run (phonemes, en-us) trained two steps."""
    out = tmp_path_factory.mktemp("english") / "run"
    train(load("tiny", [*FAST, "train.max_steps=2"]), lj_cache, out, progress=False)
    return out


def _corpus(root: Path, rows: list[str]) -> Path:
    """``rows`` (metadata lines without their id) over the fixture's first clips."""
    (root / "wavs").mkdir(parents=True)
    lines = []
    for i, row in enumerate(rows, 1):
        shutil.copy(LJ / "wavs" / f"LJ001-000{i + 1}.wav", root / "wavs" / f"u{i}.wav")
        lines.append(f"u{i}|{row}")
    (root / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_a_new_language_appends_its_symbols_and_keeps_the_models_rows_bit_for_bit(english, tmp_path):
    corpus, cache = _corpus(tmp_path / "fa", PERSIAN), tmp_path / "cache"
    assert main(["prepare", str(corpus), "--out", str(cache), "--workers", "1",
                 "--language", "fa", "--match", str(english)]) == 0
    src, c = finetune.find(english, "acoustic"), Cache(cache)
    n = len(src.vocab)
    assert c.vocab.symbols[:n] == src.vocab and len(c.vocab) > n  # the model's ids, then the new
    assert c.languages == ["fa"] and c.text_cfg.language == "fa" and c.text_cfg.mode == "phonemes"
    assert len(c) == len(PERSIAN)  # nothing skipped for lacking a symbol
    with pytest.raises(UserError, match="another vocabulary"):
        finetune.check_data(src, cache, reads_text=True)  # a model that only reads the cache cannot
    finetune.check_data(src, cache, reads_text=True, grows=True)

    # Before any step: SRC's weights, its symbols' rows bit for bit, one row per new symbol.
    cfg = with_cache_settings(finetune.configure(load("tiny", FAST), src.cfg, src.path, FAST,
                                                 "model")[0], cache, set())[0]
    run = build_run(cfg, cache, plan=resolve_plan(cfg, cache, init_from=src.record()), with_batches=False)
    finetune.load(run, src)
    after, before = run.model.state_dict(), load_file(str(src.path))
    assert after[EMBED].shape == (len(c.vocab), before[EMBED].shape[1])
    assert torch.equal(after[EMBED][:n], before[EMBED])
    assert all(torch.equal(after[k], before[k]) for k in before if k != EMBED)
    # The language table: English (SRC's one language, which had none) and Persian, both rows
    # zero, so English text is encoded exactly as SRC encodes it.
    assert LANGUAGES not in before and run.model.languages == ("en-us", "fa")
    assert torch.equal(after[LANGUAGES], torch.zeros(2, before[EMBED].shape[1]))
    old = load_model(src.path)[0]
    tokens, lens = torch.tensor([list(range(1, 12))]), torch.tensor([11])  # (1, 11) of SRC's ids
    run.model.eval()
    assert torch.equal(run.model.text_encoder(tokens, lens, torch.tensor([0]))[0],
                       old.text_encoder(tokens, lens)[0])
    mean, known = before[EMBED][1:].mean(0), set(src.vocab[1:])
    plain = [i for i, s in enumerate(c.vocab.symbols[n:], n) if not nearest_known(s, known)]
    assert plain and all(torch.equal(after[EMBED][i], mean) for i in plain)  # no base letter

    out = tmp_path / "run"  # and it trains, as a user runs it
    r = run_train(cache, out, "--init-from", str(english), "train.max_steps=2")
    assert r.returncode == 0, r.stderr
    assert sorted(losses(out)) == [1, 2] and all(v == v for v in losses(out).values())
    model_cfg, vocab, meta = describe(out / "checkpoints" / "step-00000002" / "model.safetensors")
    assert vocab == c.vocab.symbols and model_cfg.text.language == "fa"
    assert json.loads(meta["languages"]) == ["en-us", "fa"]  # SRC's, then the new one
    synth = Synthesizer(out, log=lambda *_: None)
    assert synth.languages == ["fa", "en-us"]  # its own (text.language) first


def test_a_model_trained_on_two_languages_speaks_each_through_its_language_table(tmp_path):
    """English and Persian rows in one corpus: the model has a table of both, the batches carry
    each sentence's language, and the same ids read as the other language sound different."""
    rows = ["The birch canoe slid on the smooth planks.", "Glue the sheet to the dark blue background.",
            *[f"{t}|{t}|speaker|fa" for t in PERSIAN[:2]]]
    cache, out = tmp_path / "cache", tmp_path / "run"
    assert main(["prepare", str(_corpus(tmp_path / "mixed", rows)), "--out", str(cache), "--workers", "1"]) == 0
    assert Cache(cache).languages == ["en-us", "fa"]
    r = run_train(cache, out, "train.max_steps=2")
    assert r.returncode == 0, r.stderr
    model = out / "checkpoints" / "step-00000002" / "model.safetensors"
    assert json.loads(read_metadata(model)["languages"]) == ["en-us", "fa"]
    assert load_file(str(model))[LANGUAGES].shape == (2, 64)
    synth = Synthesizer(out, log=lambda *_: None)
    assert synth.languages == ["en-us", "fa"]
    ids = synth.encode("the birch canoe.")
    en, fa = (synth.speak_ids([ids], None, language=code)[0].mel for code in ("en-us", "fa"))
    assert not torch.equal(en, fa)  # the language row is read
    with pytest.raises(UserError, match="speaks en-us, fa only"):
        synth.speak_ids([ids], None, language="de")


def test_the_models_own_language_still_reads_a_symbol_it_lacks_as_its_nearest(lj_cache, tmp_path):
    """A characters model that never saw 'é': in English (its language) 'café' reads 'cafe'; a
    Persian row of the same corpus appends its letters."""
    rows = ["the cafe opened.", "the café opened.", "کتاب خوب است.|کتاب خوب است.|speaker|fa"]
    cfg = load("tiny", [*FAST, "text.mode=characters"])
    tp = TextProcessor(cfg.text)
    english_symbols = sorted(set(tp.symbols("the cafe opened.")[0]))
    src = save_model(tmp_path / "en.safetensors", build_model("acoustic", cfg, 2 + len(english_symbols)),
                     cfg, ["<pad>", "<eos>", *english_symbols])
    cache = tmp_path / "cache"
    assert main(["prepare", str(_corpus(tmp_path / "mixed", rows)), "--out", str(cache),
                 "--workers", "1", "--match", str(src)]) == 0
    c = Cache(cache)
    persian = sorted(set("کتاب خوب است.") - set(english_symbols))
    assert c.vocab.symbols == ["<pad>", "<eos>", *english_symbols, *persian]
    assert "é" not in c.vocab.index and "".join(c.vocab.symbols[t] for t in c.tokens(1)[:-1]) == "the cafe opened."
    notes = [n["reason"] for n in json.loads((cache / "report.json").read_text())["notes"]]
    assert "not in the matched model's vocabulary, so read 'é' as 'e'" in notes
    assert any(f"{len(persian)} symbol(s) of fa the matched model lacks" in n for n in notes)


def test_a_new_symbols_row_starts_as_its_nearest_known_symbols_else_the_mean():
    old, new = ["<pad>", "<eos>", " ", "a", "e"], ["<pad>", "<eos>", " ", "a", "e", "é", "ʒ"]
    state = {EMBED: torch.randn(5, 4), "alpha": torch.ones(1)}
    own = {EMBED: torch.zeros(7, 4), "alpha": torch.zeros(1)}
    grown = finetune.grow(state, own, old, new)
    assert torch.equal(grown[EMBED][:5], state[EMBED]) and grown["alpha"] is state["alpha"]
    assert torch.equal(grown[EMBED][5], state[EMBED][4])  # é starts as e
    assert torch.equal(grown[EMBED][6], state[EMBED][1:].mean(0))  # ʒ: no base letter, the mean
