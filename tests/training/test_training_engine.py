"""The training engine: one trace per architecture, variable-held hyperparameters that really
take effect, compile mode chosen by measurement and remembered, flat memory."""

import numpy as np
import pytest

from hpo.config import TrainingConfig
from hpo.jobs import TrainTask
from hpo.models import get_builder
from hpo.training.compile_mode import (
    FAMILY_EVIDENCE,
    MIN_STEPS_TO_MEASURE,
    InMemoryCompileChoices,
    choice_key,
    decide,
    inferred_mode,
    provisional_mode,
)
from hpo.training.program import architecture_signature

BASE = {"layers": 1, "units": 32, "dropout": 0.0, "learning_rate": 3e-3, "batch_size": 64}


def make_trainer(digits, builder="mlp", compile="graph", **kw):
    from hpo.training.trainer import Trainer
    return Trainer(digits, get_builder(builder), TrainingConfig(compile=compile), {}, "/device:CPU:0", **kw)


def train(trainer, tmp_path, config, name, epochs=2, seed=5, start=0, checkpoint_in=None):
    task = TrainTask(trial_id=0, config=config, start_epoch=start, end_epoch=start + epochs, seed=seed,
                     checkpoint_out=str(tmp_path / f"{name}.npz"), checkpoint_in=checkpoint_in)
    return list(trainer.run(task))


def weights(path):
    with np.load(path) as data:
        return [data[k] for k in sorted(data.files, key=lambda k: (k[0], int(k[1:]) if k[1:].isdigit() else -1))
                if k.startswith("w")]


def test_trials_of_one_architecture_trace_once(digits, tmp_path):
    trainer = make_trainer(digits)
    variants = [{}, {"learning_rate": 1e-2}, {"dropout": 0.3}, {"batch_size": 32},
                {"optimizer": "adam", "beta_1": 0.8, "epsilon": 1e-5}, {"learning_rate": 1e-4, "dropout": 0.1}]
    for i, change in enumerate(variants):
        train(trainer, tmp_path, {**BASE, **change}, f"v{i}", epochs=1, seed=i)
    assert len(trainer.programs) == 1
    assert trainer.traces == 1


@pytest.mark.slow
def test_structural_changes_get_their_own_program(digits, tmp_path):
    trainer = make_trainer(digits)
    for i, change in enumerate([{}, {"units": 16}, {"layers": 2}, {"optimizer": "sgd"}, {"units": 16}]):
        train(trainer, tmp_path, {**BASE, **change}, f"s{i}", epochs=1, seed=i)
    assert len(trainer.programs) == 4 and trainer.traces == 4


def test_a_reused_program_trains_exactly_like_a_fresh_one(digits, tmp_path):
    reused = make_trainer(digits)
    train(reused, tmp_path, {**BASE, "learning_rate": 1e-2, "dropout": 0.4}, "warm", seed=1)
    after = train(reused, tmp_path, {**BASE, "dropout": 0.2}, "reused", seed=9)
    fresh = train(make_trainer(digits), tmp_path, {**BASE, "dropout": 0.2}, "fresh", seed=9)
    assert reused.traces == 1
    assert [r.metrics["loss"] for r in after] == pytest.approx([r.metrics["loss"] for r in fresh], rel=1e-5)
    for a, b in zip(weights(tmp_path / "reused.npz"), weights(tmp_path / "fresh.npz")):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("first, second", [
    ({"learning_rate": 1e-2}, {"learning_rate": 0.0}),
    ({"optimizer": "sgd", "learning_rate": 0.05, "momentum": 0.0}, {"optimizer": "sgd", "learning_rate": 0.05,
                                                                    "momentum": 0.9}),
    ({"dropout": 0.0}, {"dropout": 0.8}),
    ({"beta_1": 0.9}, {"beta_1": 0.0}),
])
def test_changing_a_variable_hyperparameter_really_changes_training(digits, tmp_path, first, second):
    """The bug to rule out: a Python float baked into the first trace, silently reused."""
    shared = make_trainer(digits)
    # The first config on the fresh trainer: what it trains alone.
    first_alone = train(shared, tmp_path, {**BASE, **first}, "first", seed=3)
    on_shared = train(shared, tmp_path, {**BASE, **second}, "second", seed=3)
    alone = train(make_trainer(digits), tmp_path, {**BASE, **second}, "alone", seed=3)
    assert shared.traces == 1
    assert [r.metrics["loss"] for r in on_shared] == pytest.approx([r.metrics["loss"] for r in alone], rel=1e-5)
    # ...and the value matters at all: the first config's losses differ from the second's.
    assert first_alone[-1].metrics["loss"] != pytest.approx(on_shared[-1].metrics["loss"], rel=1e-3)


def test_learning_rate_zero_leaves_the_weights_untouched_on_a_reused_program(digits, tmp_path):
    trainer = make_trainer(digits)
    train(trainer, tmp_path, {**BASE, "learning_rate": 0.05}, "hot", seed=2)
    train(trainer, tmp_path, {**BASE, "learning_rate": 0.0}, "frozen", seed=4)
    model = trainer.build_model(trainer.resolve(BASE), seed=4)
    compared = 0
    for saved, variable in zip(weights(tmp_path / "frozen.npz"), model.variables, strict=True):
        if variable.trainable:
            np.testing.assert_array_equal(saved, np.asarray(variable.value))
            compared += 1
    assert compared == len(model.trainable_variables) == 4


def test_continuation_on_a_cached_program_matches_straight_training(digits, tmp_path):
    trainer = make_trainer(digits)
    straight = train(trainer, tmp_path, BASE, "straight", epochs=4, seed=6)
    train(trainer, tmp_path, BASE, "part1", epochs=2, seed=6)
    train(trainer, tmp_path, {**BASE, "learning_rate": 0.05}, "other", epochs=1, seed=1)   # dirties the program
    part2 = train(trainer, tmp_path, BASE, "part2", epochs=2, start=2, seed=6,
                  checkpoint_in=str(tmp_path / "part1.npz"))
    assert trainer.traces == 1
    assert [r.metrics["loss"] for r in part2] == pytest.approx([r.metrics["loss"] for r in straight[2:]], rel=1e-4)


@pytest.mark.slow
def test_auto_measures_each_architecture_once_and_remembers(digits, tmp_path):
    trainer = make_trainer(digits, compile="auto")
    choices = trainer.compile_choices
    params = trainer.resolve(BASE)
    trainer.program_for(params, seed=0)                                # a long job: measures
    (key, (mode, detail)), = choices.compile_choices().items()
    assert mode in ("graph", "xla") and detail["measured"]
    assert set(detail["step_call_ms"]) == {"graph", "xla"}            # both really timed
    assert mode == min(detail["step_call_ms"], key=detail["step_call_ms"].get)
    assert key == choice_key(architecture_signature(params, trainer.builder), "CPU")
    train(trainer, tmp_path, {**BASE, "learning_rate": 1e-2}, "b", epochs=1)
    assert len(choices.compile_choices()) == 1

    # A new process (a resumed search) with the same store does not measure again.
    again = make_trainer(digits, compile="auto", known_compile_choices=choices.compile_choices())
    train(again, tmp_path, BASE, "c", epochs=1)
    assert again.traces == 1
    assert [program_key[2] for program_key in again.programs._programs] == [mode]   # the remembered mode


def test_a_job_too_short_to_pay_for_measuring_does_not_measure(digits, tmp_path):
    trainer = make_trainer(digits, compile="auto")
    choices = trainer.compile_choices
    steps = -(-len(digits.x_train) // BASE["batch_size"])       # an epoch's steps, the last batch filled up
    assert steps < MIN_STEPS_TO_MEASURE
    train(trainer, tmp_path, BASE, "short", epochs=1)
    assert choices.compile_choices() == {}                  # nothing recorded: a longer job may still measure
    assert trainer.traces == 1                              # and only one program was compiled (graph)
    assert [key[2] for key in trainer.programs._programs] == ["graph"]


@pytest.mark.slow
def test_short_jobs_of_one_architecture_measure_once_their_steps_add_up(digits, tmp_path, monkeypatch):
    """A search of one architecture in short jobs (random search, Hyperband's first rung) would
    otherwise never measure, and run every job in the provisional mode."""
    import hpo.training.trainer as trainer_module

    trainer = make_trainer(digits, compile="auto")
    choices = trainer.compile_choices
    steps = -(-len(digits.x_train) // BASE["batch_size"])       # an epoch's steps, the last batch filled up
    monkeypatch.setattr(trainer_module, "MIN_STEPS_TO_MEASURE", int(2.5 * steps))
    for job in ("first", "second"):
        train(trainer, tmp_path, BASE, job, epochs=1)
        assert choices.compile_choices() == {}
    train(trainer, tmp_path, BASE, "third", epochs=1)          # 3 jobs' steps: enough to measure
    [(mode, detail)] = choices.compile_choices().values()
    assert detail["measured"] and set(detail["step_call_ms"]) == {"graph", "xla"}
    train(trainer, tmp_path, {**BASE, "units": BASE["units"] + 1}, "other", epochs=1)
    assert len(choices.compile_choices()) == 1                # another architecture counts its own steps


def test_decisions_live_in_the_study(tmp_path):
    from hpo.study import Study
    study = Study.create(tmp_path / "s", {"name": "x"})
    study.record_compile_choice("k", "graph", {"measured": True, "margin": 2.0})
    study.close()
    reopened = Study.open(tmp_path / "s")
    assert reopened.compile_choice("k") == ("graph", {"measured": True, "margin": 2.0})
    assert reopened.compile_choice("missing") is None


def test_decide_picks_the_faster_steady_state_not_the_faster_first_call():
    mode, detail = decide({"graph": (0.2, 0.010), "xla": (3.0, 0.004)})
    assert mode == "xla" and detail["margin"] == pytest.approx(2.5)
    mode, _ = decide({"graph": (0.2, 0.010)})                        # xla failed to compile
    assert mode == "graph"


def _key(units, device="CPU", builder="hpo.models.mlp.build_mlp"):
    signature = f'{{"__builder__": "{builder}", "units": {units}}}'
    return choice_key(signature, device)


def test_a_family_with_clear_agreement_is_inferred_without_measuring():
    choices = InMemoryCompileChoices()
    for units in range(FAMILY_EVIDENCE - 1):
        choices.record_compile_choice(_key(units), "graph", {"measured": True, "margin": 3.0})
    assert inferred_mode(_key(99), choices) is None                   # not enough evidence yet
    choices.record_compile_choice(_key(50), "graph", {"measured": True, "margin": 2.0})
    assert inferred_mode(_key(99), choices) == ("graph", {"measured": False, "inferred_from": FAMILY_EVIDENCE})
    assert inferred_mode(_key(99, device="GPU"), choices) is None     # another device kind: measure
    assert inferred_mode(_key(99, builder="x.cnn"), choices) is None  # another builder: measure


def test_short_jobs_follow_the_family_majority():
    choices = InMemoryCompileChoices()
    assert provisional_mode(_key(1), choices) == "graph"             # nothing measured: the cheaper compile
    for units, mode in zip(range(3), ["xla", "xla", "graph"]):
        choices.record_compile_choice(_key(units), mode, {"measured": True, "margin": 1.1})
    assert provisional_mode(_key(99), choices) == "xla"
    assert provisional_mode(_key(99, device="GPU"), choices) == "graph"


def test_a_close_or_split_family_keeps_measuring():
    close = InMemoryCompileChoices()
    for units in range(FAMILY_EVIDENCE):
        close.record_compile_choice(_key(units), "graph", {"measured": True, "margin": 1.05})
    assert inferred_mode(_key(99), close) is None
    split = InMemoryCompileChoices()
    for units, mode in zip(range(FAMILY_EVIDENCE), ["graph", "xla", "graph"]):
        split.record_compile_choice(_key(units), mode, {"measured": True, "margin": 3.0})
    assert inferred_mode(_key(99), split) is None


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@pytest.mark.slow
def test_memory_stays_flat_across_100_sequential_trials(digits, tmp_path, capsys):
    trainer = make_trainer(digits)
    configs = [{**BASE, "units": units, "learning_rate": lr}
               for units, lr in zip([16, 32, 48, 16, 32] * 30, np.geomspace(1e-4, 1e-1, 150))]
    for i, config in enumerate(configs[:20]):              # warm-up: programs, allocator pools
        train(trainer, tmp_path, config, "m", epochs=1, seed=i)
    before = _rss_mb()
    for i, config in enumerate(configs[20:120]):
        train(trainer, tmp_path, config, "m", epochs=1, seed=i)
    growth = _rss_mb() - before
    with capsys.disabled():
        print(f"\n[memory] RSS {before:.0f} MB before, growth over 100 trials: {growth:+.1f} MB")
    assert trainer.traces == 3
    assert growth < 40, f"resident memory grew {growth:.1f} MB over 100 trials"


@pytest.mark.slow
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
