"""`hpo best STUDY --export model.keras`: the best trial's model, from its checkpoint, scored
on the held-out test split that the search never saw (`--export model.weights.h5`: its
weights alone, for a model Keras cannot save whole, such as a subclassed one without
`get_config`).

The file is compiled with a stock Keras optimizer of the trial's kind (Adam, AdamW, SGD,
RMSprop) holding the trial's hyperparameters and its trained state (step count, moments),
so `keras.models.load_model(path).fit(...)` continues the trial's training without hpo
installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from hpo.cli.output_file import checked_output, written_whole
from hpo.errors import UserInputError
from hpo.study import Study, TrialRow
from hpo.study.pareto import stored_goals
from hpo.study.ranking import best_in
from hpo.training.best_epoch import MissingCheckpoint, model_checkpoint
from hpo.tuner.data import LOADER as TUNER_DATA

WEIGHTS_SUFFIX = ".weights.h5"     # Keras's name for a file of weights alone


@dataclass(frozen=True)
class ExportedModel:
    trial: TrialRow
    path: Path
    test_loss: float
    test_accuracy: float | None          # None when `accuracy` is not among training.metrics
    test_examples: int
    data_source: str
    test_metrics: Mapping[str, float] = field(default_factory=dict)   # training.metrics by logged name
    # Classes of the user's that the file names and Keras cannot find by name: loading it needs them.
    unregistered: tuple[str, ...] = ()


def export_best_model(study_dir: str | Path, path: str | Path, trial_id: int | None = None) -> ExportedModel:
    """The best trial's model (or trial `trial_id`'s, e.g. a Pareto front member) saved to `path`."""
    study = Study.open(study_dir, read_only=True)
    try:
        stored = study.experiment()
        best = best_in(study, stored_goals(stored)) if trial_id is None else study.trial(trial_id)
        checkpoint = study.checkpoint(best.trial_id) if best else None
        searched_on = study.data_fingerprint()
    finally:
        study.close()
    if best is None:
        raise UserInputError(f"{study_dir}: no trial has completed yet, so there is no model to export")
    try:
        model_checkpoint(checkpoint)    # the file load_trained_model reads: refused here, before TensorFlow loads
    except MissingCheckpoint as exc:
        raise UserInputError(f"{exc.path}: the best trial's checkpoint is missing; it cannot be exported") from None
    if stored.get("data", {}).get("dataset") == TUNER_DATA:
        raise UserInputError(f"{study_dir}: this study's model and data come from the Python script that ran "
                             f"tuner.search() (build_model and the arrays live there), so hpo cannot rebuild the "
                             f"model here; in the script, save it with tuner.get_best_models(1)[0].save(PATH)")
    path = Path(path)
    weights_only = path.name.endswith(WEIGHTS_SUFFIX)
    if path.suffix != ".keras" and not weights_only:
        raise UserInputError(f"{path}: expected a file name ending in .keras (Keras 3's format: the model and its "
                             f"optimizer) or {WEIGHTS_SUFFIX} (its weights alone)")
    target = checked_output(study_dir, path, make_folder=True)     # never over a file of the study's
    # Imported once the refusals above have had their say: these bring TensorFlow, seconds of
    # start-up that a refused export need not pay.
    from hpo.config import experiment_from_dict
    from hpo.data import load_dataset
    from hpo.data.dataset import same_split
    from hpo.models import get_builder
    from hpo.training.fit_engine import output_names, several_outputs_compile
    from hpo.training.loss_metrics import keras_loss, keras_metric
    from hpo.training.seeding import seed_trial
    from hpo.training.trained_model import load_trained_model

    experiment = experiment_from_dict(stored, source=str(Path(study_dir) / "study.sqlite"))
    # The same loader and seed give the same split the search used (the study's fingerprint of
    # it says so); its test part was never seen.
    dataset = load_dataset(experiment.data, seed=experiment.seed, class_labels=experiment.training.class_labels)
    now = dataset.fingerprint()
    if searched_on is not None and now is not None and same_split(searched_on, now) is False:
        raise UserInputError(f"{study_dir}: the loader {experiment.data.dataset!r} now splits its examples otherwise "
                             f"than when the search started (a shuffle without a seed, or data that changed since), "
                             f"so its test split may hold examples the search trained on; a loader must give the "
                             f"same examples on every call (seed its shuffles)")
    if dataset.examples("test") == 0:
        raise UserInputError(f"{study_dir}: the experiment has no held-out test set (data.test_split 0, or a "
                             f"loader whose named splits have no 'test')")
    training = experiment.training
    params = experiment.trial_params(best.config)
    seed_trial(0)
    model = get_builder(experiment.model.builder)(params, dataset.input_shape, dataset.num_classes)
    # The trainer's own optimizer reads the checkpoint (weights and optimizer state, in its order);
    # its state is then handed to a stock Keras optimizer, which is what the file stores.
    tunable = load_trained_model(model, params, checkpoint)
    portable = portable_model(model)
    optimizer = stock_optimizer(tunable, params, portable.trainable_variables)
    if output_names(portable):
        # Several outputs train on the fit engine: scored as it scored them, by Keras's evaluate
        # (the loss, each output's loss and metrics as `<output>_<name>`).
        losses, metrics = several_outputs_compile(training.loss, training.metrics, portable)
        portable.compile(optimizer=optimizer, loss=losses, metrics=metrics)
        test = (dataset.streams["test"].batches(1024),) if dataset.streamed else (dataset.x_test, dataset.y_test)
        test_metrics = portable.evaluate(*test, batch_size=None if dataset.streamed else 1024, verbose=0,
                                         return_dict=True)
        test_loss = float(test_metrics.pop("loss"))
        test_metrics = {name: float(value) for name, value in test_metrics.items()}
    else:
        portable.compile(optimizer=optimizer, loss=keras_loss(training.loss, portable),
                         metrics=[keras_metric(m) for m in training.metrics])
        test_loss, test_metrics = _score(training, portable, dataset)
    try:
        # Keras saves only to a name with its suffix, which the temporary name keeps.
        with written_whole(target, suffix=WEIGHTS_SUFFIX if weights_only else ".keras") as whole:
            portable.save_weights(whole) if weights_only else portable.save(whole)
    except NotImplementedError as exc:      # a subclassed model without get_config()
        reason = " ".join(str(exc).split("Example:")[0].split())
        weights = path.with_name(path.name[:-len(path.suffix)] + WEIGHTS_SUFFIX)
        raise UserInputError(f"{path}: Keras cannot save the model {type(model).__name__}: {reason} Its weights "
                             f"alone can be: --export {weights} (model.load_weights(...) reads them into the "
                             f"model your builder makes)") from None
    return ExportedModel(trial=best, path=path, test_loss=test_loss, test_accuracy=test_metrics.get("accuracy"),
                         test_examples=dataset.examples("test"), data_source=dataset.source, test_metrics=test_metrics,
                         unregistered=() if weights_only else unregistered_classes(portable))


def _score(training, portable, dataset) -> tuple[float, dict[str, float]]:
    """(test loss, test metrics) of a one-output model, as the search scored its validation data
    (the same loss and metric objects)."""
    import numpy as np

    from hpo.training.loss_metrics import LossAndMetrics, score, score_batches

    measures = LossAndMetrics(training.loss, training.metrics, portable, dataset.first(2)[1])
    if dataset.streamed:
        return score_batches(measures, portable, dataset.streams["test"].batches(1024))
    return score(measures, portable, dataset.x_test, np.asarray(dataset.y_test))


def stock_optimizer(tunable, params, variables):
    """A stock Keras optimizer of `tunable`'s kind with its hyperparameters and state (step
    count, learning rate, slots), built for `variables` (the exported model's trainable ones,
    in the order `tunable` was built on). Ours keep their hyperparameters in variables and
    subclass Keras's; a file holding them would need hpo to load."""
    import keras

    record = tunable.record
    values = {key: float(keras.ops.convert_to_numpy(v))
              for key, v in zip(record.hyperparameters, tunable.hyperparameter_variables)}
    optimizer = getattr(keras.optimizers, record.keras_class)(**values, **record.structural_values(params))
    optimizer.build(variables)
    hyper = tunable.hyperparameter_variables
    state = [v for v in tunable.optimizer.variables
             if not any(v is h for h in hyper) or v is tunable.optimizer.learning_rate]
    # Same layout: iteration, learning rate, then the slots per variable. A stock optimizer
    # that keeps no slots at these values (SGD at momentum 0) takes the first two; ours then
    # hold nothing that carries over (m = -lr * gradient).
    keeps_no_slots = len(optimizer.variables) == 2
    if len(optimizer.variables) != len(state) and not keeps_no_slots:
        raise RuntimeError(f"cannot map {len(state)} {tunable.name} optimizer variables onto Keras's "
                           f"{len(optimizer.variables)}")
    for target, source in zip(optimizer.variables, state):
        if tuple(target.shape) != tuple(source.shape):
            raise RuntimeError(f"optimizer variable {target.path} has shape {tuple(target.shape)}, "
                               f"the checkpoint's {source.path} {tuple(source.shape)}")
        target.assign(source)
    return optimizer


def unregistered_classes(model) -> tuple[str, ...]:
    """The names of the model's classes (itself, its layers) that are the user's own and not
    registered with Keras: `keras.models.load_model` finds them only through
    `custom_objects` or `@keras.saving.register_keras_serializable()`."""
    import keras

    layers = model._flatten_layers(include_self=True) if hasattr(model, "_flatten_layers") else [model, *model.layers]
    names = []
    for cls in dict.fromkeys(type(layer) for layer in layers):
        if cls.__module__.split(".")[0] == "keras":
            continue
        if keras.saving.get_registered_object(keras.saving.get_registered_name(cls)) is None:
            names.append(cls.__name__)
    return tuple(names)


def portable_model(model):
    """The same model with our TunableDropout swapped for keras.layers.Dropout at its tuned
    rate (identical at inference), so the saved file loads without hpo installed. Models
    that Keras cannot clone (subclassed ones) are returned as they are."""
    import keras

    from hpo.models.layers import TunableDropout

    if not any(isinstance(layer, TunableDropout) for layer in model.layers):
        return model

    def swap(layer):
        if isinstance(layer, TunableDropout):
            return keras.layers.Dropout(float(keras.ops.convert_to_numpy(layer.rate)), name=layer.name)
        return layer.__class__.from_config(layer.get_config())

    try:
        clone = keras.models.clone_model(model, clone_function=swap)
    except Exception:   # noqa: BLE001 - a subclassed model: keep ours (load it after `import hpo.models`)
        return model
    for source, target in zip(model.layers, clone.layers):
        if not isinstance(source, TunableDropout) and source.weights:
            target.set_weights(source.get_weights())
    return clone
