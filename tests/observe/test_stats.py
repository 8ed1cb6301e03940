import math

import pytest

from myxtts.observe import stats
from myxtts.observe.stats import series_text, summarize, thresholds_text


def test_empty_series_is_not_invented():
    assert summarize([]) is None
    assert summarize([None, float("nan")]) is None


def test_failed_reads_are_dropped_not_zero():
    s = summarize([90, None, 90, float("nan"), 90])
    assert s.n == 3 and s.mean == 90 and s.verdict == "steady"


def test_moments_and_shares():
    s = summarize([0, 100] * 50)
    assert s.mean == 50 and s.median == 50 and s.below50_pct == 50
    assert math.isclose(s.cov_pct, 100.0)
    assert s.verdict == "oscillating"


@pytest.mark.parametrize("values, verdict", [
    ([4.9] * 10, "idle"),
    ([0, 9] * 10, "idle"),                 # mean 4.5: noise near zero is idle, not oscillating
    ([7, 13] * 10, "starved"),            # CoV 30 % but sd 3 points: flat and low, not swinging
    ([2, 40] * 10, "oscillating"),        # 2-40 % swings
    ([45] * 10, "starved"),
    ([60, 40, 40, 60, 40] * 4, "starved"),  # mean 48 %
    ([95, 40, 40, 95] * 5, "oscillating"),
    ([95, 93, 97, 96] * 5, "steady"),
])
def test_verdicts(values, verdict):
    assert summarize(values).verdict == verdict


def test_thresholds_are_stated_from_the_constants():
    text = thresholds_text()
    for c in (stats.IDLE_MEAN_PCT, stats.OSCILLATING_COV_PCT, stats.OSCILLATING_MIN_STD, stats.STARVED_MEAN_PCT):
        assert f"{c:g}" in text
    assert series_text(summarize([95, 45] * 2)).endswith("below 50 % for 50 % of the time")
