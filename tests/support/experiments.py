"""Experiment files that more than one test module writes: the searches that test them and
the bad-input catalogue (tests/support/bad_inputs.py), which varies them one key at a time."""

# The smoke study that tests/e2e/test_cli_e2e.py and test_study_outputs.py both read
# (tests/e2e/conftest.py `smoke_study`): BOHB without a climbing bracket, so that its 12 trials
# are 8 configurations (the report's importance needs 8), some of them promoted. Both modules
# are in the xdist group SMOKE_STUDY_GROUP, so one test process runs them and searches once
# (pytest-xdist --dist loadgroup): each `hpo search` process pays a TensorFlow import.
SMOKE_STUDY_GROUP = "smoke_study"
SMOKE_STUDY_TRIALS = 12
SMOKE_STUDY_ARGS = ["--set", "search.algorithm=bohb", "--set", f"search.max_trials={SMOKE_STUDY_TRIALS}",
                    "--set", "search.options={climbers: 0}"]

# The tests whose driver runs in the test process on the local backend with its Keras trainer
# (tests/e2e/test_fused_search.py, tests/e2e/test_local_executor.py). A driver process starts
# one forkserver, which imports TensorFlow once, and forks every later worker from it
# (hpo/executors/local.py `worker_start_context`); in one xdist group, one test process runs
# them and that import is paid once, not once in each test process that draws one.
LOCAL_FORKSERVER_GROUP = "local_forkserver"

# The pre-flight and the refusals on digits: a few seconds of real data, nothing trained.
DIGITS = """\
name: t
data: {dataset: digits}
space:
  units: {type: int, low: 8, high: 64}
search: {max_trials: 2, max_budget: 1}
"""

# DIGITS on 200 rows and one random trial: the pre-flight's checks at the least cost.
DIGITS_200 = """\
name: t
data: {dataset: digits, limit: 200}
space:
  units: {type: int, low: 8, high: 32}
search: {algorithm: random, max_trials: 1, max_budget: 1}
"""

# The study the lock tests lock (tests/support/study_lock_holder.py holds it from another process).
LOCKED = """\
name: locked
data: {dataset: digits, limit: 100}
space:
  units: {type: int, low: 8, high: 16}
search: {algorithm: random, max_trials: 2, max_budget: 1}
"""

# A loader of tests/support/data_tasks.py by name (str.format: loader=...).
DATA_TASK = """\
name: t
data: {{dataset: "tests.support.data_tasks:{loader}"}}
space:
  units: {{type: int, low: 8, high: 16}}
search: {{max_trials: 1, max_budget: 1}}
"""

# One sigmoid binary classifier ranked by val_auc (tests/training/test_engines.py).
ENGINES_BINARY = """\
name: engines
seed: 0
data:      {dataset: "tests.support.loss_tasks:binary", validation_split: 0.25, test_split: 0.1}
model:     {builder: "tests.support.loss_tasks:sigmoid_mlp", params: {units: 16}}
space:
  learning_rate: {type: float, low: 1e-2, high: 5e-2, log: true}
search:    {algorithm: random, objective: val_auc, min_budget: 2, max_budget: 2, max_trials: 1}
training:  {loss: binary_crossentropy, metrics: [accuracy, auc], batch_size: 32}
"""

# A regression with a custom metric (tests/training/test_loss_metrics.py; str.format: objective=...).
REGRESSION = """\
name: regression
seed: 0
data:      {{dataset: "tests.support.loss_tasks:regression", validation_split: 0.25, test_split: 0.1}}
model:     {{builder: "tests.support.loss_tasks:linear_output_mlp"}}
space:
  units:         {{type: int,    low: 8,    high: 32}}
  learning_rate: {{type: float,  low: 1e-2, high: 5e-2, log: true}}
search:    {{algorithm: random, objective: {objective}, min_budget: 3, max_budget: 3, max_trials: 3}}
training:  {{loss: mse, metrics: [mae, "tests.support.loss_tasks:half_absolute_error"], batch_size: 32, fuse: 3}}
"""

# Two objectives and a constraint on digits (tests/training/test_multi_objective_cli.py).
PARAMS_BOUND = 3000          # the mlp on digits: params = 75 * units + 10, so units <= 39 holds it
MULTI_OBJECTIVE = """\
name: mo
seed: 3
data: {dataset: digits, validation_split: 0.2, test_split: 0.1, limit: 300}
model: {builder: mlp, params: {layers: 1, dropout: 0.0}}
space:
  units: {type: int, low: 8, high: 64}
  learning_rate: {type: float, low: 1e-3, high: 3e-2, log: true}
search:
  algorithm: random
  objectives: [val_accuracy, {name: params, direction: minimize}]
  constraints: ["params <= %d"]
  min_budget: 1
  max_budget: 1
  max_trials: 6
training: {compile: graph, batch_size: 32}
""" % PARAMS_BOUND
