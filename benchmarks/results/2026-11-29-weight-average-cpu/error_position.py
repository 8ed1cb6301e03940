"""Where in a sentence Whisper's word errors fall: both sides as scoring reads them
(``metrics.normalize_for_scoring``), each reference word aligned to the heard words by edit
distance and counted wrong when substituted or dropped (an inserted word is charged to none),
by its position (first, second, last, the rest). Reads trial folders' heard.json ([reference,
heard] pairs).

    PYTHONPATH=. python error_position.py 'TRIALS/lr3-s*/heard.json' ...
"""
import glob
import json
import sys

from myxtts.evaluate.metrics import normalize_for_scoring


def wrong_words(ref: list[str], hyp: list[str]) -> list[bool]:
    """Per reference word: substituted or dropped on one least-edit alignment."""
    n, m = len(ref), len(hyp)
    d = [[i + j if i * j == 0 else 0 for j in range(m + 1)] for i in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]))
    wrong, i, j = [False] * n, n, m
    while i > 0:
        if j > 0 and d[i][j] == d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            wrong[i - 1] = ref[i - 1] != hyp[j - 1]
            i, j = i - 1, j - 1
        elif d[i][j] == d[i - 1][j] + 1:
            wrong[i - 1] = True
            i -= 1
        else:
            j -= 1
    return wrong


def place(k: int, n: int) -> str:
    return "first" if k == 0 else "second" if k == 1 else "last" if k == n - 1 else "middle"


for pattern in sys.argv[1:]:
    counts: dict[str, list[int]] = {}
    for path in glob.glob(pattern):
        for ref, heard in json.load(open(path)):
            words = normalize_for_scoring(ref).split()
            for k, bad in enumerate(wrong_words(words, normalize_for_scoring(heard).split())):
                c = counts.setdefault(place(k, len(words)), [0, 0])
                c[0] += bad
                c[1] += 1
    print(pattern, {k: f"{w}/{n}={w / n:.2f}" for k, (w, n) in counts.items()})
