"""A search over `tf.data` splits: the loader returns named splits, and hpo streams them.

    python -m hpo search examples/tfdata.yaml

`digits_splits` returns `{"train": ..., "validation": ..., "test": ...}`, each an unbatched
`tf.data.Dataset` of `(image, label)` elements. hpo batches each split by the trial's
`batch_size`, prefetches it, and never gathers it into one array, so a pipeline that reads
files or decodes images as it goes trains the same way. The train split is shuffled by the
pipeline itself (as for `model.fit`, hpo keeps a dataset's own order).
"""

import numpy as np


def digits_splits(shuffle_buffer: int = 512, seed: int = 0):
    """scikit-learn's 8x8 digits as three tf.data splits (70% / 20% / 10%), built from a
    generator so that no split exists as an array that hpo could take instead."""
    import tensorflow as tf
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.images / 16.0).astype("float32")
    y = bunch.target.astype("int32")
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_train, n_val = int(0.7 * len(x)), int(0.2 * len(x))
    bounds = {"train": (0, n_train), "validation": (n_train, n_train + n_val), "test": (n_train + n_val, len(x))}
    spec = (tf.TensorSpec([8, 8], tf.float32), tf.TensorSpec([], tf.int32))

    def stream(first: int, last: int) -> tf.data.Dataset:
        def examples():
            for i in range(first, last):
                yield x[i], y[i]
        return tf.data.Dataset.from_generator(examples, output_signature=spec)

    splits = {name: stream(*bounds[name]) for name in bounds}
    splits["train"] = splits["train"].shuffle(shuffle_buffer, seed=seed)
    splits["source"] = "sklearn load_digits, streamed from a Python generator"
    return splits


if __name__ == "__main__":
    splits = digits_splits()
    for name in ("train", "validation", "test"):
        print(name, sum(1 for _ in splits[name]), "examples")
