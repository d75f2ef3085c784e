"""A model with two inputs and two outputs tuned by `hpo search`, ranked by one output's metric.

    python -m hpo search examples/multi_io.yaml

The loader returns `x` and `y` as dicts keyed by the model's input names (`a`, `b`) and
output names (`price`, a value; `category`, one of 3 classes), as Keras's `fit` takes them;
hpo splits every array by the same shuffle and gives the builder `input_shape` and
`num_classes` in the same structure. The experiment gives a loss and metrics per output name,
so trials log what Keras logs (`price_mae`, `category_accuracy`, `val_price_mae`, ...), and
`search.objective: val_price_mae` ranks them. `auto` trains the model with the `fit` engine.
"""

import keras
import numpy as np


def load(samples=240, form="dict", splits=None):
    """Inputs `a` [n, 4] and `b` [n, 3]; `price` = a0 + b1 / 2; `category` counts a1 > 0 and
    b0 > 0 (0, 1 or 2). `form`: 'dict' (keyed by name) or 'tuple' (in the model's order).
    `splits`: None (arrays for hpo to split), 'arrays' (named train / validation / test
    splits) or 'tf.data' (train and validation as tf.data splits of (dict, dict) elements)."""
    rng = np.random.default_rng(1)
    a = rng.normal(size=(samples, 4)).astype("float32")
    b = rng.normal(size=(samples, 3)).astype("float32")
    price = (a[:, 0] + 0.5 * b[:, 1]).astype("float32")
    category = (a[:, 1] > 0).astype("int32") + (b[:, 0] > 0).astype("int32")
    x, y = ({"a": a, "b": b}, {"price": price, "category": category}) if form == "dict" else ((a, b), (price, category))
    if splits is None:
        return x, y

    def rows(tree, start, end):
        if isinstance(tree, dict):
            return {name: v[start:end] for name, v in tree.items()}
        return tuple(v[start:end] for v in tree)
    cut, test = samples * 3 // 4, samples * 7 // 8
    parts = {"train": (rows(x, 0, cut), rows(y, 0, cut)), "validation": (rows(x, cut, test), rows(y, cut, test)),
             "test": (rows(x, test, samples), rows(y, test, samples))}
    if splits == "tf.data":
        import tensorflow as tf
        parts["train"] = tf.data.Dataset.from_tensor_slices(parts["train"])
        parts["validation"] = tf.data.Dataset.from_tensor_slices(parts["validation"])
    return parts


def build(config, input_shape, num_classes):
    """Named inputs `a`, `b` (shapes from `input_shape["a"]`, `input_shape["b"]`), one shared
    hidden layer, and named outputs `price` (linear) and `category` (logits over
    `num_classes["category"]`)."""
    a, b = keras.Input(input_shape["a"], name="a"), keras.Input(input_shape["b"], name="b")
    hidden = keras.layers.Dense(int(config["units"]), activation="relu")(keras.layers.Concatenate()([a, b]))
    category = keras.layers.Dense(num_classes["category"], name="category")(hidden)
    return keras.Model({"a": a, "b": b}, {"price": keras.layers.Dense(1, name="price")(hidden), "category": category})


if __name__ == "__main__":
    x, y = load()
    print({name: v.shape for name, v in x.items()}, {name: v.shape for name, v in y.items()})
