"""A folder of images, one subfolder per class, streamed through Keras's image loader."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any, Sequence

from hpo.errors import ConfigError

_SPLIT_FOLDERS = ("train", "validation", "test")


def load_image_folder(path: str | None = None, image_size: Sequence[int] = (64, 64), color_mode: str = "rgb",
                      validation_split: float = 0.2, seed: int = 0) -> dict[str, Any]:
    """`path/<class>/<image>` (jpeg, png, bmp, gif), read by
    `keras.utils.image_dataset_from_directory` at `image_size`, pixels scaled to 0..1, labels
    the class folders' indices in sorted order. With `path/train/<class>/...` and
    `path/validation/<class>/...` (and optionally `path/test/...`) the folders are the splits;
    otherwise `validation_split` of the images (chosen by `seed`) validate. The images are
    streamed (decoded a batch at a time), never held in memory all at once."""
    import keras
    import tensorflow as tf

    if path is None:
        raise ConfigError("the image_folder loader needs data.options.path, the folder of class folders",
                          key="data.options")
    root = Path(str(path)).expanduser()
    if not root.is_dir():
        raise ConfigError(f"{root}: no such folder", key="data.options.path")
    size = tuple(int(v) for v in image_size)
    common = dict(labels="inferred", label_mode="int", color_mode=color_mode, image_size=size, batch_size=None,
                  shuffle=True, seed=seed)

    def read(folder: Path, **extra):
        try:
            with contextlib.redirect_stdout(io.StringIO()):   # keras prints "Found N files"; we log our own
                return keras.utils.image_dataset_from_directory(str(folder), **common, **extra)
        except ValueError as exc:
            raise ConfigError(f"{folder}: {exc}", key="data.options.path") from None

    if (root / "train").is_dir() and (root / "validation").is_dir():
        splits = {name: read(root / name) for name in _SPLIT_FOLDERS if (root / name).is_dir()}
    else:
        train, validation = read(root, validation_split=validation_split, subset="both")
        splits = {"train": train, "validation": validation}
    classes = list(splits["train"].class_names)

    def scale(x, y):
        return x / 255.0, y
    result: dict[str, Any] = {name: ds.map(scale, num_parallel_calls=tf.data.AUTOTUNE) for name, ds in splits.items()}
    result["num_classes"] = len(classes)
    result["source"] = f"image folder {root} ({len(classes)} classes: {', '.join(classes[:10])}" \
                       f"{', ...' if len(classes) > 10 else ''})"
    return result
