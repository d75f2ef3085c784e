"""Where a training step's time goes: the unfused step against the K-trial fused step.

    python benchmarks/fused_step_profile.py                 # MLP 2 x 128, K = 8, XLA
    python benchmarks/fused_step_profile.py --units 32 --k 16
    python benchmarks/fused_step_profile.py --threads 1     # as a one-core `local` / `dask` worker

`benchmarks/fused.py` measures the speedup; this says where it comes from and where it
stops. Both steps are the ones a search runs (the same trainer and programs as `fused.py`).
Each is timed on one call's worth of batches (`Trainer.timing_batch`: 32 steps), as wall
clock per trial-step, median of 15 calls; then traced with TensorFlow's profiler: every
compiled operation (an XLA thunk) is timed and sorted into a role by its HLO name and the
TensorFlow op it came from:

- matmuls, forward / backward (`gradient_tape/...`)
- the optimizer update (ops under the `update` name scope both steps use)
- copies XLA inserts
- everything else: activations, dropout masks, the loss, the batch gather

Thunk times are per trial-step and can overlap (XLA runs independent thunks on both cores),
so a column need not sum to the wall time. Only XLA steps have thunks to profile.

Then how far fusing could go here: a floor for the fused step, its matmuls at the CPU's
large-matmul rate (`benchmarks/matmul_rates.py`'s 2048 x 2048 case) plus its optimizer
update's own op time in the profiled step (it streams memory and gains nothing from a
bigger matmul; timed alone, with stand-in gradients, XLA fused it differently), and
the speedups a step at that floor would give, for the step and for whole K-trial jobs
(`benchmarks/fused.py`'s, timed here in XLA with the fused step's time swapped for the floor).
Last, two plainer bounds: the job's speedup were the step nothing but its matmuls at that
rate (no optimizer, activations, dropout or loss), and the fused step a 2x job would need,
the rest of the job (preparing, evaluation, checkpoints) as measured.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import benchmarks.fused as fused_bench  # noqa: E402
from benchmarks.machine import cpu_description  # noqa: E402
from benchmarks.matmul_rates import big, rate  # noqa: E402
from hpo.fusion.group_trainer import prepare_group  # noqa: E402
from hpo.training.compiled_step import UPDATE_SCOPE  # noqa: E402

ROLES = ("matmul, forward", "matmul, backward", "optimizer update", "copies", "other")
_MATMUL_OPS = re.compile(r"MatMul|Einsum|Conv2D|conv")
# Thunks that only run others (a loop's time is its body's): counting them would count twice.
_CONTAINERS = ("while", "conditional", "call")
# name = shape opcode(...): a multi-output fusion's shape is a tuple, "(f32[...]{...}, ...)".
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (?:\([^)]*\)|\S+) ([\w\-]+)\(")
_OP_NAME = re.compile(r'op_name="([^"]+)"')


def roles_by_instruction(hlo_text: str) -> dict[str, str]:
    """HLO instruction name -> role, from the optimized module's text."""
    roles = {}
    for line in hlo_text.splitlines():
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        name, opcode = match.groups()
        if opcode in _CONTAINERS:
            continue
        op_name = (_OP_NAME.search(line) or [None, ""])[1]
        if f"/{UPDATE_SCOPE}/" in f"/{op_name}":
            role = "optimizer update"
        elif opcode in ("dot", "convolution") or _MATMUL_OPS.search(op_name.rsplit("/", 1)[-1]):
            role = "matmul, backward" if op_name.startswith("gradient_tape") else "matmul, forward"
        elif opcode == "copy":
            role = "copies"
        else:
            role = "other"
        roles[name] = role
    return roles


def thunk_seconds(call, calls: int) -> dict[str, float]:
    """Seconds per HLO instruction over `calls` calls, from a profiler trace."""
    import tensorflow as tf
    try:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2
    except ImportError as exc:
        raise SystemExit(f"this TensorFlow does not ship the profiler's XPlane proto ({exc})") from None
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(calls):
            call()
        tf.profiler.experimental.stop()
        [path] = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
        space = xplane_pb2.XSpace()
        space.ParseFromString(Path(path).read_bytes())
    seconds: dict[str, float] = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                seconds[plane.event_metadata[event.metadata_id].name] += event.duration_ps / 1e12
    return seconds


def profile(label: str, train_steps, batch, trials: int) -> dict[str, float]:
    """Wall and per-role microseconds per trial-step for one compiled step."""
    def call():
        train_steps(batch)[0].numpy()

    for _ in range(3):
        call()
    times = []
    for _ in range(15):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    per_trial_step = 1e6 / (trials * int(batch.shape[0]))
    roles = roles_by_instruction(train_steps.experimental_get_compiler_ir(batch)(stage="optimized_hlo"))
    calls = 5
    by_role = dict.fromkeys(ROLES, 0.0)
    for name, seconds in thunk_seconds(call, calls).items():
        if name in roles:
            by_role[roles[name]] += seconds / calls * per_trial_step
    by_role["wall"] = statistics.median(times) * per_trial_step
    print(f"{label}: {by_role['wall']:.0f} us per trial-step", flush=True)
    return by_role


def training_flops(model, batch: int) -> float:
    """One trial's matmul FLOPs per training step: every Dense layer's forward product and
    kernel gradient, and the input gradient of each but the first (its input is data)."""
    kernels = [layer.kernel.shape for layer in model.layers if type(layer).__name__ == "Dense"]
    return sum(2 * batch * fan_in * fan_out * (2 if i == 0 else 3) for i, (fan_in, fan_out) in enumerate(kernels))


def median_job_seconds(job, trainer, k: int, folder: str, repeats: int = 3) -> float:
    job(trainer, k, 999, folder)                       # warm-up
    return statistics.median(job(trainer, k, repeat, folder) for repeat in range(repeats))


def print_ceiling(trainer, fused, model, batch: int, unfused_us: float, fused_us: float, update_us: float,
                  k: int, folder: str) -> None:
    """The fused step's floor on this CPU and the speedups it would give."""
    import tensorflow as tf

    square = tf.random.uniform((2048, 2048))
    _, matmul_gflops = rate(big, (square, square), 2 * 2048 ** 3, True)
    matmul_us = training_flops(model, batch) / (matmul_gflops * 1e3)
    params = sum(int(np.prod(w.shape)) for w in fused.weights) / k
    update_bytes = params * 4 * (5 if fused.optimizer.kind == "sgd" else 7)   # slots, weight, gradient
    floor_us = matmul_us + update_us
    sequential_s = median_job_seconds(fused_bench.sequential, trainer, k, folder)
    fused_s = median_job_seconds(fused_bench.fused, trainer, k, folder)
    trial_steps = k * fused_bench.EPOCHS * (trainer.data.train_examples // batch)
    at_floor_s = fused_s - (fused_us - floor_us) * 1e-6 * trial_steps
    # The loosest bound: a step that is nothing but its matmuls at the large-matmul rate.
    matmuls_only_s = fused_s - (fused_us - matmul_us) * 1e-6 * trial_steps
    # The fused step that would make the job twice as fast as the sequential one, with the
    # rest of the job (preparing, evaluation, checkpoints) as measured.
    needed_us = fused_us - (fused_s - sequential_s / 2) / trial_steps * 1e6
    print("\nHow far fusing could go (per trial-step, microseconds; XLA):\n")
    print("| quantity | value |")
    print("| --- | --- |")
    print(f"| matmuls at the CPU's large-matmul rate ({matmul_gflops:.0f} GFLOP/s) | {matmul_us:.1f} |")
    print(f"| optimizer update, in the step ({update_bytes * 1e-6 / (update_us * 1e-6) / 1e3:.0f} GB/s "
          f"at {update_bytes / params:.0f} bytes per parameter) | {update_us:.1f} |")
    print(f"| floor: the two together | {floor_us:.1f} |")
    print(f"| measured fused step | {fused_us:.1f} |")
    print(f"| measured unfused step | {unfused_us:.1f} |")
    print(f"| step speedup, measured / at the floor | {unfused_us / fused_us:.2f} / {unfused_us / floor_us:.2f} |")
    print(f"| K={k} job ({fused_bench.EPOCHS} epochs), sequential / fused / fused at the floor, s | "
          f"{sequential_s:.3f} / {fused_s:.3f} / {at_floor_s:.3f} |")
    print(f"| job speedup, measured / at the floor | {sequential_s / fused_s:.2f} / {sequential_s / at_floor_s:.2f} |")
    print(f"| job speedup with a step of nothing but its matmuls at that rate | {sequential_s / matmuls_only_s:.2f} |")
    print(f"| fused step for a 2x job, with the rest of the job as measured | {needed_us:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--units", type=int, default=128, help="hidden units per layer (2 layers)")
    parser.add_argument("--k", type=int, default=8, help="trials in the fused group")
    parser.add_argument("--threads", type=int, default=0,
                        help="TensorFlow's intra- and inter-op threads, as a worker sets them (0: TF's default)")
    args = parser.parse_args()
    import tensorflow as tf
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    fused_bench.UNITS = args.units
    trainer = fused_bench.mlp_trainer(fused_bench.bench_data(), "xla")
    with tempfile.TemporaryDirectory() as folder:
        tasks = fused_bench.tasks(args.k, 0, folder)
        params = trainer.resolve(tasks[0].config)
        batch = trainer.timing_batch(int(params["batch_size"]), tasks[0].seed)
        with tf.device(trainer.device):
            unfused = trainer.program_for(params, tasks[0].seed)
            fused, _, _ = prepare_group(trainer, tasks)
            rows = {"unfused": profile("unfused", unfused.train_steps, batch, 1),
                    f"fused K={args.k}": profile(f"fused K={args.k}", fused.train_steps, batch, args.k)}
            print_table(rows, args)
            one, many = rows.values()
            print_ceiling(trainer, fused, unfused.model, int(params["batch_size"]), one["wall"], many["wall"],
                          many["optimizer update"], args.k, folder)


def print_table(rows: dict, args) -> None:
    (a, one), (b, many) = rows.items()
    cores = f"{args.threads} thread(s)" if args.threads else cpu_description()
    print(f"\nMLP 2x{args.units}, batch 64, XLA on {cores}; "
          f"microseconds per trial-step (compiled-op time; overlapping ops can exceed the wall)\n")
    print(f"| role | {a} | {b} | ratio |")
    print("| --- | --- | --- | --- |")
    for role in (*ROLES, "wall"):
        ratio = one[role] / many[role] if many[role] else float("nan")
        print(f"| {role} | {one[role]:.1f} | {many[role]:.1f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
