"""The data line a search logs: where the data came from, said once, and what the model outputs."""

import numpy as np

from hpo.data.dataset import Dataset


def dataset(source: str, y: np.ndarray, classes) -> Dataset:
    x = np.zeros((len(y), 5), "float32")
    return Dataset(name="mymod:load", source=source, x_train=x[:6], y_train=y[:6], x_val=x[6:8], y_val=y[6:8],
                   x_test=x[8:], y_test=y[8:], num_classes=classes)


def test_the_data_line_names_its_source_once_and_a_single_output_as_one():
    values = dataset("mymod:load", np.linspace(0, 1, 10).astype("float32"), 1)
    assert values.describe() == "mymod:load: 6 train / 2 validation / 2 test, in memory, input (5,), 1 output"
    labels = dataset("my.csv", np.arange(10) % 3, 3)
    assert labels.describe() == ("mymod:load from my.csv: 6 train / 2 validation / 2 test, in memory, "
                                 "input (5,), 3 classes")
