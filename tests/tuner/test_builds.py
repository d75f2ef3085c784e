"""How often a search runs the user's build_model: once per config it trains, not once per use."""

import json

import pytest

import hpo.keras_tuner as kt
from hpo.tuner import driver
from tests.tuner.conftest import conditional_cnn

pytestmark = pytest.mark.slow      # searches, in the slow set


def test_each_config_is_built_once_to_train_it_and_promotions_build_nothing(tmp_path, digits, monkeypatch):
    built = []

    def counted(hp):
        built.append(json.dumps(dict(hp.values), sort_keys=True))
        return conditional_cnn(hp)

    run = driver.run

    def training_only(*args, **kwargs):       # discovery and the checks before the study build too
        built.clear()
        return run(*args, **kwargs)

    monkeypatch.setattr(driver, "run", training_only)
    x, y, xv, yv = digits
    tuner = kt.Hyperband(counted, objective="val_accuracy", max_epochs=3, factor=3, seed=0,
                         directory=str(tmp_path), project_name="p")
    tuner.search(x, y, validation_data=(xv, yv), batch_size=32, verbose=0)
    configs = {json.dumps({k: v for k, v in t.hyperparameters.values.items() if not k.startswith("tuner/")},
                          sort_keys=True) for t in tuner.oracle.trials.values()}
    assert len(tuner.oracle.trials) > len(configs)         # some trials are promotions
    assert sorted(built) == sorted(set(built)) and len(built) == len(configs)
    assert "stateless initialisation" not in (tmp_path / "p" / "hpo.log").read_text()
