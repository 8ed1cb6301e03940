from collections import Counter
from pathlib import Path

import pytest

from myxtts.config import TextConfig
from myxtts.text import EOS_ID, TextProcessor, UnknownCharacterError, Vocabulary, nearest_known
from myxtts.text.normalize import normalize

DEMO_METADATA = Path(__file__).parents[2] / "data" / "demo" / "metadata.csv"


@pytest.mark.parametrize("raw, expected", [
    ("Dr. Smith paid $5.50.", "doctor smith paid five dollars and fifty cents."),
    ("It cost $3, then $1,250.", "it cost three dollars, then one thousand two hundred fifty dollars."),
    ("On the 21st of May, 1990.", "on the twenty first of may, nineteen ninety."),
    ("It rose 12% to 1,234.", "it rose twelve percent to one thousand two hundred thirty four."),
    ("\u201cQuoted\u201d \u2014 text\u2026", '"quoted" - text...'),
    ("In 2005 and 1905.", "in two thousand five and nineteen oh five."),
    # clock times
    ("It was 10:05 in Riverton.", "it was ten oh five in riverton."),
    ("At 7:30 and 3:45.", "at seven thirty and three forty five."),
    ("Lunch at 12:00, tea at 16:00.", "lunch at twelve o'clock, tea at sixteen hundred."),
    ("Up at 6:15 a.m. and out.", "up at six fifteen ay em and out."),
    ("Meet at 7pm. Then go.", "meet at seven pee em. then go."),
    ("We met at 7:30 a.m.", "we met at seven thirty ay em."),
    ("A ratio of 3:2.", "a ratio of three:two."),  # not a time: the colon stays
    # decades
    ("In the 1990s.", "in the nineteen nineties."),
    ("The '80s and the 60's.", "the eighties and the sixties."),
    ("The 1900s and 2010s.", "the nineteen hundreds and twenty tens."),
    # money in words, fractions, signs
    ("It cost $1.5 million.", "it cost one point five million dollars."),
    ("Add 1/2 cup and 3/4 spoon, 2/3 of it.", "add one half cup and three quarters spoon, "
                                              "two thirds of it."),
    ("Tom & Jerry, #1 fan, No. 5.", "tom and jerry, number one fan, number five."),
    ("I said no.", "i said no."),  # "No." is "number" only before a number
    # street, saint, and abbreviations that end a sentence
    ("She lives on Cedar St. The house is big.", "she lives on cedar street. the house is big."),
    ("We flew to St. Louis.", "we flew to saint louis."),
    ("It was on Elm Ave. and Maple St.!", "it was on elm avenue and maple street!"),
    ("Ms. Owens, Jr. and co., etc.", "miz owens, junior and company, et cetera."),
])
def test_normalize_expands_english(raw, expected):
    assert normalize(raw) == expected


def test_normalize_matches_the_demo_corpus_and_is_idempotent():
    # The demo corpus pairs raw text with the words its audio says: our reading must agree.
    for line in DEMO_METADATA.read_text(encoding="utf-8").splitlines():
        uid, raw, spoken, _ = line.split("|")
        ours = normalize(raw)
        assert ours == normalize(spoken).replace("-", " "), uid
        assert normalize(ours) == ours, uid  # synthesis normalises sentences split from it


def test_vocabulary_is_stable_and_reserved_ids():
    a = Vocabulary.build(Counter("hello world"))
    b = Vocabulary.build(Counter("world hello"))
    assert a == b and a.symbols[:2] == ["<pad>", "<eos>"]
    assert Vocabulary.from_json(a.to_json()) == a


def test_encode_appends_eos_and_reports_unknown():
    tp = TextProcessor(TextConfig(mode="characters"))
    syms, unknown = tp.symbols("Hi 🎉 there")
    assert "".join(syms) == "hi there" and unknown == ["🎉"]
    tp.vocab = Vocabulary.build(Counter(syms))
    ids = tp.encode("there hi")
    assert ids[-1] == EOS_ID and len(ids) == len("there hi") + 1
    with pytest.raises(UnknownCharacterError, match="'z'"):
        tp.encode("zebra")


def test_nearest_known_symbol():
    known = set("abcdefghijklmnopqrstuvwxyz ,.")
    assert nearest_known("é", known) == "e" and nearest_known("ï", known) == "i"
    assert nearest_known(":", known) == "," and nearest_known("?", known) == "."
    assert nearest_known("(", known) == "," and nearest_known("\"", known) == " "
    assert nearest_known("'", known) == ""  # "don't" reads "dont"
    assert nearest_known("ж", known) is None and nearest_known("ß", known) is None
    assert nearest_known("?", set("ab ,")) == ","  # no full stop known: the next best pause


def test_lenient_encode_warns_naming_the_character_and_keeps_the_sentence():
    tp = TextProcessor(TextConfig(mode="characters"), Vocabulary.build(Counter("abcdefghijklmnopqrstuvwxyz ,.")))
    notes = []
    ids = tp.encode("Café (naïve): yes!", warn=notes.append)
    assert "".join(tp.vocab.symbols[i] for i in ids[:-1]) == "cafe, naive, yes."
    assert len(notes) == 1 and "'é' as 'e'" in notes[0] and "'(' as ','" in notes[0]
    with pytest.raises(UnknownCharacterError, match="':'"):
        tp.encode("Café: yes")  # without a warning channel, unknown symbols stay an error
    long = "word " * 40 + "жук"
    with pytest.raises(UnknownCharacterError, match="'ж'") as err:
        tp.encode(long, warn=notes.append)
    assert long not in str(err.value) and len(str(err.value).split(" in ", 1)[1]) <= 82


def test_phoneme_mode_reads_espeak_ng_from_its_wheel():
    from myxtts.text import phonemes_missing

    missing = phonemes_missing()
    if missing:
        pytest.skip(missing)
    tp = TextProcessor(TextConfig(mode="phonemes"))
    syms, unknown = tp.symbols("The cat sat on 2 mats.")
    said = "".join(syms)
    # IPA, numbers spelled out before phonemisation, punctuation kept as pauses.
    assert "æ" in said and "t" in said and said.endswith(".") and not unknown
    assert "2" not in said and len(said.split()) == 6, said
