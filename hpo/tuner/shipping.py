"""Whether `build_model` can travel to worker processes, checked before any study is written.

Workers get `build_model` by value (cloudpickle, `hpo.tuner.trainer.TrainerFactory`): the
function, its closure and the globals it reads. Some objects cannot be pickled at all (a
lock, a file open for writing, a socket, a live TensorFlow session). A search with workers
finds out here, before the study folder exists, and the error names the object, why it
cannot be pickled and the way out, instead of a `PicklingError` from inside multiprocessing
after the study was written.

A build that pickles large (`LARGE_BUILD_BYTES`) travels to every worker each time one
starts, on top of the search's data, which goes once inside the trainer factory. The usual
cause is a global array of the script that `build_model` reads only for a shape
(`x_train.shape[1:]`): cloudpickle copies every global a `__main__` function reads. The
warning names the largest such object so that the script can read the shape outside.
"""

from __future__ import annotations

import logging
import types
from typing import Any, Iterator

log = logging.getLogger("hpo.tuner")

_MAX_DEPTH = 6      # how far into closures, globals and attributes the culprit is looked for
# A build larger than this is copied to every worker at each start; a model function
# itself pickles to a few kilobytes, so this much is data carried along by mistake.
LARGE_BUILD_BYTES = 1 << 20


def check_shippable(build: Any, workers: str) -> None:
    """ValueError when `build` cannot be pickled by value; `workers` is how the user asked for
    workers (`workers=2`, `scheduler='tcp://...'`)."""
    import cloudpickle

    try:
        size = len(cloudpickle.dumps(build))
    except Exception as exc:  # noqa: BLE001 - any pickling failure is reported the same way
        path, culprit, error = _culprit(build, exc)
        name = path[-1].lstrip(".")
        raise ValueError(
            f"build_model cannot be sent to the worker processes ({workers}): {name}, which it refers to "
            f"({' -> '.join(path)}), is {_describe(culprit)}, and that cannot be pickled ({type(error).__name__}: "
            f"{error}). Create it inside build_model (each worker then makes its own), or use workers=1.") from None
    if size > LARGE_BUILD_BYTES:
        log.warning("%s", large_build_message(build, size, workers))


def large_build_message(build: Any, size: int, workers: str) -> str:
    """Why a build pickles to `size` bytes: the largest object it carries, by the names that
    lead to it."""
    path, biggest = _largest(build)
    said = ""
    if len(path) > 1:
        said = (f"; {_megabytes(biggest)} of it is {path[-1].lstrip('.')} ({' -> '.join(path)}, "
                f"{_describe(_value_at(build, path))}), which build_model reads")
    return (f"build_model pickles to {_megabytes(size)}, copied to every worker process ({workers}) each time one "
            f"starts{said}. A function of the script carries every global it reads; read what build_model "
            f"needs from it outside (input_shape = x_train.shape[1:]) or pass it through hp, so that only the "
            f"search's data, sent once per worker, carries the arrays.")


def _largest(root: Any) -> tuple[list[str], int]:
    """The names leading to the largest object under `root` by pickled size, followed down
    while one referent holds most of its parent, and that size."""
    import cloudpickle

    path, current, size = [_name_of(root, "build_model")], root, 0
    for _ in range(_MAX_DEPTH):
        sizes = []
        for name, child in _referents(current):
            try:
                sizes.append((len(cloudpickle.dumps(child)), name, child))
            except Exception:  # noqa: BLE001 - a referent that does not pickle alone is not the large one
                continue
        if not sizes:
            break
        child_size, name, child = max(sizes, key=lambda s: s[0])
        if size and child_size < size / 2:
            break
        path.append(name)
        current, size = child, child_size
    return path, size


def _value_at(root: Any, path: list[str]) -> Any:
    current = root
    for name in path[1:]:
        current = next(child for child_name, child in _referents(current) if child_name == name)
    return current


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _culprit(root: Any, error: Exception) -> tuple[list[str], Any, Exception]:
    """The deepest object under `root` that does not pickle, the names leading to it, and its
    error: the first referent that fails, followed down while one of its own referents fails."""
    import cloudpickle

    path, current = [_name_of(root, "build_model")], root
    for _ in range(_MAX_DEPTH):
        for name, child in _referents(current):
            try:
                cloudpickle.dumps(child)
            except Exception as exc:  # noqa: BLE001 - this referent is (or holds) the culprit
                path.append(name)
                current, error = child, exc
                break
        else:
            break
    return path, current, error


def _referents(obj: Any) -> Iterator[tuple[str, Any]]:
    """What pickling `obj` by value pickles too, each with the name the user knows it by."""
    if isinstance(obj, types.MethodType):
        yield _name_of(obj.__self__, "self"), obj.__self__
        yield obj.__func__.__name__, obj.__func__
        return
    if isinstance(obj, types.FunctionType):
        for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ()):
            try:
                yield name, cell.cell_contents
            except ValueError:      # an empty cell
                continue
        for name in _global_names(obj.__code__):
            if name in obj.__globals__:
                yield name, obj.__globals__[name]
        for i, value in enumerate(obj.__defaults__ or ()):
            yield f"default {i}", value
        for name, value in (obj.__kwdefaults__ or {}).items():
            yield name, value
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield f"[{key!r}]", value
        return
    if isinstance(obj, (list, tuple, set, frozenset)):
        for i, value in enumerate(obj):
            yield f"[{i}]", value
        return
    attributes = getattr(obj, "__dict__", None)
    if isinstance(attributes, dict):
        for name, value in attributes.items():
            yield f".{name}", value


def _global_names(code: types.CodeType) -> Iterator[str]:
    """Globals the code reads, nested functions' and comprehensions' included."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


def _name_of(obj: Any, default: str) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or default


def _describe(obj: Any) -> str:
    kind = f"a {type(obj).__module__}.{type(obj).__qualname__}".replace("a builtins.", "a ")
    name, mode = getattr(obj, "name", None), getattr(obj, "mode", None)
    if isinstance(name, str) and isinstance(mode, str):        # a file object
        return f"{kind} (the file {name!r} opened with mode {mode!r})"
    return kind
