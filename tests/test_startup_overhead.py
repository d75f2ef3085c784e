"""`startup_seconds`: time to the first training step plus the first call's excess over its steps."""

import pytest

from hpo.training.epoch_loop import startup_overhead


def test_the_first_calls_own_steps_come_off_at_the_later_calls_rate():
    # First call: 8 steps in 1.0 s; later calls 8 steps in 0.08 s and a last call of 4 in 0.04 s.
    calls = [(1.0, 8), (0.08, 8), (0.08, 8), (0.04, 4)]
    assert startup_overhead(1.5, calls) == pytest.approx(1.5 - 8 * 0.01)


def test_a_first_call_faster_than_the_rest_never_goes_below_the_wait_before_it():
    assert startup_overhead(0.5, [(0.05, 8), (0.2, 8)]) == pytest.approx(0.45)


def test_an_epoch_of_one_call_counts_it_all():
    assert startup_overhead(2.0, [(1.5, 8)]) == 2.0


@pytest.mark.usefixtures("tf_logical_cpus")
def test_auto_times_the_modes_on_a_few_steps_per_call(digits):
    """A slow mode's timed calls are paid in full (XLA:CPU convolutions run many times slower
    than graph mode's here), so `compile: auto` times calls of MEASURE_STEPS steps, not steps_per_call."""
    from hpo.config import TrainingConfig
    from hpo.models import get_builder
    from hpo.training.trainer import MEASURE_STEPS, Trainer

    trainer = Trainer(digits, get_builder("mlp"), TrainingConfig(compile="auto", steps_per_call=16), {},
                      "/device:CPU:0")
    timed_steps = []
    step_call = trainer.step_call

    def recording(train_steps, batch):
        timed_steps.append(int(batch.shape[0]))
        return step_call(train_steps, batch)
    trainer.step_call = recording
    params = trainer.resolve({"layers": 1, "units": 16, "dropout": 0.0, "learning_rate": 3e-3, "batch_size": 32})
    trainer.program_for(params, seed=0)                       # a long job: measures both modes
    [(mode, detail)] = trainer.compile_choices.compile_choices().values()
    assert detail["measured"] and timed_steps == [MEASURE_STEPS, MEASURE_STEPS] and MEASURE_STEPS < 16
