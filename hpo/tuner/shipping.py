"""Whether `build_model` can travel to worker processes, checked before any study is written.

Workers get `build_model` by value (cloudpickle, `hpo.tuner.trainer.TrainerFactory`): the
function, its closure and the globals it reads. Some objects cannot be pickled at all (a
lock, a file open for writing, a socket, a live TensorFlow session). A search with workers
finds out here, before the study folder exists, and the error names the object, why it
cannot be pickled and the way out, instead of a `PicklingError` from inside multiprocessing
after the study was written.
"""

from __future__ import annotations

import types
from typing import Any, Iterator

_MAX_DEPTH = 6      # how far into closures, globals and attributes the culprit is looked for


def check_shippable(build: Any, workers: str) -> None:
    """ValueError when `build` cannot be pickled by value; `workers` is how the user asked for
    workers (`workers=2`, `scheduler='tcp://...'`)."""
    import cloudpickle

    try:
        cloudpickle.dumps(build)
    except Exception as exc:  # noqa: BLE001 - any pickling failure is reported the same way
        path, culprit, error = _culprit(build, exc)
        name = path[-1].lstrip(".")
        raise ValueError(
            f"build_model cannot be sent to the worker processes ({workers}): {name}, which it refers to "
            f"({' -> '.join(path)}), is {_describe(culprit)}, and that cannot be pickled ({type(error).__name__}: "
            f"{error}). Create it inside build_model (each worker then makes its own), or use workers=1.") from None


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
