"""Each language read in its own words: text in → what is said (normalised text), and its
phonemes carry no espeak-ng language-switch flags, keep the script's pauses and drop nothing."""
import re
from collections import Counter

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from myxtts.config import TextConfig
from myxtts.errors import UserError
from myxtts.text import TextProcessor, Vocabulary, phonemes_missing
from myxtts.text.languages import normalize
from myxtts.text.normalize import normalize as normalize_english

ZWNJ = "\u200c"

EN = [
    ("I am 25 and went to Tehran in 2024.", "i am twenty five and went to tehran in twenty twenty four."),
    ("Dr. Smith paid $5.50, didn't he?", "doctor smith paid five dollars and fifty cents, didn't he?"),
    ("Meet at 7:30 on Jan. 3rd.", "meet at seven thirty on january third."),
]
FA = [
    ("من ۲۵ سال دارم و در سال ۱۴۰۳ به تهران رفتم.",
     "من بیست و پنج سال دارم و در سال هزار و چهارصد و سه به تهران رفتم."),
    ("سلام، حال شما چطور است؟", "سلام, حال شما چطور است?"),
    (f"کتاب{ZWNJ}ها را خواندم؛ «خوب» بود.", f'کتاب{ZWNJ}ها را خواندم; "خوب" بود.'),
    ("قیمت ۳٫۵ دلار با ۲۰٪ تخفیف است.", "قیمت سه و نیم دلار با بیست درصد تخفیف است."),
    ("ساعت ۸:۳۰ روز ۱۴۰۳/۰۵/۱۲ رسید.",
     "ساعت هشت و سی دقیقه روز دوازدهم مرداد هزار و چهارصد و سه رسید."),
    (f"برای ۳م و ۳۰ام و ۲۵مین بار، ۲۰{ZWNJ}امین روز.",
     f"برای سوم و سی{ZWNJ}ام و بیست و پنجمین بار, بیستمین روز."),
    ("دما -۵ و ۱,۲۵۰ تومان و ١٢٫٠٥ متر.",
     "دما منفی پنج و هزار و دویست و پنجاه تومان و دوازده و پنج صدم متر."),
    ("ركعت يك", "رکعت یک"),  # Arabic kaf and yeh typed for Persian's own
]
DE = [
    ("Am 3. Mai 2024 um 14:30 Uhr kostete es 5,50 €.",
     "am dritten mai zweitausendvierundzwanzig um vierzehn uhr dreißig kostete es fünf euro "
     "und fünfzig cent."),
    ("Heute ist der 03.05.2024, z. B. für 1.250 Leute.",
     "heute ist der dritte mai zweitausendvierundzwanzig, zum beispiel für "
     "eintausendzweihundertfünfzig leute."),
    ("Es sind 25 % und 3,14 Meter, im Jahr 1990 usw.",
     "es sind fünfundzwanzig prozent und drei komma eins vier meter, im jahr "
     "neunzehnhundertneunzig und so weiter."),
    ("Es kostet 1 Euro, $3,99 und -5 Grad?", "es kostet ein euro, drei dollar und "
                                             "neunundneunzig cent und minus fünf grad?"),
    ("Um 1:00 Uhr, Nr. 5!", "um ein uhr, nummer fünf!"),
]
TABLES = [("en-us", raw, said) for raw, said in EN] + [("fa", raw, said) for raw, said in FA] + [
    ("de", raw, said) for raw, said in DE]
_PAUSES = re.compile(r"[,;?!.]")


@pytest.mark.parametrize("language, raw, said", TABLES)
def test_text_is_said_in_its_language(language, raw, said):
    assert normalize(raw, language) == said
    assert not re.search(r"\d", said)  # every number in words
    assert normalize(said, language) == said  # synthesis normalises sentences split from it


@pytest.mark.parametrize("raw", [raw for raw, _ in EN + FA + DE])
def test_english_is_read_exactly_as_before(raw):
    # English keeps its own normaliser, whatever the text's script (Persian digits read in English).
    assert normalize(raw, "en-us") == normalize_english(raw)


@pytest.mark.parametrize("language, raw, said", TABLES)
def test_phonemes_keep_the_pauses_and_carry_no_language_flags(language, raw, said):
    if phonemes_missing():
        pytest.skip(phonemes_missing())
    symbols, dropped = TextProcessor(TextConfig(mode="phonemes", language=language)).symbols(raw)
    phonemes = "".join(symbols)
    assert not dropped, dropped  # no script punctuation or phoneme lost on the way
    assert _PAUSES.findall(phonemes) == _PAUSES.findall(said)  # each pause and question kept
    assert "(" not in phonemes and not re.search(r"\d", phonemes), phonemes


def test_a_foreign_word_is_phonemised_without_flags():
    if phonemes_missing():
        pytest.skip(phonemes_missing())
    phonemes = "".join(TextProcessor(TextConfig(language="fa")).symbols("سلام ok خوبم")[0])
    # espeak-ng reads "ok" in English: once "(en)" before it and "(fa)" after it came through.
    assert "(" not in phonemes and "en" not in phonemes and "fa" not in phonemes
    assert "salˈɑm" in phonemes and len(phonemes.split()) == 3, phonemes


def test_the_zero_width_non_joiner_is_kept_because_espeak_ng_reads_it():
    tp = TextProcessor(TextConfig(mode="characters", language="fa"))
    assert ZWNJ in tp.symbols(f"خانه{ZWNJ}ام")[0] and tp.symbols(f"خانه{ZWNJ}ام")[1] == []
    if phonemes_missing():
        return
    tp = TextProcessor(TextConfig(language="fa"))
    with_it, without = (tp.symbols(w)[0] for w in (f"خانه{ZWNJ}ام", "خانهام"))
    assert with_it != without  # "my house" vs a misread single word


def test_one_processor_reads_each_call_in_the_language_it_names():
    tp = TextProcessor(TextConfig(mode="characters"))
    assert tp.normalize("۲۵ سال") == "twenty five سال"  # the configured language: English
    assert tp.normalize("۲۵ سال", language="fa") == "بیست و پنج سال"
    tp.vocab = Vocabulary.build(Counter(tp.normalize("drei, vier", language="de")))
    ids = tp.encode("3, 4", language="de")
    assert "".join(tp.vocab.symbols[i] for i in ids[:-1]) == "drei, vier"


def test_other_scripts_punctuation_and_digits_without_a_reader_of_their_own():
    # Arabic: num2words' cardinals; Mandarin: no number words here, so espeak-ng reads the digit.
    assert normalize("مرحبا، كيف حالك؟ عندي ٤٥ كتابا.", "ar") == (
        "مرحبا, كيف حالك? عندي خمسة و أربعون كتابا.")
    assert normalize("你好。我有2个、谢谢！", "cmn") == "你好.我有2个,谢谢!"
    if phonemes_missing():
        return
    symbols, dropped = TextProcessor(TextConfig(language="cmn")).symbols("我有2个。")
    assert not dropped and "".join(symbols).endswith(".") and "2" not in symbols


def test_a_language_nobody_knows_is_one_line_naming_it():
    with pytest.raises(UserError, match="unknown language code 'xx'") as err:
        TextProcessor(TextConfig(mode="characters", language="xx"))
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="'xx'"):
        TextProcessor(TextConfig(mode="characters")).normalize("hi", language="xx")


def test_a_language_espeak_ng_lacks_reads_as_characters_and_phonemes_say_so():
    # Tetum: num2words has its numbers, espeak-ng no voice.
    tp = TextProcessor(TextConfig(mode="characters", language="tet"))
    assert tp.normalize("1") == "ida"
    if phonemes_missing():
        return
    with pytest.raises(UserError, match="no voice for language 'tet'.*text.mode=characters") as err:
        TextProcessor(TextConfig(mode="phonemes", language="tet"))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("language", ["fa", "de", "es"])
def test_a_number_too_long_to_name_is_read_digit_by_digit(language):
    said = normalize("۱" * 40, language)
    assert not re.search(r"\d", said) and len(said.split()) >= 40


@given(st.text(alphabet=st.sampled_from("0123456789۰۱۲۵٫٬٪،؛؟.,:/-%€$ ابپتکیمه\u200cMaiUhrz. B"),
               max_size=30))
@example("1403/13/40 31.02. 99:99 3,-- €")
@settings(max_examples=200, deadline=None)
def test_any_persian_or_german_text_is_spoken_or_refused_in_one_line(text):
    for language in ("fa", "de"):
        tp = TextProcessor(TextConfig(mode="characters", language=language),
                           Vocabulary.build(Counter("abcdefghijklmnopqrstuvwxyzäöüß ,.?;!\"")))
        try:
            ids = tp.encode(text, warn=lambda msg: None)
        except UserError as e:
            assert str(e) and "\n" not in str(e)
        else:
            assert ids
