import pytest

from myxtts.evaluate.metrics import cer, char_errors, edit_distance, normalize_for_scoring, wer, word_errors


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
