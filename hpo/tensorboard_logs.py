"""TensorBoard output: per-trial curves and HParams rows, and the study-wide HParams config.

Layout under <study>/tensorboard/: the `hparams_config` summary at the root, and one run
folder per configuration (`trial_0007`, named after the config's first trial), which
promotions keep extending so a config's curve stays one line with step = epoch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from hpo.space import ChoiceParam, FloatParam, IntParam, SearchSpace

OBJECTIVE_TAG = "hpo/objective"
BUDGET_TAG = "hpo/budget"
INACTIVE = "inactive"


def run_name(lineage: int) -> str:
    return f"trial_{lineage:04d}"


def hparam_value(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str)) else str(value)


def write_hparams_config(logdir: str | Path, space: SearchSpace, objective: str) -> None:
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp

    hparams = []
    for p in space:
        if isinstance(p, ChoiceParam):
            domain = hp.Discrete([hparam_value(v) for v in p.values])
        elif isinstance(p, IntParam):
            domain = hp.IntInterval(p.low, p.high)
        elif isinstance(p, FloatParam):
            domain = hp.RealInterval(p.low, p.high)
        else:  # pragma: no cover - every Param kind is listed above
            raise TypeError(p)
        hparams.append(hp.HParam(p.name, domain))
    metrics = [hp.Metric(OBJECTIVE_TAG, display_name=f"objective ({objective})",
                         description=f"{objective} at the end of the trial's budget; what the search ranks on"),
               hp.Metric(BUDGET_TAG, display_name="budget (epochs)",
                         description="epochs this configuration has been trained for")]
    with tf.summary.create_file_writer(str(logdir)).as_default():
        hp.hparams_config(hparams=hparams, metrics=metrics)


def write_trial_hparams(writer, run: str, hparams: Mapping[str, Any]) -> None:
    from tensorboard.plugins.hparams import api as hp
    with writer.as_default():
        hp.hparams({k: hparam_value(v) for k, v in hparams.items()}, trial_id=run)


def write_scalars(writer, step: int, scalars: Mapping[str, float]) -> None:
    import tensorflow as tf
    with writer.as_default():
        for tag, value in scalars.items():
            tf.summary.scalar(tag, value, step=step)
    writer.flush()
