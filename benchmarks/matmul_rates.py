"""How much fusion can gain on this CPU: the FLOP rate of one trial's MLP matmuls against the
same matmuls fused over K trials, and against a large matmul.

    python benchmarks/matmul_rates.py [--units 128] [--k 8]

Times the training matmuls of a 2-layer MLP at batch 64 (first layer: forward and kernel
gradient; second layer: forward and both gradients), 32 steps per compiled call, medians of
15 calls, in XLA and graph mode. The fused first layer is one wide matmul over K trials'
kernels; the fused second layer is one batched matmul. If one trial's matmuls already run
near the large-matmul rate, fusing cannot speed them up much.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tensorflow as tf  # noqa: E402

from benchmarks.machine import cpu_description  # noqa: E402

STEPS, BATCH, INPUTS = 32, 64, 784


def rate(function, args, flops_per_step: float, jit: bool) -> tuple[float, float]:
    """(ms per step, GFLOP/s)."""
    compiled = tf.function(function, jit_compile=jit, autograph=False)
    compiled(*args).numpy()
    times = []
    for _ in range(15):
        started = time.perf_counter()
        compiled(*args).numpy()
        times.append(time.perf_counter() - started)
    seconds = statistics.median(times) / STEPS
    return seconds * 1e3, flops_per_step / seconds / 1e9


def first_layer(x, kernel, grad_out):
    total = tf.zeros(())
    for step in range(STEPS):
        y = tf.matmul(x + float(step), kernel)
        grad_kernel = tf.matmul(x, grad_out + float(step), transpose_a=True)
        total += y[0, 0] + grad_kernel[0, 0]
    return total


def second_layer(h, kernel, grad_out):
    """Batched over a leading trial axis (size 1 for one trial)."""
    total = tf.zeros(())
    for step in range(STEPS):
        y = tf.matmul(h + float(step), kernel)
        grad_in = tf.matmul(grad_out + float(step), kernel, transpose_b=True)
        grad_kernel = tf.matmul(h, grad_out + float(step), transpose_a=True)
        total += y[0, 0, 0] + grad_in[0, 0, 0] + grad_kernel[0, 0, 0]
    return total


def big(a, b):
    total = tf.zeros(())
    for step in range(STEPS):
        total += tf.matmul(a + float(step), b)[0, 0]
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args()
    units, k = args.units, args.k
    u = tf.random.uniform
    cases = [
        ("first layer, one trial", first_layer, (u((BATCH, INPUTS)), u((INPUTS, units)), u((BATCH, units))),
         4 * BATCH * INPUTS * units, 1),
        (f"first layer, K={k} as one wide matmul", first_layer,
         (u((BATCH, INPUTS)), u((INPUTS, k * units)), u((BATCH, k * units))), 4 * BATCH * INPUTS * units * k, k),
        ("second layer, one trial", second_layer, (u((1, BATCH, units)), u((1, units, units)), u((1, BATCH, units))),
         6 * BATCH * units * units, 1),
        (f"second layer, K={k} batched", second_layer,
         (u((k, BATCH, units)), u((k, units, units)), u((k, BATCH, units))), 6 * BATCH * units * units * k, k),
        ("2048 x 2048 matmul (the CPU's rate)", big, (u((2048, 2048)), u((2048, 2048))), 2 * 2048 ** 3, 1),
    ]
    print(f"MLP 2x{units}, batch {BATCH}; {STEPS} steps per call, medians of 15 calls; {cpu_description()}")
    print("| matmuls | mode | ms per step | ms per trial-step | GFLOP/s |")
    print("| --- | --- | --- | --- | --- |")
    for name, function, tensors, flops, trials in cases:
        for mode, jit in (("xla", True), ("graph", False)):
            ms, gflops = rate(function, tensors, flops, jit)
            print(f"| {name} | {mode} | {ms:.3f} | {ms / trials:.3f} | {gflops:.0f} |")


if __name__ == "__main__":
    main()
