"""Checkpoints: model weights plus optimizer state, so a promotion continues exactly.

Stored as one .npz written to a temporary name and renamed, so a crash mid-write never
leaves a half checkpoint where a later job would read it. A trial also checkpoints after
its epochs as it goes (not fsynced: they guard against a killed process, which keeps the
page cache, not against power loss), so a retried or resumed trial picks up from its last
finished epoch.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from hpo.errors import TrialFailed

log = logging.getLogger("hpo.training")


def save_arrays(path: str | Path, weights: list, optimizer_values: list, epoch: int, durable: bool = True,
                reports: Sequence[tuple[int, Mapping]] = ()) -> None:
    """A checkpoint from values on the host, in `model.variables` and `optimizer.variables`
    order (`TrainingProgram.host_state`; fused trials' from `FusedProgram.checkpoint_arrays`).
    model.variables includes the random seed generators' states, so dropout masks continue
    exactly where they stopped too. `durable`: fsync before the rename (the final checkpoint
    that promotions read). `reports`: (epoch, metrics) of every epoch this trial has trained
    so far, kept so that a resumed attempt can send them again: the driver may not have read
    all of them, since a killed or interrupted driver drops what it had not yet taken from
    its workers."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {f"w{i}": np.asarray(v) for i, v in enumerate(weights)}
    arrays.update({f"o{i}": np.asarray(v) for i, v in enumerate(optimizer_values)})
    arrays["meta"] = np.frombuffer(json.dumps({"epoch": epoch, "n_weights": len(weights),
                                               "n_optimizer": len(optimizer_values),
                                               "reports": [[e, dict(m)] for e, m in reports]}).encode(),
                                   dtype=np.uint8)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as handle:
            np.savez(handle, **arrays)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:   # disk full, killed mid-write: never leave a partial file behind
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def stored_reports(path: str | Path) -> list[tuple[int, dict]]:
    """The (epoch, metrics) a progress checkpoint kept, oldest first; [] when it kept none.
    A checkpoint written before every epoch was kept holds only its last one, as `metrics`."""
    meta = checkpoint_meta(path) or {}
    if "reports" in meta:
        return [(int(epoch), dict(metrics)) for epoch, metrics in meta["reports"]]
    return [(int(meta["epoch"]), dict(meta["metrics"]))] if meta.get("metrics") else []


def progress_due(every: int, min_gap: float, epoch: int, end_epoch: int, last_saved: float) -> bool:
    """Whether to write a progress checkpoint after `epoch`: every `every` epochs (0: never),
    not at the end (the final checkpoint follows), and only once `min_gap` seconds of
    training since `last_saved` (a `time.monotonic()`) would be at stake: one costs ~8 ms for
    a 2x256 MLP, 8% of a short epoch."""
    return bool(every) and epoch < end_epoch and epoch % every == 0 and time.monotonic() - last_saved >= min_gap


def checkpoint_epoch(path: str | Path) -> int | None:
    """The epoch a checkpoint ends at; None when it is missing or unreadable."""
    meta = checkpoint_meta(path)
    return None if meta is None else int(meta["epoch"])


def checkpoint_meta(path: str | Path) -> dict | None:
    """The checkpoint's epoch, sizes and (progress checkpoints) the trial's reports so far."""
    if not Path(path).exists():
        return None
    try:
        with np.load(path) as data:
            return json.loads(bytes(data["meta"]).decode())
    except Exception as exc:   # noqa: BLE001 - truncated or foreign: not something to continue from
        # Written atomically, so this is damage from outside; the trial starts over, and says why.
        log.warning("the checkpoint %s cannot be read (%s: %s); not continuing from it", path,
                    type(exc).__name__, exc)
        return None


def load_model_weights(path: str | Path, model) -> int:
    """Restore only the model's variables (to export it); returns the checkpoint's epoch."""
    path = Path(path)
    with np.load(path) as data:
        meta = json.loads(bytes(data["meta"]).decode())
        weights = [data[f"w{i}"] for i in range(meta["n_weights"])]
    _assign_model(path, model, weights)
    return int(meta["epoch"])


def _assign_model(path: Path, model, weights) -> None:
    variables = model.variables
    if len(weights) != len(variables) or any(tuple(v.shape) != w.shape for v, w in zip(variables, weights)):
        raise TrialFailed(f"checkpoint {path} does not fit this model: it holds {len(weights)} variables "
                          f"{[w.shape for w in weights][:4]}..., the model has {len(variables)}")
    for variable, value in zip(variables, weights):
        variable.assign(value)


def load_checkpoint(path: str | Path, model, optimizer) -> int:
    """Restore weights and optimizer state in place; returns the epoch the checkpoint ended at."""
    path = Path(path)
    if not path.exists():
        raise TrialFailed(f"checkpoint {path} to continue from is missing")
    with np.load(path) as data:
        meta = json.loads(bytes(data["meta"]).decode())
        weights = [data[f"w{i}"] for i in range(meta["n_weights"])]
        opt_values = [data[f"o{i}"] for i in range(meta["n_optimizer"])]
    _assign_model(path, model, weights)
    if len(opt_values) != len(optimizer.variables):
        raise TrialFailed(f"checkpoint {path} holds {len(opt_values)} optimizer variables, "
                          f"the optimizer has {len(optimizer.variables)}")
    for variable, value in zip(optimizer.variables, opt_values):
        variable.assign(value)
    return int(meta["epoch"])
