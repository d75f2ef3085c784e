"""Small loaders in every form a loader may return, for the data tests: arrays, named array
splits, named tf.data splits, and broken variants of each (the pre-flight's catalogue)."""

import numpy as np


def _tabular(samples=120, features=6, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, features)).astype("float32")
    y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0).astype("int32")     # 3 classes
    return x, y


def pair():
    return _tabular()


def triple():
    return (*_tabular(), "three arrays")


def array_splits(with_test=True):
    x, y = _tabular()
    splits = {"train": (x[:80], y[:80]), "validation": (x[80:100], y[80:100])}
    if with_test:
        splits["test"] = (x[100:], y[100:])
    return splits


def _generator_stream(x, y):
    """A stream whose length tf.data does not know (a Python generator)."""
    import tensorflow as tf

    def examples():
        yield from zip(x, y)
    spec = (tf.TensorSpec(x.shape[1:], tf.as_dtype(x.dtype)), tf.TensorSpec(y.shape[1:], tf.as_dtype(y.dtype)))
    return tf.data.Dataset.from_generator(examples, output_signature=spec)


STREAM_LOADS = [0]             # calls of stream_splits so far


def stream_splits(targets="classes", generator=True, with_test=True):
    """tf.data splits of `targets`: 'classes' (0..2), 'float', 'binary', 'onehot', 'multilabel'."""
    import tensorflow as tf

    STREAM_LOADS[0] += 1
    x, y = _tabular()
    y = {"classes": y, "float": x[:, 0] * 2.0 + 1.0, "binary": (y > 0).astype("int32"),
         "onehot": np.eye(3, dtype="float32")[y],
         "multilabel": np.stack([x[:, 0] > 0, x[:, 1] > 0], axis=1).astype("float32")}[targets]
    make = _generator_stream if generator else (lambda a, b: tf.data.Dataset.from_tensor_slices((a, b)))
    splits = {"train": make(x[:80], y[:80]), "validation": make(x[80:100], y[80:100])}
    if with_test:
        splits["test"] = (x[100:], y[100:])     # an array split beside streamed ones
    return splits


# --- broken loaders: each should stop the pre-flight with exit 2 --------------------------------

def no_validation():
    x, y = _tabular()
    return {"train": (x, y)}


def unknown_split():
    return {**array_splits(), "holdout": array_splits()["test"]}


def split_not_a_pair():
    return {**array_splits(), "validation": [1, 2, 3]}


def batched_stream():
    splits = stream_splits(generator=False)
    splits["train"] = splits["train"].batch(16)
    return splits


def infinite_stream():
    splits = stream_splits(generator=False)
    splits["train"] = splits["train"].repeat()
    return splits


def string_stream():
    import tensorflow as tf

    splits = stream_splits()
    splits["validation"] = tf.data.Dataset.from_tensor_slices((["a", "b"], [0, 1]))
    return splits


def nan_stream():
    import tensorflow as tf

    x, y = _tabular()
    x[5, 2] = np.nan
    return {"train": tf.data.Dataset.from_tensor_slices((x, y)), "validation": array_splits()["validation"]}


def negative_label_stream():
    x, y = _tabular()
    y[7] = -1
    return {"train": _generator_stream(x, y), "validation": array_splits()["validation"]}


def unseeded_shuffle():
    """Arrays in a different order on every call (a shuffle without a seed): the splits differ."""
    x, y = _tabular(samples=200)
    order = np.random.default_rng().permutation(len(x))
    return x[order], y[order]


def label_past_num_classes():
    splits = array_splits()
    x, y = splits["train"]
    y = y.copy()
    y[40] = 3                    # the loader says there are 3 classes: 0, 1 and 2
    return {**splits, "train": (x, y), "num_classes": 3}


def label_past_num_classes_in_a_second_output():
    splits = array_splits()
    x, y = splits["train"]
    bad = y.copy()
    bad[7] = 5
    return {"train": (x, {"a": y, "b": bad}), "validation": (splits["validation"][0],
            {"a": splits["validation"][1], "b": splits["validation"][1]}), "num_classes": 3}


def streamed_label_past_num_classes():
    splits = array_splits()
    x, y = splits["train"]
    y = y.copy()
    y[0] = 9
    return {"train": _generator_stream(x, y), "validation": _generator_stream(*splits["validation"]),
            "num_classes": 3}


def validation_label_past_train():
    splits = array_splits()
    x, y = splits["validation"]
    y = y.copy()
    y[5] = int(splits["train"][1].max()) + 4
    return {"train": _generator_stream(*splits["train"]), "validation": _generator_stream(x, y)}


def shapes_differ():
    splits = array_splits()
    x, y = splits["validation"]
    splits["validation"] = (x[:, :4], y)
    return splits


def bare_dataset():
    return stream_splits(generator=False)["train"]


def nan_in_named_arrays():
    splits = array_splits()
    splits["test"][0][3, 1] = np.inf
    return splits


# --- a stream larger than the memory the streaming test allows -----------------------------------

BIG_FEATURES = 16384           # 64 KiB per example
BIG_EXAMPLES = 3_000           # 188 MiB in all
PULLED = [0]                   # examples the generator has produced so far


def big_stream_splits(examples=BIG_EXAMPLES):
    """A train split of 188 MiB made by a Python generator, one example at a time, its length
    declared (so loading does not count it) and its classes named (so loading does not scan it)."""
    import tensorflow as tf

    centres = np.random.default_rng(1).normal(size=(4, BIG_FEATURES)).astype("float32")

    def generate():
        rng = np.random.default_rng(0)
        for i in range(examples):
            PULLED[0] += 1
            label = i % 4
            yield centres[label] + rng.standard_normal(BIG_FEATURES, dtype="float32"), label
    spec = (tf.TensorSpec([BIG_FEATURES], tf.float32), tf.TensorSpec([], tf.int32))
    train = tf.data.Dataset.from_generator(generate, output_signature=spec)
    train = train.apply(tf.data.experimental.assert_cardinality(examples))
    labels = np.arange(100) % 4
    noise = np.random.default_rng(2).standard_normal((100, BIG_FEATURES), dtype="float32")
    validation = (centres[labels] + noise, labels)
    return {"train": train, "validation": validation, "num_classes": 4}
