"""A program's variables set or read in one traced call (hpo/training/bulk_variables.py)."""

import keras
import numpy as np
import pytest

from hpo.config import TrainingConfig
from hpo.errors import TrialFailed
from hpo.models import get_builder
from hpo.training.bulk_variables import BulkAssign, BulkRead


@pytest.mark.parametrize("trace_seconds, traced", [(0.0, True), (1e9, False)])
def test_assigns_targets_and_zeroes_the_rest_eager_or_traced(trace_seconds, traced):
    weights = keras.Variable(np.ones((3, 2), "float32"))
    steps = keras.Variable(np.int64(7))
    slot = keras.Variable(np.full((4,), 5.0, "float32"))
    both = keras.Variable(np.float32(2.0))       # assigned and listed as zeroed: the assignment wins
    assign = BulkAssign([weights, steps, both], zeroed=[slot, both], trace_seconds=trace_seconds)
    for call in range(3):                         # eager first; traced after it when a trace is free
        slot.assign(np.full((4,), 5.0, "float32"))
        assign([np.arange(6, dtype="float32").reshape(3, 2) + call, np.int64(3 + call), np.float32(0.5 + call)])
        np.testing.assert_array_equal(np.asarray(weights.value), np.arange(6).reshape(3, 2) + call)
        assert int(steps.value) == 3 + call and float(both.value) == 0.5 + call
        np.testing.assert_array_equal(np.asarray(slot.value), np.zeros(4))
    assert assign.traced == traced


@pytest.mark.parametrize("values", [
    [np.zeros((2, 3), "float32"), np.int64(1)],      # wrong shape
    [np.zeros((3, 2), "float32")],                   # one value missing
])
@pytest.mark.parametrize("traced", [False, True])
def test_a_value_that_does_not_fit_raises_and_assigns_nothing(values, traced):
    weights = keras.Variable(np.ones((3, 2), "float32"))
    steps = keras.Variable(np.int64(7))
    slot = keras.Variable(np.full((4,), 5.0, "float32"))
    assign = BulkAssign([weights, steps], zeroed=[slot], trace_seconds=0.0 if traced else 1e9)
    if traced:
        assign([np.ones((3, 2), "float32"), np.int64(7)])
        slot.assign(np.full((4,), 5.0, "float32"))
        assert assign.traced
    with pytest.raises((ValueError, TypeError)):
        assign(values)
    np.testing.assert_array_equal(np.asarray(weights.value), np.ones((3, 2)))
    assert int(steps.value) == 7
    np.testing.assert_array_equal(np.asarray(slot.value), np.full(4, 5.0))


def test_a_program_refuses_weights_that_do_not_fit_it_with_a_clear_error(digits):
    from hpo.training.trainer import Trainer

    trainer = Trainer(digits, get_builder("mlp"), TrainingConfig(compile="graph"), {}, "/device:CPU:0")
    params = trainer.resolve({"layers": 1, "units": 16})
    program = trainer.program_for(params, seed=1)
    values = [np.asarray(v.value) for v in program.model.variables]
    with pytest.raises(TrialFailed, match="deterministic in its parameters"):
        program.start_trial([np.zeros((3, 3), "float32")] + values[1:], params)
    with pytest.raises(TrialFailed, match="deterministic in its parameters"):
        program.start_trial(values[:-1], params)
    program.train_steps(trainer.timing_batch(int(params["batch_size"]), seed=1))
    assert any(np.any(np.asarray(v.value)) for v in program.optimizer.state)
    # The values that fit: weights as given, slots zeroed, the new learning rate in place.
    program.start_trial(values, {**params, "learning_rate": 0.125})
    for variable, value in zip(program.model.variables, values):
        np.testing.assert_array_equal(np.asarray(variable.value), value)
    assert program.optimizer.learning_rate == 0.125
    assert all(not np.any(np.asarray(v.value)) for v in program.optimizer.state)


@pytest.mark.parametrize("traced", [False, True])
def test_a_bulk_read_is_a_snapshot_of_every_variable(traced):
    weights = keras.Variable(np.arange(6, dtype="float32").reshape(3, 2))
    steps = keras.Variable(np.int64(4))
    read = BulkRead([weights, steps], trace_seconds=0.0 if traced else 1e9)
    if traced:
        read.read()
        assert read.traced
    first = read.read()
    np.testing.assert_array_equal(first[0], np.arange(6).reshape(3, 2))
    assert first[1] == 4 and first[1].dtype == np.int64
    weights.assign(np.zeros((3, 2), "float32"))
    steps.assign(np.int64(5))
    # What was read stays as it was; a new read sees the new values.
    np.testing.assert_array_equal(first[0], np.arange(6).reshape(3, 2))
    second = read.read()
    assert not second[0].any() and second[1] == 5


def test_a_programs_host_state_is_what_its_model_and_optimizer_hold(digits, monkeypatch):
    from hpo.training import bulk_variables
    from hpo.training.trainer import Trainer

    monkeypatch.setattr(bulk_variables, "TRACE_SECONDS", 0.0)
    trainer = Trainer(digits, get_builder("mlp"), TrainingConfig(compile="graph"), {}, "/device:CPU:0")
    params = trainer.resolve({"layers": 1, "units": 16})
    program = trainer.program_for(params, seed=1)
    program.train_steps(trainer.timing_batch(int(params["batch_size"]), seed=1))
    eager = program.host_state()
    weights, optimizer_values = program.host_state()             # the traced read
    assert program.reader.traced
    for a, b in zip(eager[0] + eager[1], weights + optimizer_values, strict=True):
        np.testing.assert_array_equal(a, b)
    expected = [program.model.variables, program.optimizer.optimizer.variables]
    for got, variables in zip((weights, optimizer_values), expected, strict=True):
        assert len(got) == len(variables)
        for value, variable in zip(got, variables):
            np.testing.assert_array_equal(value, np.asarray(variable.value))
    assert any(np.any(v) for v in optimizer_values[1:])       # trained: the slots are not all zero
