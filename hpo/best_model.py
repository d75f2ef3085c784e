"""`hpo best STUDY --export model.keras`: the best trial's model, from its checkpoint, scored
on the held-out test split that the search never saw."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpo.errors import UserInputError
from hpo.study import Study, TrialRow


@dataclass(frozen=True)
class ExportedModel:
    trial: TrialRow
    path: Path
    test_loss: float
    test_accuracy: float
    test_examples: int
    data_source: str


def export_best_model(study_dir: str | Path, path: str | Path) -> ExportedModel:
    import keras
    import numpy as np

    from hpo.config import experiment_from_dict
    from hpo.data import load_dataset
    from hpo.models import get_builder
    from hpo.training.checkpoint import load_model_weights
    from hpo.training.seeding import seed_trial

    study = Study.open(study_dir, read_only=True)
    try:
        stored = study.experiment()
        best = study.best(stored["search"]["direction"])
        checkpoint = study.checkpoint_dir / f"trial_{best.trial_id:04d}.npz" if best else None
    finally:
        study.close()
    if best is None:
        raise UserInputError(f"{study_dir}: no trial has completed yet, so there is no model to export")
    if not checkpoint.exists():
        raise UserInputError(f"{checkpoint}: the best trial's checkpoint is missing; it cannot be exported")
    path = Path(path)
    if path.suffix != ".keras":
        raise UserInputError(f"{path}: expected a file name ending in .keras (Keras 3's format)")
    experiment = experiment_from_dict(stored, source=str(Path(study_dir) / "study.sqlite"))
    # The same loader and seed give the same split the search used; its test part was never seen.
    dataset = load_dataset(experiment.data, seed=experiment.seed)
    if len(dataset.x_test) == 0:
        raise UserInputError(f"{study_dir}: the experiment has data.test_split 0, so there is no held-out test set")
    training = experiment.training
    params = {"batch_size": training.batch_size, "optimizer": training.optimizer,
              "learning_rate": training.learning_rate, **experiment.model.params, **best.config}
    seed_trial(0)
    model = get_builder(experiment.model.builder)(params, dataset.input_shape, dataset.num_classes)
    load_model_weights(checkpoint, model)
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    loss, accuracy = model.evaluate(dataset.x_test, np.asarray(dataset.y_test), batch_size=1024, verbose=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    portable_model(model).save(path)
    return ExportedModel(trial=best, path=path, test_loss=float(loss), test_accuracy=float(accuracy),
                         test_examples=len(dataset.x_test), data_source=dataset.source)


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
    clone.compile(loss=model.loss, metrics=["accuracy"])
    return clone
