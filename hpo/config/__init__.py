"""Experiments: the typed sections (`schema`), YAML files (`yaml_source`), validation of a
plain mapping (`validation`) and the resume diff (`diff`).

    from hpo.config import load_experiment
    experiment = load_experiment("experiments/smoke.yaml", overrides=["search.max_trials=4"])
"""

from hpo.config.diff import RESUMABLE_CHANGES, binding_differences, diff_experiments, with_added_keys
from hpo.config.schema import (
    FUSE_AUTO_CEILING,
    DataConfig,
    EarlyStoppingConfig,
    ExecutionConfig,
    Experiment,
    ModelConfig,
    OutputConfig,
    SearchConfig,
    TrainingConfig,
)
from hpo.config.validation import experiment_from_dict, registered_names
from hpo.config.yaml_source import apply_overrides, load_experiment, parse_yaml, read_text

__all__ = ["FUSE_AUTO_CEILING", "RESUMABLE_CHANGES", "DataConfig", "EarlyStoppingConfig", "ExecutionConfig",
           "Experiment", "ModelConfig", "OutputConfig", "SearchConfig", "TrainingConfig", "apply_overrides",
           "binding_differences", "diff_experiments", "experiment_from_dict", "load_experiment", "parse_yaml",
           "read_text", "registered_names", "with_added_keys"]
