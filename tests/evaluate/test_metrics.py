import pytest

from myxtts.evaluate.metrics import ErrorRate, cer, char_errors, edit_distance, normalize_for_scoring, wer, word_errors


@pytest.mark.parametrize("written, spoken", [
    ("It was 10:05 in Riverton.", "it was ten oh five in riverton"),
    ("He paid $5 on the 3rd.", "He paid five dollars on the third"),
    ("The '80s were loud!", "the eighties were loud"),
    ("Don't STOP - ever.", "dont stop ever"),
    ("forty-two line Bible", "forty two line bible"),
])
def test_digits_and_words_punctuation_and_case_normalise_alike(written, spoken):
    assert normalize_for_scoring(written) == normalize_for_scoring(spoken)
    assert wer([written], [spoken]) == 0.0 and cer([written], [spoken]) == 0.0


def test_normalised_text_is_bare_words():
    assert normalize_for_scoring('  "Hello,"  said   Dr. Smith; 1455.  ') == \
        "hello said doctor smith fourteen fifty five"


def test_edit_distance_counts_each_kind_of_edit():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance([], ["a", "b"]) == 2
    assert edit_distance(["a", "b"], []) == 2
    assert edit_distance(["a", "b", "c"], ["a", "c"]) == 1


def test_word_and_character_rates():
    assert word_errors("the cat sat", "the bat sat").rate == pytest.approx(1 / 3)
    assert char_errors("the cat sat", "the bat sat").rate == pytest.approx(1 / 11)
    assert wer(["the cat sat"], [""]) == 1.0
    assert wer(["the cat"], ["the the the cat cat"]) == pytest.approx(3 / 2)  # insertions exceed 1


def test_corpus_rate_weighs_sentences_by_length():
    # 1 error in 1 word and 0 in 9 words: 1/10, not the mean of per-sentence rates (0.5)
    assert wer(["hello", "one two three four five six seven eight nine"],
               ["yellow", "one two three four five six seven eight nine"]) == pytest.approx(0.1)


ZWNJ = "\u200c"


@pytest.mark.parametrize("written, heard", [
    ("او ۱۱ کتاب خواند.", "او یازده کتاب خواند"),  # Persian digits: numbers in Persian words
    ("او 11 کتاب خواند.", "او یازده کتاب خواند"),  # ASCII digits alike
    ("ساعت ۸:۳۰ رسید", "ساعت هشت و سی دقیقه رسید"),  # the Persian reader's clock times
    (f"کتاب{ZWNJ}ها", "کتاب ها"),  # the non-joiner is a word boundary, as a space
    ("مي\u200cروم", "می روم"),  # Arabic yeh typed for Persian's
    ("كتاب", "کتاب"),  # Arabic kaf typed for Persian's
    ("کِتابْ خوبٌ", "کتاب خوب"),  # harakat: short vowels the speech has, spelling seldom writes
    ("کتـــاب", "کتاب"),  # tatweel only stretches a word on the page
    ("حسین، امشب کجا می‌رسی؟", "حسین امشب کجا می رسی"),  # the script's own punctuation
])
def test_persian_spellings_of_one_sentence_score_alike(written, heard):
    assert normalize_for_scoring(written, "fa") == normalize_for_scoring(heard, "fa")
    assert wer([written], [heard], "fa") == 0.0 and cer([written], [heard], "fa") == 0.0


def test_persian_words_joined_without_the_non_joiner_are_one_word():
    assert normalize_for_scoring(f"کتاب{ZWNJ}ها را ۲ بار خواند", "fa") == "کتاب ها را دو بار خواند"
    assert normalize_for_scoring("کتابها", "fa") == "کتابها"
    assert word_errors(f"کتاب{ZWNJ}ها", "کتابها", "fa") == ErrorRate(edits=2, length=2)  # two words heard as one
    assert char_errors(f"کتاب{ZWNJ}ها", "کتابها", "fa") == ErrorRate(edits=1, length=7)  # the boundary missing


def test_english_scoring_is_the_english_normalisers():
    # the Persian fold and reader touch English text nowhere: "11" in English words, no ZWNJ boundary
    assert normalize_for_scoring(f"Book{ZWNJ}s 11", "en-us") == normalize_for_scoring(f"Book{ZWNJ}s 11") == \
        "books eleven"
    assert normalize_for_scoring("11", "en-gb") == "eleven"


def test_a_corpus_of_two_languages_scores_each_sentence_in_its_own():
    refs, hyps = ["It cost 11 dollars.", "او ۱۱ کتاب خواند."], ["it cost eleven dollars", "او یازده کتاب خواند"]
    assert wer(refs, hyps, ["en-us", "fa"]) == 0.0 and cer(refs, hyps, ["en-us", "fa"]) == 0.0
    assert wer(refs, hyps, "fa") > 0  # Persian words for the English sentence's number
