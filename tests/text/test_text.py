from collections import Counter

import pytest

from myxtts.config import TextConfig
from myxtts.text import EOS_ID, TextProcessor, UnknownCharacterError, Vocabulary
from myxtts.text.normalize import normalize


@pytest.mark.parametrize("raw, expected", [
    ("Dr. Smith paid $5.50.", "doctor smith paid five dollars and fifty cents."),
    ("On the 21st of May, 1990.", "on the twenty first of may, nineteen ninety."),
    ("It rose 12% to 1,234.", "it rose twelve percent to one thousand two hundred thirty four."),
    ("\u201cQuoted\u201d \u2014 text\u2026", '"quoted" - text...'),
    ("In 2005 and 1905.", "in two thousand five and nineteen oh five."),
])
def test_normalize_expands_english(raw, expected):
    assert normalize(raw) == expected


def test_vocabulary_is_stable_and_reserved_ids():
    a = Vocabulary.build(Counter("hello world"))
    b = Vocabulary.build(Counter("world hello"))
    assert a == b and a.symbols[:2] == ["<pad>", "<eos>"]
    assert Vocabulary.from_json(a.to_json()) == a


def test_encode_appends_eos_and_reports_unknown():
    tp = TextProcessor(TextConfig())
    syms, unknown = tp.symbols("Hi 🎉 there")
    assert "".join(syms) == "hi there" and unknown == ["🎉"]
    tp.vocab = Vocabulary.build(Counter(syms))
    ids = tp.encode("there hi")
    assert ids[-1] == EOS_ID and len(ids) == len("there hi") + 1
    with pytest.raises(UnknownCharacterError, match="'z'"):
        tp.encode("zebra")
