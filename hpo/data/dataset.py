"""What a loader's data becomes: a `Dataset` of train, validation and held-out test splits.

A split is either in memory (NumPy arrays, the fast path: the trainer copies them to its
device once and gathers batches by index) or a `StreamedSplit`, an unbatched `tf.data.Dataset`
of `(x, y)` elements that is read a batch at a time and never turned into one array. A
dataset is wholly one or the other: when a loader streams any split, its array splits are
streamed too (they are in memory already, so nothing is copied that was not), which keeps
the trainer to two cases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class StreamedSplit:
    """One split as an unbatched `tf.data.Dataset` of `(x, y)` elements."""
    elements: Any                     # tf.data.Dataset, elements (x, y), unbatched
    examples: int                     # counted once at load time when tf.data does not know it
    input_shape: tuple[int, ...]
    target_shape: tuple[int, ...]     # one example's target: () for a label or a value, (K,) one-hot
    target_dtype: str                 # 'int32' or 'float32', as the loss reads the targets

    def batches(self, batch_size: int, drop_remainder: bool = False, prefetch: bool = True):
        """The split in batches of `batch_size`, inputs float32 and targets `target_dtype`,
        prefetched (one batch ahead) so the next batch is read while the current one trains."""

        batched = self.elements.batch(batch_size, drop_remainder=drop_remainder)
        if self.needs_cast:        # after batching: one op per batch rather than one per element
            batched = batched.map(self.cast)
        # One batch ahead, not AUTOTUNE's several: what streaming holds stays a couple of batches.
        return batched.prefetch(1) if prefetch else batched

    @property
    def needs_cast(self) -> bool:
        x_spec, y_spec = self.elements.element_spec
        return x_spec.dtype.name != "float32" or y_spec.dtype.name != self.target_dtype

    def cast(self, x, y):
        """Inputs as float32, targets as `target_dtype` (traced into a tf.data map)."""
        import tensorflow as tf
        return tf.cast(x, tf.float32), tf.cast(y, tf.as_dtype(self.target_dtype))

    def first(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The first `n` examples as arrays (what the pre-flight builds and checks on)."""
        x, y = next(iter(self.batches(n)))
        return x.numpy(), y.numpy()


@dataclass(frozen=True)
class Dataset:
    """Train, validation and test. In memory, the `x_*`/`y_*` fields hold the arrays and
    `streams` is empty; streamed, `streams` holds every split and the array fields are None."""
    name: str
    source: str          # where the examples came from, for the log and the study
    x_train: np.ndarray | None
    y_train: np.ndarray | None
    x_val: np.ndarray | None
    y_val: np.ndarray | None
    x_test: np.ndarray | None
    y_test: np.ndarray | None
    num_classes: int
    streams: Mapping[str, StreamedSplit] = field(default_factory=dict)

    @property
    def streamed(self) -> bool:
        return bool(self.streams)

    @property
    def input_shape(self) -> tuple[int, ...]:
        if self.streamed:
            return self.streams["train"].input_shape
        return tuple(self.x_train.shape[1:])

    def examples(self, split: str) -> int:
        """Examples in 'train', 'validation' or 'test' (0 for a test split the loader left out)."""
        if self.streamed:
            return self.streams[split].examples if split in self.streams else 0
        return len({"train": self.x_train, "validation": self.x_val, "test": self.x_test}[split])

    def first(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The first `n` training examples as arrays (what the pre-flight checks on)."""
        if self.streamed:
            return self.streams["train"].first(n)
        return self.x_train[:n], self.y_train[:n]

    def describe(self) -> str:
        how = "streamed by tf.data" if self.streamed else "in memory"
        return (f"{self.name} from {self.source}: {self.examples('train')} train / "
                f"{self.examples('validation')} validation / {self.examples('test')} test, {how}, "
                f"input {self.input_shape}, {self.num_classes} classes")


def num_classes(y: np.ndarray) -> int:
    """Classes in integer labels (0..K-1); K for one-hot or multi-label targets [n, K];
    1 for float targets, one output per example."""
    if y.ndim == 2:
        return int(y.shape[1])
    return int(y.max()) + 1 if y.dtype.kind in "iu" and len(y) else 1


def split(name: str, source: str, x: np.ndarray, y: np.ndarray, config, seed: int) -> Dataset:
    """Seeded shuffle, then test, validation and train slices (train optionally capped)."""
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_test = int(round(len(x) * config.test_split))
    n_val = max(1, int(round(len(x) * config.validation_split)))
    x_test, y_test = x[:n_test], y[:n_test]
    x_val, y_val = x[n_test:n_test + n_val], y[n_test:n_test + n_val]
    x_train, y_train = x[n_test + n_val:], y[n_test + n_val:]
    if config.limit is not None:
        x_train, y_train = x_train[:config.limit], y_train[:config.limit]
    return Dataset(name=name, source=source, x_train=x_train, y_train=y_train, x_val=x_val, y_val=y_val,
                   x_test=x_test, y_test=y_test, num_classes=num_classes(y))
