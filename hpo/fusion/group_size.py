"""`training.fuse: auto`: how many trials of one architecture to fuse, from the device's free
memory and the fused step's measured throughput.

Fusing more trials pays while the device has idle width (a GPU's SMs, a CPU's vector units
behind small matmuls) and stops paying once the step is compute-bound; past that point a
bigger group only delays every member's results. So the group size is measured per
architecture: the per-trial time of a training step at K = 1 (the unfused program), 2, 4,
8, ... up to the memory cap and the candidates at hand, and the smallest K within
`NEAR_BEST` of the best per-trial time wins. Every doubling is timed because the curve is
not convex: in graph mode on a 2-core CPU a 2 x 32 MLP gained 4% from K=1 to 2, then 3.5x by
K=8. The device's free memory caps K before any probe: a trial's weights, gradients and
two optimizer slots, plus its activations.

Probing costs one compile per K tried, a few seconds in all (the fused programs are kept,
so the chosen one is not compiled again), so groups with too little work to repay it take
`PROVISIONAL_K` unmeasured, except on a CPU for models with over `CPU_PROVISIONAL_MAX_MACS`
multiply-adds per example: there a step is compute-bound and fusing shares little. Per-trial
step time, unfused over fused K=8, on this 2-core CPU (`benchmarks/fused_step_profile.py`,
XLA): MLP 2 x 128 (118K MACs per example) 1.45-1.6, 2 x 256 (268K) 1.30, 2 x 512 (668K) 0.90;
the MNIST CNN (1.1M, graph mode) 0.83.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from hpo.config import FUSE_AUTO_CEILING as AUTO_CEILING
from hpo.training.devices import device_type, usable_cores

log = logging.getLogger("hpo.train")

MEMORY_SHARE = 0.25         # of the device's free memory, for one fused group
NEAR_BEST = 1.10            # a smaller K within 10% of the best per-trial time is preferred
PROVISIONAL_K = 8           # unmeasured: where the 2 x 128 MLP's curve flattened on a 2-core CPU
CPU_PROVISIONAL_MAX_MACS = 400_000   # bigger models on a CPU do not fuse unmeasured (see above)
# On a one-thread CPU worker (`local` / `dask` on a 2-core machine) a fused step has no idle
# core to fill and shares only the fixed per-step work: at K=8 a 2 x 32 MLP (26K MACs) still
# gains, a 2 x 128 (118K) does not (`fused_step_profile.py --threads 1`).
CPU_ONE_THREAD_PROVISIONAL_MAX_MACS = 60_000
MIN_STEPS_TO_PROBE = 10_000  # the group's total training steps that repay a probe's compiles


@dataclass
class FuseChoice:
    """What was decided for one architecture on one device."""
    k: int
    memory_cap: int
    per_trial_ms: dict[int, float] = field(default_factory=dict)   # K -> one trial's share of a step
    settled: bool = False     # False: the candidates, not the memory cap, limited the probe

    def describe(self) -> str:
        curve = ", ".join(f"K={k}: {ms:.3f} ms" for k, ms in sorted(self.per_trial_ms.items()))
        return f"fuse {self.k} (memory allows {self.memory_cap}; per-trial step {curve or 'not measured'})"


@dataclass
class FuseDecisions:
    """A trainer's decisions, by (architecture signature, batch size, device)."""
    choices: dict[tuple, FuseChoice] = field(default_factory=dict)
    memory_caps: dict[tuple, int] = field(default_factory=dict)
    provisional: dict[tuple, int] = field(default_factory=dict)     # `provisional_k` per key


def bytes_per_trial(model, batch_size: int) -> int:
    """One trial's share of a fused group's memory: weights, gradients, two optimizer slots
    and an update temporary (5 copies of the parameters), and its forward activations kept
    for the backward pass, their gradients and dropout masks (3 copies), in float32."""
    parameters = sum(math.prod(v.shape) for v in model.trainable_variables)
    activations = 0
    for layer in model.layers:
        shape = getattr(layer, "output", None)
        shape = getattr(shape, "shape", None)
        if shape is not None:
            activations += math.prod(d for d in shape[1:] if d is not None)
    return 4 * (5 * parameters + 3 * batch_size * activations)


def macs_per_example(model) -> int:
    """Multiply-adds of one example's forward pass through the Dense and Conv2D layers."""
    total = 0
    for layer in model.layers:
        kernel = getattr(layer, "kernel", None)
        if kernel is None:
            continue
        kind = type(layer).__name__
        if kind == "Dense":
            total += math.prod(kernel.shape)
        elif kind == "Conv2D":
            height, width = layer.output.shape[1:3]
            total += height * width * math.prod(kernel.shape)
    return int(total)


def provisional_k(model, device: str, cpu_threads: int | None = None) -> int:
    """The group size to use unmeasured (a group too small to repay a probe). `cpu_threads`:
    the threads this process's CPU kernels use (None: ask TensorFlow)."""
    if device_type(device) != "CPU":
        return PROVISIONAL_K
    threads = cpu_threads if cpu_threads is not None else kernel_threads()
    limit = CPU_ONE_THREAD_PROVISIONAL_MAX_MACS if threads == 1 else CPU_PROVISIONAL_MAX_MACS
    return 1 if macs_per_example(model) > limit else PROVISIONAL_K


def kernel_threads() -> int:
    """The threads TensorFlow's CPU kernels run on here: what a `local` or `dask` worker set,
    else every core this process may use."""
    import tensorflow as tf

    return tf.config.threading.get_intra_op_parallelism_threads() or usable_cores()


def memory_cap(per_trial: int, free_bytes: int | None) -> int:
    """How many trials fit in `MEMORY_SHARE` of the free memory (`AUTO_CEILING` when unknown)."""
    if free_bytes is None:
        return AUTO_CEILING
    return max(1, min(AUTO_CEILING, int(free_bytes * MEMORY_SHARE) // max(per_trial, 1)))


def free_memory(device: str) -> int | None:
    """Free bytes on `device`: host RAM for a CPU, the GPU's limit minus what TensorFlow holds."""
    if device_type(device) == "CPU":
        import psutil
        return int(psutil.virtual_memory().available)
    try:
        import tensorflow as tf
        from tensorflow.python.client import device_lib

        name = device.split("device:")[-1].upper()
        limit = next(d.memory_limit for d in device_lib.list_local_devices() if d.name.upper().endswith(name))
        return int(limit - tf.config.experimental.get_memory_info(name)["current"])
    except Exception:   # noqa: BLE001 - unknown: rely on the OOM fallback (a group that fails reruns unfused)
        return None


def probe_sizes(cap: int, candidates: int) -> list[int]:
    """The group sizes to time after K=1: doublings up to the memory cap, and no further than
    the first power of two that holds all the candidates."""
    limit = min(cap, 1 << max(1, math.ceil(math.log2(max(candidates, 2)))))
    sizes, k = [], 2
    while k <= limit:
        sizes.append(k)
        k *= 2
    return sizes


def smallest_near_best(per_trial_ms: dict[int, float]) -> int:
    """The smallest K whose per-trial step time is within `NEAR_BEST` of the best measured."""
    best = min(per_trial_ms.values())
    return min(k for k, ms in per_trial_ms.items() if ms <= NEAR_BEST * best)
