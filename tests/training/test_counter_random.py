"""Dropout's counter-based random numbers: uniform, unrelated across draws, the same in every
compile mode, and per-trial keys in one call give each trial's own draw."""

import numpy as np
import pytest
import tensorflow as tf

from hpo.models import counter_random
from hpo.models.layers import TunableDropout


def draw(shape, seed):
    return counter_random.uniform(shape, counter_random.seed_key(tf.constant(seed))).numpy()


def test_numbers_are_uniform_on_the_unit_interval():
    u = draw((256, 512), [7, 0]).ravel()
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.std() - (1 / 12) ** 0.5) < 0.005
    counts, _ = np.histogram(u, bins=16, range=(0, 1))
    expected = len(u) / 16
    assert ((counts - expected) ** 2 / expected).sum() < 50      # chi-square, 15 dof: p ~ 1e-5 at 50


@pytest.mark.parametrize("other", [[7, 1], [8, 0], [7, 2 ** 32 - 1]])
def test_neighbouring_seeds_give_unrelated_draws(other):
    first, second = draw((64, 128), [7, 0]).ravel(), draw((64, 128), other).ravel()
    assert abs(np.corrcoef(first, second)[0, 1]) < 0.05
    # Not a shifted copy of one stream either (what a key added to a counter alone would give).
    assert abs(np.corrcoef(first[1:], second[:-1])[0, 1]) < 0.05
    np.testing.assert_array_equal(draw((64, 128), [7, 0]), first.reshape(64, 128))


def test_one_key_per_trial_gives_each_trial_its_own_draw():
    seeds = tf.constant([[3, 0], [3, 1], [11, 5]])
    keys = tf.reshape(counter_random.seed_key(seeds), (3, 1, 1))
    together = counter_random.uniform((4, 6), keys).numpy()
    for k in range(3):
        np.testing.assert_array_equal(together[k], draw((4, 6), seeds[k].numpy()))


@pytest.mark.parametrize("jit", [False, True])
def test_tunable_dropout_keeps_the_expected_share_and_scale_in_every_mode(jit):
    layer = TunableDropout(0.3, seed=5)
    x = tf.ones((128, 256))
    apply = tf.function(lambda: layer(x, training=True), jit_compile=jit)
    out = apply().numpy()
    kept = out != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(out[kept], 1 / 0.7, rtol=1e-6)
    assert not np.array_equal(apply().numpy(), out)                # the generator advances per call
    eager = TunableDropout(0.3, seed=5)
    np.testing.assert_array_equal(eager(x, training=True).numpy(), out)   # XLA, graph and eager agree


def test_rate_zero_is_identity_in_training():
    x = tf.random.uniform((32, 16))
    np.testing.assert_array_equal(TunableDropout(0.0)(x, training=True).numpy(), x.numpy())
