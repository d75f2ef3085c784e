"""The multi-objective benchmark's real problem: the digits MLP table and how a config reads it."""

import math

import pytest

from benchmarks import digits_mlp


def test_the_table_holds_every_grid_config_with_a_curve_and_its_size():
    curves, header = digits_mlp.load()
    assert header["epochs"] == digits_mlp.EPOCHS and header["seconds"] > 0
    assert len(curves) == math.prod(len(v) for v in digits_mlp.GRID.values())
    sizes = {digits_mlp.params_of(layers, units) for layers in digits_mlp.GRID["layers"]
             for units in digits_mlp.GRID["units"]}
    for params, curve in curves.values():
        assert params in sizes
        assert len(curve) == digits_mlp.EPOCHS and all(0 <= a <= 1 for a in curve)
    # Real training: the best configs learn the digits, and most improve with epochs.
    assert max(curve[-1] for _, curve in curves.values()) > 0.95
    assert sum(curve[-1] > curve[0] for _, curve in curves.values()) > 0.8 * len(curves)


def test_a_config_reads_the_nearest_grid_point_at_its_epoch():
    config = {"layers": 2, "units": 50, "lr": 0.004, "alpha": 2e-4, "batch_size": 256}
    point = digits_mlp.grid_point(config)
    assert point == {"layers": 2, "units": 64, "lr": 3e-3, "alpha": 1e-3, "batch_size": 256}
    params, curve = digits_mlp.load()[0][digits_mlp._key(point)]
    assert params == digits_mlp.params_of(2, 64) == 64 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10
    assert digits_mlp.evaluate(config, 9) == (1 - curve[8], params)
    assert digits_mlp.evaluate(config, 27.0) == (1 - curve[26], params)


def test_the_command_reproduces_the_stored_curves(tmp_path):
    # The grid's first config for two epochs: the same seed, the same data split. Another
    # BLAS or scikit-learn may flip a borderline prediction or two of the 540.
    first = {name: values[:1] for name, values in digits_mlp.GRID.items()}
    table = digits_mlp.generate(tmp_path / "t.json", grid=first, epochs=2)
    stored = digits_mlp.load()[0][digits_mlp._key(table["rows"][0]["config"])]
    assert table["rows"][0]["val_accuracy"] == pytest.approx(stored[1][:2], abs=3 / 540)
    assert table["rows"][0]["params"] == stored[0]
