"""Choosing the device a trial runs on, and the compile mode that suits it.

The selection functions take plain lists of device names so they can be tested against
lists a test constructs, as well as against TensorFlow's logical devices.
"""

from __future__ import annotations

import os
import re
from typing import Sequence

from hpo.errors import ConfigError

_DEVICE = re.compile(r"^/?(?:device:)?(cpu|gpu)(?::(\d+))?$", re.IGNORECASE)


def normalize_device(name: str) -> str:
    """'gpu', 'GPU:1', '/device:GPU:1' -> '/device:GPU:1' style names TensorFlow lists."""
    match = _DEVICE.match(name.strip())
    if not match:
        raise ConfigError(f"expected 'auto', 'cpu', 'gpu' or a name like 'gpu:1', got {name!r}",
                          key="training.device")
    kind, index = match.group(1).upper(), int(match.group(2) or 0)
    return f"/device:{kind}:{index}"


def select_device(requested: str, available: Sequence[str], slot: int = 0) -> str:
    """The device for worker `slot`: with 'auto', GPUs round-robin by slot, else CPUs by slot."""
    names = [normalize_device(d) for d in available]
    if requested == "auto":
        gpus = [d for d in names if ":GPU:" in d]
        pool = gpus or [d for d in names if ":CPU:" in d]
        if not pool:
            raise RuntimeError(f"no CPU or GPU among the available devices {list(available)}")
        return pool[slot % len(pool)]
    wanted = normalize_device(requested)
    if wanted not in names:
        raise ConfigError(f"device {requested!r} is not available; this machine has {', '.join(names)}",
                          key="training.device")
    return wanted


def device_type(device: str) -> str:
    return "GPU" if ":GPU:" in device.upper() else "CPU"


def usable_cores() -> int:
    """The cores this process may run on: under `taskset -c 0` that is 1, where
    `os.cpu_count()` still says how many the machine has."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def available_devices() -> list[str]:
    import tensorflow as tf
    return [d.name for d in tf.config.list_logical_devices() if d.device_type in ("CPU", "GPU")]


def enable_memory_growth() -> None:
    """Let several trials share a GPU instead of the first one taking all its memory."""
    import tensorflow as tf
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # already initialised: the setting is fixed for this process
            pass
