"""Arrays from files: `.npz` archives and `.csv` tables, named by `data.options.path`."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from hpo.errors import ConfigError


def load_npz(path: str | None = None, x: str | None = None, y: str | None = None) -> tuple[np.ndarray, np.ndarray, str]:
    """Inputs and targets from a NumPy archive. `x` and `y` name its arrays (default 'x' and
    'y'); an archive in Keras's layout (x_train, y_train, x_test, y_test) is joined, and hpo
    splits it as any other arrays."""
    file = _existing(path, "npz")
    try:
        archive = np.load(file, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - not an archive, or a damaged one
        raise ConfigError(f"{file} is not a readable .npz archive: {exc}", key="data.options.path") from None
    with archive:
        names = list(archive.files)
        if x is None and y is None and "x" not in names and {"x_train", "y_train"} <= set(names):
            parts = [p for p in ("train", "test") if f"x_{p}" in names and f"y_{p}" in names]
            return (np.concatenate([archive[f"x_{p}"] for p in parts]),
                    np.concatenate([archive[f"y_{p}"] for p in parts]),
                    f"{file} (x_{'+'.join(parts)}, y_{'+'.join(parts)})")
        x, y = x or "x", y or "y"
        for option, name in (("x", x), ("y", y)):
            if name not in names:
                raise ConfigError(f"{file} has no array {name!r}; it holds {names}: name the inputs and the "
                                  f"targets with data.options.x and data.options.y", key=f"data.options.{option}")
        return archive[x], archive[y], f"{file} (arrays {x!r}, {y!r})"


def load_csv(path: str | None = None, target: str | int = -1,
             delimiter: str = ",") -> tuple[np.ndarray, np.ndarray, str]:
    """A table of numbers, one example per row: `target` names the target column (its header,
    or its index; default the last column), every other column is an input. A first row with
    any non-numeric cell is the header. A target column of words (class names) becomes class
    indices 0..K-1 in sorted order of the names."""
    file = _existing(path, "csv")
    with open(file, newline="") as handle:
        rows = [row for row in csv.reader(handle, delimiter=delimiter) if row]
    if not rows:
        raise ConfigError(f"{file} is empty", key="data.options.path")
    header = rows[0] if not all(_is_number(cell) for cell in rows[0]) else None
    body = rows[1:] if header else rows
    width = len(rows[0])
    column = _target_column(target, header, width, file)
    inputs, targets = [], []
    for line, row in enumerate(body, start=2 if header else 1):
        if len(row) != width:
            raise ConfigError(f"{file}, line {line}: {len(row)} columns, expected {width} as in the first row",
                              key="data.options.path")
        values = [cell for i, cell in enumerate(row) if i != column]
        bad = next((cell for cell in values if not _is_number(cell)), None)
        if bad is not None:
            raise ConfigError(f"{file}, line {line}: {bad!r} is not a number; expected numeric input columns",
                              key="data.options.path")
        inputs.append([float(cell) for cell in values])
        targets.append(row[column].strip())
    if not inputs:
        raise ConfigError(f"{file} has a header but no rows", key="data.options.path")
    y, described = _targets(targets)
    name = header[column] if header else f"column {column}"
    return np.asarray(inputs, dtype="float32"), y, f"{file} (target {name!r}{described})"


def _existing(path: str | None, kind: str) -> Path:
    if path is None:
        raise ConfigError(f"the {kind} loader needs data.options.path, the file to read", key="data.options")
    file = Path(str(path)).expanduser()
    if not file.is_file():
        raise ConfigError(f"{file}: no such file", key="data.options.path")
    return file


def _target_column(target: str | int, header: list[str] | None, width: int, file: Path) -> int:
    if isinstance(target, int) and not isinstance(target, bool):
        if not -width <= target < width:
            raise ConfigError(f"{file} has {width} columns; the target column {target} is not one of them",
                              key="data.options.target")
        return target % width
    names = [h.strip() for h in header] if header else []
    if str(target) not in names:
        where = f"its header names {names}" if header else "it has no header row"
        raise ConfigError(f"{file} has no column {target!r}: {where}", key="data.options.target")
    return names.index(str(target))


def _targets(cells: list[str]) -> tuple[np.ndarray, str]:
    if all(_is_number(c) for c in cells):
        values = np.asarray([float(c) for c in cells])
        if np.all(np.mod(values, 1) == 0):
            return values.astype("int32"), ""
        return values.astype("float32"), ""
    classes = sorted(set(cells))
    index = {name: i for i, name in enumerate(classes)}
    return np.asarray([index[c] for c in cells], dtype="int32"), f", classes {classes}"


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
