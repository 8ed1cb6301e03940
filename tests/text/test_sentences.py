from myxtts.text.sentences import split_sentences


def test_splits_at_sentence_ends_but_not_after_initials():
    text = 'hello there. how are you? fine! j. smith joined the u.s. army. "quoted." end'
    assert split_sentences(text, 100) == ["hello there.", "how are you?", "fine!",
                                          "j. smith joined the u.s. army.", '"quoted."', "end"]


def test_overlong_sentence_splits_at_clauses_then_words():
    parts = split_sentences("one, two, three, four; five six seven eight nine ten eleven", 20)
    assert parts == ["one, two, three,", "four;", "five six seven eight", "nine ten eleven"]
    assert all(len(p) <= 20 for p in parts)
    # A lone dash is not a part of its own; a single overlong word is kept whole.
    assert split_sentences("wait - what", 4) == ["wait -", "what"]
    assert split_sentences("supercalifragilistic", 5) == ["supercalifragilistic"]
    assert split_sentences("  ", 10) == []
