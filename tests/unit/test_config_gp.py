"""The Gaussian process over configurations (`hpo.search.surrogates.config_gp`): its
lengthscale fit follows the exact gradient of the marginal likelihood."""

import math

import numpy as np
from scipy.optimize import approx_fprime

from hpo.search.surrogates.config_gp import ConfigGP, best_and_latest
from hpo.search.surrogates.kde import Dimension


def mixed_rows(n=60, seed=0):
    """Rows over two floats, an unordered choice of three, an ordered one and a float that is
    inactive (NaN) in some rows, with a failed config among them."""
    rng = np.random.default_rng(seed)
    dims = [Dimension("c"), Dimension("c"), Dimension("u", np.array([0.0, 0.5, 1.0])),
            Dimension("o", np.array([0.0, 0.25, 0.5, 0.75, 1.0])), Dimension("c")]
    vectors = rng.random((n, len(dims)))
    vectors[:, 2] = rng.integers(0, 3, n) / 2
    vectors[:, 3] = rng.integers(0, 5, n) / 4
    vectors[:5, 4] = np.nan
    losses = (vectors[:, 0] - 0.3) ** 2 + 0.5 * (vectors[:, 2] == 0.5) + 0.1 * rng.random(n)
    losses[3] = np.inf
    return vectors, losses, dims


def test_the_likelihood_gradient_is_the_finite_difference_one_over_every_kind_of_dimension():
    vectors, losses, dims = mixed_rows()
    model = ConfigGP(vectors, losses, dims, np.zeros(len(dims)))
    rng = np.random.default_rng(1)
    for _ in range(4):
        log_scales = rng.uniform(math.log(0.05), math.log(5.0), len(dims))
        _, gradient = model._nll(log_scales)
        numeric = approx_fprime(log_scales, lambda z: model._nll(z)[0], 1e-6)
        assert np.allclose(gradient, numeric, rtol=1e-4, atol=1e-4), (gradient, numeric)


def test_the_fitted_lengthscales_sit_at_a_minimum_of_the_likelihood_and_find_the_parameter_that_matters():
    vectors, losses, dims = mixed_rows(n=80)
    model = ConfigGP(vectors, losses, dims, None)
    value, gradient = model._nll(model.log_scales)
    low, high = math.log(0.03), math.log(10.0)
    inside = (model.log_scales > low + 1e-6) & (model.log_scales < high - 1e-6)
    assert np.all(np.abs(gradient[inside]) < 0.05), gradient
    assert value < model._nll(np.full(len(dims), math.log(0.3)))[0]
    # The loss moves with the first float and the choice; the second float and the ordered
    # choice are noise, so their lengthscales come out longer.
    assert model.log_scales[0] < model.log_scales[1] and model.log_scales[0] < model.log_scales[3]


def test_the_rows_kept_are_the_best_half_as_a_stable_sort_ranks_them_then_the_latest_of_the_rest():
    # The definition: a stable sort's first half (a tie to the older row), then the latest
    # half of the others; best_and_latest finds the same by partition, ties, failures (+inf)
    # and NaN included.
    def by_sorting(scores, limit):
        if len(scores) <= limit:
            return np.arange(len(scores))
        order = np.argsort(scores, kind="stable")
        return np.concatenate([order[:limit // 2], np.sort(order[limit // 2:])[-(limit // 2):]])

    rng = np.random.default_rng(0)
    for case in range(2000):
        n, limit = int(rng.integers(1, 300)), int(rng.integers(2, 160))
        scores = rng.normal(size=n) if case % 4 == 0 else rng.integers(0, 5, size=n).astype(float)
        if case % 4 == 2:
            scores[rng.random(n) < 0.3] = np.inf
        if case % 4 == 3:
            scores[rng.random(n) < 0.6] = np.nan
        kept = best_and_latest(scores, limit)
        assert np.array_equal(kept, by_sorting(scores, limit)), (case, n, limit)
        assert len(kept) == (n if n <= limit else 2 * (limit // 2))
