"""The training data as the trainer holds it on its device: in memory or streamed.

`DeviceArrays` is the fast path: the train and validation arrays copied to the device once,
each compiled call gathering its batches there by index (`compiled_step`). `StreamedData`
reads `tf.data` splits a batch at a time: each epoch the train split is batched by the
trial's batch size, `steps_per_call` batches are stacked into one compiled call's input, and
the next call's input is prefetched while the current one trains; nothing is gathered into
one array. Both give the epoch loop the same few things: the examples per epoch, the
epoch's calls, the validation slices, a batch to time a step on; and an engine built on
`model.fit` the epoch's batches and the validation as `tf.data` datasets (`epoch_dataset`,
`validation_dataset`), in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator

import numpy as np

from hpo.data.nested import is_nested
from hpo.errors import TrialFailed

# Calls read ahead of training. On a busy 2-core CPU, one call ahead left the step waiting
# on tf.data (benchmarks/streaming.py: streamed/arrays 0.62); two cost one more call's input
# of memory. (A parallel batching was as fast but held several calls more.)
PREFETCH_CALLS = 2


def steps_per_epoch(n_train: int, batch_size: int) -> int:
    """An epoch's steps: every example once, as `model.fit` counts them (the last batch partial there)."""
    return -(-n_train // batch_size)


def epoch_batches(data_seed: int, epoch: int, n_train: int, batch_size: int) -> np.ndarray:
    """The epoch's batches as [steps, batch_size] int32 indices into the training set: one
    shuffle, the same for every trial of a study. Every example is trained each epoch: where
    `batch_size` does not divide the set, the last batch is filled up by repeating its own
    examples (one batch shape, so one compiled program, where `fit` would train a smaller batch)."""
    steps = steps_per_epoch(n_train, batch_size)
    order = np.random.default_rng([data_seed, epoch]).permutation(n_train)
    whole = (steps - 1) * batch_size
    order = np.concatenate([order[:whole], np.resize(order[whole:], batch_size)])
    return order.reshape(steps, batch_size).astype("int32")


def _filled(batches, batch_size: int):
    """`batches` (a dataset of (x, y) batches) with a partial last batch filled up to
    `batch_size` by repeating its own examples, as `epoch_batches` fills one."""
    import tensorflow as tf

    def fill(x, y):
        examples = tf.shape(tf.nest.flatten(x)[0])[0]
        rows = tf.range(batch_size) % examples
        # Only the last batch may be partial: the others pass without a copy, as in `calls`.
        x, y = tf.cond(examples < batch_size, lambda: tf.nest.map_structure(lambda a: tf.gather(a, rows), (x, y)),
                       lambda: (x, y))
        return tf.nest.map_structure(lambda a: tf.ensure_shape(a, [batch_size, *a.shape[1:]]), (x, y))
    return batches.map(fill)


@dataclass(frozen=True)
class WholeStream:
    """A whole epoch's batches, or the whole validation set, as one batched `tf.data.Dataset`:
    what an engine built on `model.fit` trains or evaluates in one call when the splits are
    streamed (it resets its metrics at every call, so the pass cannot be cut into calls)."""
    dataset: Any
    batches: int          # training: the epoch's batches
    examples: int         # evaluation: the examples the loss is summed over


@dataclass(frozen=True)
class DeviceArrays:
    """The dataset's train and validation arrays, copied to the trainer's device once. Each of
    x and y is one tensor, or a dict or tuple of tensors (a model with several inputs or outputs:
    only the `fit` engine trains those, `hpo.training.engines`)."""
    x_train: Any
    y_train: Any
    x_val: Any
    y_val: Any
    streamed: ClassVar[bool] = False

    @property
    def train_examples(self) -> int:
        return leading(self.x_train)

    @property
    def validation_examples(self) -> int:
        return leading(self.x_val)

    def step_inputs(self) -> tuple[Any, Any]:
        """What the compiled step reads: the device's train arrays, gathered by index."""
        return self.x_train, self.y_train

    @property
    def y_example(self):
        import tensorflow as tf
        return tf.nest.map_structure(lambda y: y[:2], self.y_train)

    @property
    def several_inputs(self) -> bool:
        return is_nested(self.x_train)

    def train_calls(self, data_seed: int, epoch: int, batch_size: int,
                    steps_per_call: int) -> Iterator[tuple[Any, int]]:
        """(one compiled call's input, its steps) for every call of the epoch: [steps, batch]
        indices into the train arrays, one shuffle per (data seed, epoch) (`epoch_batches`)."""
        import tensorflow as tf

        batches = epoch_batches(data_seed, epoch, self.train_examples, batch_size)
        for first in range(0, len(batches), steps_per_call):
            call = batches[first:first + steps_per_call]
            yield tf.constant(call), len(call)

    def epoch_dataset(self, data_seed: int, epoch: int, batch_size: int):
        """The epoch's batches as a `tf.data.Dataset` of (x, y), in the order `train_calls`
        trains them: what an engine built on `model.fit` feeds it."""
        import tensorflow as tf

        x, y = self.x_train, self.y_train
        indices = tf.data.Dataset.from_tensor_slices(epoch_batches(data_seed, epoch, self.train_examples, batch_size))
        return indices.map(lambda idx: (tf.nest.map_structure(lambda a: tf.gather(a, idx), x),
                                        tf.nest.map_structure(lambda a: tf.gather(a, idx), y)))

    def validation_dataset(self, batch: int):
        """The validation split in batches, as a `tf.data.Dataset` (for `model.evaluate`)."""
        import tensorflow as tf
        return tf.data.Dataset.from_tensor_slices((self.x_val, self.y_val)).batch(batch)

    def validation_slices(self, batch: int) -> Iterator[tuple[Any, Any]]:
        import tensorflow as tf

        for first in range(0, self.validation_examples, batch):
            rows = slice(first, first + batch)
            yield (tf.nest.map_structure(lambda a, rows=rows: a[rows], self.x_val),
                   tf.nest.map_structure(lambda a, rows=rows: a[rows], self.y_val))

    def first_inputs(self, n: int) -> Any:
        """The first `n` training inputs, on the host (what a model's latency is timed on)."""
        import tensorflow as tf
        return tf.nest.map_structure(lambda a: a[:n].numpy(), self.x_train)

    def timing_batch(self, batch_size: int, steps_per_call: int, seed: int):
        """One compiled call's worth of batch indices [steps, batch_size], for timing a step
        (which examples does not matter)."""
        import tensorflow as tf

        steps = max(1, min(steps_per_call, steps_per_epoch(self.train_examples, batch_size)))
        indices = np.random.default_rng(seed).integers(0, self.train_examples, (steps, batch_size)).astype("int32")
        return tf.constant(indices)


@dataclass(frozen=True)
class StreamedData:
    """The train and validation splits as `StreamedSplit`s (`hpo.data.dataset`), read in batches."""
    train: Any            # hpo.data.StreamedSplit
    validation: Any       # hpo.data.StreamedSplit
    y_example: Any        # a few train targets: Keras resolves `accuracy` from their shape
    # Built pipelines by (batch size, steps per call), and the validation's: a pipeline built
    # anew traces its map functions again, which cost a third of a short epoch here.
    pipelines: dict = field(default_factory=dict, compare=False, repr=False)
    streamed: ClassVar[bool] = True

    @property
    def train_examples(self) -> int:
        return self.train.examples

    @property
    def several_inputs(self) -> bool:
        return is_nested(self.train.elements.element_spec[0])

    @property
    def validation_examples(self) -> int:
        return self.validation.examples

    def step_inputs(self) -> tuple[Any, Any]:
        """What the compiled step reads: specs of one call's stacked batches [steps, batch, ...]."""
        import tensorflow as tf

        return (tf.TensorSpec([None, None, *self.train.input_shape], tf.float32),
                tf.TensorSpec([None, None, *self.train.target_shape], tf.as_dtype(self.train.target_dtype)))

    def calls(self, batch_size: int, steps_per_call: int):
        """The train split as compiled calls' inputs: batches, `steps_per_call` of them stacked per
        call (the last call may hold fewer, its last batch filled up with its own examples as
        `epoch_batches` fills one), the next call read while the current one trains."""
        key = (batch_size, steps_per_call)
        if key not in self.pipelines:
            self.pipelines[key] = self._calls(batch_size, steps_per_call)
        return self.pipelines[key]

    def _calls(self, batch_size: int, steps_per_call: int):
        import tensorflow as tf

        input_shape, target_shape = list(self.train.input_shape), list(self.train.target_shape)

        def stack(x, y):
            x, y = self.train.cast(x, y)
            examples = tf.shape(x)[0]
            steps = -(-examples // batch_size)
            rows, last = tf.range(steps * batch_size), (steps - 1) * batch_size
            rows = tf.where(rows < examples, rows, last + (rows - last) % tf.maximum(examples - last, 1))
            # Only the epoch's last call may be partial: the others are reshaped without a copy.
            x, y = tf.cond(examples % batch_size > 0, lambda: (tf.gather(x, rows), tf.gather(y, rows)),
                           lambda: (x, y))
            return (tf.reshape(x, [steps, batch_size, *input_shape]),
                    tf.reshape(y, [steps, batch_size, *target_shape]))
        # One batching of a call's examples, then one map (cast and reshape): batching batches
        # costs tf.data a second pass over every element (benchmarks/streaming.py).
        calls = self.train.elements.batch(batch_size * steps_per_call)
        return _beside_training(calls.map(stack).filter(lambda x, y: tf.shape(x)[0] > 0).prefetch(PREFETCH_CALLS))

    def train_calls(self, data_seed: int, epoch: int, batch_size: int,
                    steps_per_call: int) -> Iterator[tuple[Any, int]]:
        """(one compiled call's input (x, y), its steps) for every call of the epoch, in the
        split's own order: as with `model.fit` on a `tf.data.Dataset`, a pipeline that should
        shuffle does so itself (`.shuffle(buffer)`)."""
        for x, y in self.calls(batch_size, steps_per_call):
            yield (x, y), int(x.shape[0])

    def epoch_dataset(self, data_seed: int, epoch: int, batch_size: int):
        """The epoch's batches as a `tf.data.Dataset` of (x, y), prefetched, in the split's own
        order, the last one filled up as `calls` fills it: what an engine built on `model.fit` feeds it."""
        key = ("fit", batch_size)
        if key not in self.pipelines:
            self.pipelines[key] = _beside_training(_filled(self.train.batches(batch_size, prefetch=False),
                                                           batch_size).prefetch(1))
        return self.pipelines[key]

    def validation_dataset(self, batch: int):
        """The validation split in batches, as a `tf.data.Dataset` (for `model.evaluate`)."""
        key = ("validation", batch)
        if key not in self.pipelines:
            self.pipelines[key] = _beside_training(self.validation.batches(batch))
        return self.pipelines[key]

    def validation_slices(self, batch: int) -> Iterator[tuple[Any, Any]]:
        yield from self.validation_dataset(batch)

    def first_inputs(self, n: int) -> Any:
        """The first `n` training inputs, on the host (what a model's latency is timed on)."""
        return self.train.first(n)[0]

    def timing_batch(self, batch_size: int, steps_per_call: int, seed: int):
        """The first compiled call's input (x, y), for timing a step."""
        return next(iter(self.calls(batch_size, steps_per_call)))

    def timing_stream(self, batch_size: int, steps: int) -> WholeStream:
        """The split's first `steps` whole batches as a `WholeStream`: what the `fit` engine is
        timed on (it reads a stream, not stacked batches; inputs of several tensors stack not)."""
        steps = max(1, min(steps, self.train_examples // batch_size))
        return WholeStream(_beside_training(self.train.batches(batch_size, drop_remainder=True).take(steps)),
                           steps, steps * batch_size)


def _beside_training(pipeline):
    """`pipeline` with tf.data's autotuner off and one thread per op: both otherwise compete
    with the training step's threads for the CPU, and on a busy 2-core CPU streamed epochs
    then ran 2x or 4x slower in bursts (benchmarks/streaming.py: streamed/arrays 0.52-0.87
    from run to run, 0.96 without them)."""
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    options.threading.max_intra_op_parallelism = 1
    return pipeline.with_options(options)


def device_data(dataset, device: str) -> DeviceArrays | StreamedData:
    """The trainer's data for `dataset` (an `hpo.data.Dataset`) on `device`: arrays are
    copied there once; streamed splits stay streams."""
    import tensorflow as tf

    if dataset.streamed:
        train = dataset.streams["train"]
        y_example = tf.nest.map_structure(tf.constant, train.first(2)[1])
        return StreamedData(train, dataset.streams["validation"], y_example)
    with tf.device(device):
        return DeviceArrays(*(tf.nest.map_structure(tf.constant, arrays) for arrays in
                              (dataset.x_train, dataset.y_train, dataset.x_val, dataset.y_val)))


def leading(tree) -> int:
    """Examples in a tensor, or in a dict or tuple of tensors (the first one's leading dimension)."""
    import tensorflow as tf
    return int(tf.nest.flatten(tree)[0].shape[0])


def check_batch_size(data: DeviceArrays | StreamedData, batch_size: int) -> None:
    if data.train_examples // batch_size == 0:
        raise TrialFailed(f"batch_size {batch_size} is larger than the {data.train_examples} training examples")
