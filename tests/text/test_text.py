from collections import Counter
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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
    # months before a day, units, temperatures and signs
    ("On Jan. 3rd and Sept. 21st.", "on january third and september twenty first."),
    ("Bake 1 kg for 3h 05m at 180°C.", "bake one kilogram for three hours five minutes at one hundred eighty "
                                       "degrees celsius."),
    ("It was -5°C, then 2.5 km at 100 km/h.", "it was minus five degrees celsius, then two point five "
                                              "kilometers at one hundred kilometers per hour."),
    ("A 16GB card, 5s and 3m.", "a sixteen gigabytes card, five seconds and three meters."),
    ("Pages 3-5 of (-3).", "pages three-five of (minus three)."),  # a range keeps its dash
    # acronyms letter by letter, unless said as words; shouted text stays words
    ("AI, TTS and GPUs at NASA over HTTP.", "a i, t t s and g p u's at nasa over h t t p."),
    ("Don't STOP, I said NO to the US.", "don't stop, i said no to the u s."),  # emphasis is words
    ("World War II.", "world war ii."),
    ("STOP THAT NOW.", "stop that now."),
    # addresses
    ("Mail jane.doe@example.com today.", "mail jane dot doe at example dot com today."),
    ("See https://example.org/docs.", "see example dot org slash docs."),
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


@given(st.text(max_size=40))
@example("   ")
@example("\u00a0\u00a0")
@example("\U0001F600 \u0416\u0438\u043b \x07")
@settings(max_examples=300, deadline=None)
def test_any_typed_text_is_spoken_or_refused_in_one_line(text):
    """Words, numbers, punctuation, Latin-1, emoji, other scripts, control characters, spaces
    alone: the front end either gives symbol ids or one clear line, never a traceback."""
    from myxtts.errors import UserError

    vocab = Vocabulary.build(Counter("abcdefghijklmnopqrstuvwxyz ,.!?'-\""))
    for tp in _processors(vocab):
        try:
            ids = tp.encode(text, warn=lambda msg: None)
        except UserError as e:
            assert str(e) and "\n" not in str(e)
        else:
            assert ids and ids[-1] == EOS_ID


def _processors(vocab):
    from myxtts.text import phonemes_missing

    yield TextProcessor(TextConfig(mode="characters"), vocab)
    if not phonemes_missing():  # the phoneme path has its own vocabulary of IPA symbols
        yield TextProcessor(TextConfig(mode="phonemes"), Vocabulary.build(Counter(_IPA)))


_IPA = "abdefhijklmnoprstuvwzæðŋɐɑɔəɚɛɜɡɪɹɾʃʊʌʒʔθˈˌː ,.!?'"
