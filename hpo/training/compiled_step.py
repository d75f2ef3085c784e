"""The compiled training and evaluation functions.

The training data lives on the trial's device as tensors; each call gathers `steps`
batches by index inside one `tf.function`, so Python dispatch is paid once per call
instead of once per step (32 steps per call gained 20-60% over model.fit in our
measurements). Batch shapes are always whole, so the traced graph never changes shape.

Both functions are traced with AutoGraph off, as Keras's own `fit` traces its steps
(`do_not_convert`): the step loop is an explicit `tf.while_loop`, and the rest is plain
Python over fixed lists of layers and metrics. AutoGraph would transpile the step and every
method it calls again at each architecture's trace, about 0.4 s of AST work of the ~1 s a
new architecture's first call costs on a 2-core CPU (cProfile of `hpo search
experiments/smoke.yaml`).
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from hpo.training.loss_metrics import LossAndMetrics

# The name scope of the optimizer update in every compiled step (benchmarks/fused_step_profile.py).
UPDATE_SCOPE = "update"


def make_train_steps(model, optimizer, x_train, y_train, mode: str,
                     measures: LossAndMetrics, on_trace: list | None = None) -> Callable:
    """Returns f(batch_indices[int32, steps x batch]) -> (sum of the steps' mean losses,);
    the batches also update `measures.train_metrics`. When `x_train` and `y_train` are
    `tf.TensorSpec`s of stacked batches (streamed data, `hpo.training.training_data`), f takes
    the batches themselves, (x [steps, batch, ...], y [steps, batch, ...]), instead of indices.

    `on_trace[0]` counts how often the Python body runs, i.e. how often TensorFlow traced it."""
    variables = model.trainable_variables
    streamed = isinstance(x_train, tf.TensorSpec)

    def train_steps(call):
        if on_trace is not None:
            on_trace[0] += 1
        steps = tf.shape(call[0] if streamed else call)[0]

        def step(i, total_loss, sums):
            if streamed:
                xb, yb = call[0][i], call[1][i]
            else:
                xb, yb = tf.gather(x_train, call[i]), tf.gather(y_train, call[i])
            with tf.GradientTape() as tape:
                outputs = model(xb, training=True)
                loss = measures.mean_loss(yb, outputs)
                if model.losses:
                    loss = loss + tf.add_n(model.losses)
            grads = tape.gradient(loss, variables)
            with tf.name_scope(UPDATE_SCOPE):      # so a profile can tell the update's ops apart
                optimizer.apply_gradients(zip(grads, variables))
            return i + 1, total_loss + tf.cast(loss, tf.float32), measures.accumulate(sums, yb, outputs)

        _, total_loss, sums = tf.while_loop(lambda i, *_: i < steps, step,
                                            (tf.constant(0), tf.constant(0.0), measures.start_sums()))
        measures.commit_sums(sums)
        return (total_loss,)

    signature = (x_train, y_train) if streamed else tf.TensorSpec([None, None], tf.int32)
    return _compile(train_steps, mode, signature)


def make_evaluate(model, mode: str, measures: LossAndMetrics) -> Callable:
    """Returns f(x, y) -> sum of per-example losses; the slice also updates `measures.val_metrics`."""

    def evaluate(x, y):
        outputs = model(x, training=False)
        measures.update(measures.val_metrics, y, outputs)
        return measures.summed_loss(y, outputs)

    return evaluate if mode == "eager" else tf.function(evaluate, reduce_retracing=True, autograph=False)


def _compile(fn: Callable, mode: str, signature) -> Callable:
    if mode == "eager":
        return fn
    return tf.function(fn, input_signature=[signature], jit_compile=(mode == "xla"), autograph=False)
