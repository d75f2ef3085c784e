"""Keras optimizers from a trial's resolved hyperparameters."""

from __future__ import annotations

from typing import Any, Mapping

import keras

from hpo.errors import TrialFailed


def make_optimizer(params: Mapping[str, Any]) -> keras.optimizers.Optimizer:
    name = str(params.get("optimizer", "adam")).lower()
    lr = float(params.get("learning_rate", 1e-3))
    if name == "adam":
        return keras.optimizers.Adam(lr, beta_1=float(params.get("beta_1", 0.9)),
                                     beta_2=float(params.get("beta_2", 0.999)),
                                     epsilon=float(params.get("epsilon", 1e-7)))
    if name == "adamw":
        return keras.optimizers.AdamW(lr, weight_decay=float(params.get("weight_decay", 0.004)),
                                      beta_1=float(params.get("beta_1", 0.9)),
                                      beta_2=float(params.get("beta_2", 0.999)))
    if name == "sgd":
        return keras.optimizers.SGD(lr, momentum=float(params.get("momentum", 0.0)),
                                    nesterov=bool(params.get("nesterov", False)))
    if name == "rmsprop":
        return keras.optimizers.RMSprop(lr, rho=float(params.get("rho", 0.9)),
                                        momentum=float(params.get("momentum", 0.0)))
    raise TrialFailed(f"unknown optimizer {name!r}; expected adam, adamw, sgd or rmsprop")
