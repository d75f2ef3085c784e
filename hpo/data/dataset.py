"""What a loader's data becomes: a `Dataset` of train, validation and held-out test splits.

A split is either in memory (NumPy arrays, the fast path: the trainer copies them to its
device once and gathers batches by index) or a `StreamedSplit`, an unbatched `tf.data.Dataset`
of `(x, y)` elements that is read a batch at a time and never turned into one array. A
dataset is wholly one or the other: when a loader streams any split, its array splits are
streamed too (they are in memory already, so nothing is copied that was not), which keeps
the trainer to two cases. Inputs and targets may each be several arrays (a dict or tuple,
`hpo.data.nested`), for a model with several inputs or outputs; the shapes and class counts
then come in the same structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from hpo.data.fingerprint import arrays_digest
from hpo.data.nested import example_shapes, is_nested, leaves, map_tree, pack, rows

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class StreamedSplit:
    """One split as an unbatched `tf.data.Dataset` of `(x, y)` elements. `x` and `y` may each
    be a dict or tuple of tensors (a model with several inputs or outputs): the shapes and
    dtypes below then hold one entry per tensor, in that structure."""
    elements: Any                     # tf.data.Dataset, elements (x, y), unbatched
    examples: int                     # counted once at load time when tf.data does not know it
    input_shape: Any                  # one example's input shape: (28, 28), or {"a": (4,), "b": (3,)}
    target_shape: Any                 # one example's target: () for a label or a value, (K,) one-hot
    target_dtype: Any                 # 'int32' or 'float32', as the loss reads the targets

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
        import tensorflow as tf

        x_spec, y_spec = self.elements.element_spec
        return (any(s.dtype.name != "float32" for s in tf.nest.flatten(x_spec))
                or any(s.dtype.name != d for s, d in zip(tf.nest.flatten(y_spec), tf.nest.flatten(self.target_dtype))))

    def cast(self, x, y):
        """Inputs as float32, targets as `target_dtype` (traced into a tf.data map)."""
        import tensorflow as tf
        return (tf.nest.map_structure(lambda v: tf.cast(v, tf.float32), x),
                tf.nest.map_structure(lambda v, d: tf.cast(v, tf.as_dtype(d)), y, self.target_dtype))

    def first(self, n: int) -> tuple[Any, Any]:
        """The first `n` examples as arrays (what the pre-flight builds and checks on)."""
        import tensorflow as tf

        x, y = next(iter(self.batches(n)))
        return tf.nest.map_structure(np.asarray, x), tf.nest.map_structure(np.asarray, y)


# The fingerprint's form, written before its digest: two fingerprints compare only in the
# same form (`same_split`), so a change to what is digested never reads as other data.
FINGERPRINT_FORMAT = "splits-v1"


def same_split(kept: str, now: str) -> bool | None:
    """Whether two fingerprints say the loader split its examples alike; None where they are
    of different forms and cannot tell."""
    if kept.split(":", 1)[0] != now.split(":", 1)[0]:
        return None
    return kept == now


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
    num_classes: Any     # an int; for targets of several arrays, one per array in their structure
    streams: Mapping[str, StreamedSplit] = field(default_factory=dict)

    @property
    def streamed(self) -> bool:
        return bool(self.streams)

    @property
    def input_shape(self) -> Any:
        """One example's input shape; for inputs of several arrays, one shape per array in the
        inputs' structure (`{"image": (28, 28), "meta": (3,)}`): what the builder is given."""
        if self.streamed:
            return self.streams["train"].input_shape
        return example_shapes(self.x_train)

    def fingerprint(self) -> str | None:
        """A digest of how the examples fell into the splits: every split's targets, and the
        validation and test inputs, byte for byte. Two loads that give the same digest split
        alike, so `hpo best --export`'s test split is one the search never trained on. None
        for streamed splits, which would take a pass over every one."""
        if self.streamed:
            return None
        digest = arrays_digest([*leaves(self.y_train), *leaves(self.y_val), *leaves(self.y_test),
                                *leaves(self.x_val), *leaves(self.x_test)])
        return f"{FINGERPRINT_FORMAT}:{digest}"

    def examples(self, split: str) -> int:
        """Examples in 'train', 'validation' or 'test' (0 for a test split the loader left out)."""
        if self.streamed:
            return self.streams[split].examples if split in self.streams else 0
        return rows({"train": self.x_train, "validation": self.x_val, "test": self.x_test}[split])

    def first(self, n: int) -> tuple[Any, Any]:
        """The first `n` training examples as arrays (what the pre-flight checks on)."""
        if self.streamed:
            return self.streams["train"].first(n)
        return map_tree(lambda a: a[:n], self.x_train), map_tree(lambda a: a[:n], self.y_train)

    def describe(self) -> str:
        how = "streamed by tf.data" if self.streamed else "in memory"
        # A loader that names no source is its own; one output is a value, not "1 classes".
        origin = self.name if self.source == self.name else f"{self.name} from {self.source}"
        outputs = (f"{self.num_classes} classes" if not isinstance(self.num_classes, int) or self.num_classes > 1
                   else "1 output")
        return (f"{origin}: {self.examples('train')} train / {self.examples('validation')} validation / "
                f"{self.examples('test')} test, {how}, input {self.input_shape}, {outputs}")


def num_classes(y: np.ndarray) -> int:
    """Classes in integer labels (0..K-1); K for one-hot or multi-label targets [n, K];
    1 for float targets, one output per example."""
    if y.ndim == 2:
        return int(y.shape[1])
    return int(y.max()) + 1 if y.dtype.kind in "iu" and len(y) else 1


def classes_of(targets: Sequence[Any]) -> Any:
    """`num_classes` over the splits' targets (the most any split shows); for targets of several
    arrays (a model with several outputs), one count per array in the targets' structure."""
    first = targets[0]
    if is_nested(first):
        counts = [[num_classes(leaf) for leaf in leaves(y)] for y in targets]
        return pack(first, [max(column) for column in zip(*counts)])
    return max(num_classes(y) for y in targets)


def split(name: str, source: str, x: Any, y: Any, config, seed: int) -> Dataset:
    """Seeded shuffle, then test, validation and train slices (train optionally capped). `x`
    and `y` may hold several arrays (`hpo.data.nested`): each is cut by the same permutation."""
    n = rows(x)
    order = np.random.default_rng(seed).permutation(n)
    x, y = map_tree(lambda a: a[order], x), map_tree(lambda a: a[order], y)
    n_test = int(round(n * config.test_split))
    n_val = max(1, int(round(n * config.validation_split)))
    train_end = None if config.limit is None else n_test + n_val + config.limit

    def cut(tree, start, end):
        return map_tree(lambda a: a[start:end], tree)
    return Dataset(name=name, source=source, x_train=cut(x, n_test + n_val, train_end),
                   y_train=cut(y, n_test + n_val, train_end), x_val=cut(x, n_test, n_test + n_val),
                   y_val=cut(y, n_test, n_test + n_val), x_test=cut(x, 0, n_test), y_test=cut(y, 0, n_test),
                   num_classes=classes_of([y]))
