"""The searcher benchmark's ratio interval: what the per-problem lines of the report rest on."""

import numpy as np
import pytest

from benchmarks.searchers import Outcome, ratio_interval


def outcomes(finals):
    return [Outcome({1.0: float(v)}, 0.0) for v in finals]


def test_the_interval_holds_the_ratio_of_means_and_repeats():
    rng = np.random.default_rng(1)
    ours, peer = rng.gamma(2.0, 0.05, size=40), rng.gamma(2.0, 0.06, size=40)
    low, high = ratio_interval(outcomes(ours), outcomes(peer))
    assert low < ours.mean() / peer.mean() < high
    assert (low, high) == ratio_interval(outcomes(ours), outcomes(peer))


def test_the_interval_narrows_with_more_seeds_and_vanishes_without_spread():
    rng = np.random.default_rng(2)
    few = ratio_interval(outcomes(rng.gamma(2.0, 0.05, 10)), outcomes(rng.gamma(2.0, 0.05, 10)))
    many = ratio_interval(outcomes(rng.gamma(2.0, 0.05, 400)), outcomes(rng.gamma(2.0, 0.05, 400)))
    assert many[1] - many[0] < few[1] - few[0]
    low, high = ratio_interval(outcomes([0.2] * 20), outcomes([0.1] * 20))
    assert low == pytest.approx(2.0) and high == pytest.approx(2.0)


def test_a_zero_peer_mean_counts_as_the_point_ratio_does():
    assert ratio_interval(outcomes([0.0] * 5), outcomes([0.0] * 5)) == (1.0, 1.0)
    assert ratio_interval(outcomes([0.1] * 5), outcomes([0.0] * 5)) == (np.inf, np.inf)
