"""The HParams dashboard's domains: a choice whose values mix types (`[0, 0.5]`, `[16, "big"]`)
is written in one type, and each trial's row reads its value in that type."""

from hpo.space import SearchSpace
from hpo.study.tensorboard_logs import INACTIVE, trial_hparams, write_hparams_config

SPACE = SearchSpace.from_dict({
    "dropout": {"type": "choice", "values": [0, 0.5]},
    "units": {"type": "choice", "values": [16, "big"]},
    "activation": {"type": "choice", "values": ["relu", "tanh"]},
    "layers": {"type": "choice", "values": [1, 2]},
    "lr": {"type": "float", "low": 1e-3, "high": 1e-1, "log": True},
})


def domains(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2
    search = EventAccumulator(str(logdir / "search"), size_guidance={"tensors": 0}).Reload()
    content = search.SummaryMetadata("_hparams_/experiment").plugin_data.content
    infos = plugin_data_pb2.HParamsPluginData.FromString(content).experiment.hparam_infos
    out = {}
    for info in infos:
        values = info.domain_discrete.values
        out[info.name] = [v.WhichOneof("kind") for v in values], [getattr(v, v.WhichOneof("kind")) for v in values]
    return out


def test_a_choice_of_mixed_types_is_one_type_in_the_dashboard_and_in_every_trial_row(tmp_path):
    write_hparams_config(tmp_path, SPACE, "val_accuracy")
    got = domains(tmp_path)
    assert got["dropout"] == (["number_value"] * 2, [0.0, 0.5])
    assert got["units"] == (["string_value"] * 2, ["16", "big"])
    assert got["activation"] == (["string_value"] * 2, ["relu", "tanh"])
    assert got["layers"] == (["number_value"] * 2, [1.0, 2.0])
    row = trial_hparams(SPACE, {"dropout": 0, "units": 16, "activation": "relu", "layers": 2, "lr": 0.01},
                        trial_id="trial_0000")
    assert row == {"dropout": 0.0, "units": "16", "activation": "relu", "layers": 2, "lr": 0.01,
                   "trial_id": "trial_0000"}
    assert type(row["dropout"]) is float and type(row["layers"]) is int


def test_an_inactive_choice_is_marked_in_the_row(tmp_path):
    space = SearchSpace.from_dict({"opt": {"type": "choice", "values": ["adam", "sgd"]},
                                   "nesterov": {"type": "choice", "values": [0, 0.5], "when": {"opt": "sgd"}}})
    assert trial_hparams(space, {"opt": "adam"})["nesterov"] == INACTIVE
    assert trial_hparams(space, {"opt": "sgd", "nesterov": 0})["nesterov"] == 0.0
