"""`package.module:function` references to a user's own code: data loaders, model builders,
any hook an experiment names.

An experiment file that names `module:function` runs that code, as a Python script does.
What it may name is kept to hooks: functions and classes from the user's modules (or any
installed package's), never the standard library or builtins (`os:system` is not a
loader), and nothing that is not a plain Python function or class. Modules are found as
`python -m hpo` finds them: the working folder first, then the experiment file's folder.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from hpo.errors import ConfigError

REFERENCE = re.compile(r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<attr>[A-Za-z_]\w*)$")
BUILT_IN_PACKAGE = "hpo"
_FORBIDDEN = frozenset(sys.stdlib_module_names) | frozenset(sys.builtin_module_names) | {"builtins", "__main__"}


def is_reference(text: Any) -> bool:
    return isinstance(text, str) and REFERENCE.match(text) is not None


def is_built_in(ref: str, registry: Mapping[str, Any] | tuple = ()) -> bool:
    """A registry name or a reference into hpo itself: safe to run from a received study."""
    return ref in registry or (is_reference(ref) and ref.split(".")[0].split(":")[0] == BUILT_IN_PACKAGE)


def add_search_path(*folders: str | Path) -> None:
    """Put the working folder, then `folders` (an experiment file's folder), on sys.path,
    as `python -m hpo` has it; the installed `hpo` script starts without the working folder."""
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)
    for folder in folders:
        folder = os.path.abspath(folder)
        if folder not in sys.path:
            position = max(sys.path.index(p) for p in ("", cwd) if p in sys.path) + 1
            sys.path.insert(position, folder)


def resolve(ref: str, registry: Mapping[str, Callable] | None = None, *, key: str | None = None,
            source: str | None = None) -> Callable:
    """The registry entry named `ref`, or the function or class `ref` names."""
    registry = registry or {}
    if ref in registry:
        return registry[ref]
    match = REFERENCE.match(ref) if isinstance(ref, str) else None
    if match is None:
        raise ConfigError(f"expected a built-in name or 'package.module:function', got {ref!r}",
                          key=key, source=source)
    module_name, attr = match["module"], match["attr"]
    top = module_name.split(".")[0]
    if top in _FORBIDDEN:
        raise ConfigError(f"{ref!r} names the Python standard library ('{top}'); a hook must be a function "
                          f"or class from your own module (for example my_task:load_data)", key=key, source=source)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure is the user's to fix
        raise ConfigError(f"cannot import module '{module_name}' for {ref!r}: {type(exc).__name__}: {exc} "
                          f"(searched the working folder, then the experiment file's folder where one was given)",
                          key=key, source=source) from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise ConfigError(f"module '{module_name}' has no function '{attr}' (from {ref!r})", key=key, source=source)
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        raise ConfigError(f"{ref!r} is a {type(obj).__name__}, not a Python function or class", key=key,
                          source=source)
    owner = (getattr(obj, "__module__", None) or "").split(".")[0]
    if owner in _FORBIDDEN:
        raise ConfigError(f"{ref!r} is {obj.__module__}.{obj.__qualname__} from the Python standard library; "
                          f"a hook must be a function or class of your own", key=key, source=source)
    return obj
