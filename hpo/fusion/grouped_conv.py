"""Whether graph mode can train a grouped convolution on a device.

A fused group runs its later convolutions as one grouped convolution in graph mode (K
groups, trial k in group k), which oneDNN computes ~1.9x faster than K separate ones.
TensorFlow's own CPU kernels have no gradient for it ("Gradients for grouped convolutions
are not supported on CPU"), and TensorFlow turns oneDNN on only on some x86 CPUs (not on
AVX2-only AMD EPYCs, for one). So the device is asked, once per process and device type,
with a tiny gradient.
"""

from __future__ import annotations

import logging

from hpo.training.devices import device_type

log = logging.getLogger("hpo.train")

# Device type -> answer: logical devices of one type share their kernels.
_ANSWERS: dict[str, bool] = {}


def trains_grouped_convolutions(device: str) -> bool:
    """True when a graph-mode grouped convolution's gradients run on `device`."""
    kind = device_type(device)
    if kind not in _ANSWERS:
        _ANSWERS[kind] = _probe(device)
    return _ANSWERS[kind]


def _probe(device: str) -> bool:
    import tensorflow as tf

    @tf.function(autograph=False)
    def gradients(images, kernel):
        with tf.GradientTape() as tape:
            tape.watch([images, kernel])
            loss = tf.reduce_sum(tf.nn.conv2d(images, kernel, strides=1, padding="VALID"))
        return tape.gradient(loss, [images, kernel])

    try:
        with tf.device(device):
            # 4 input channels, kernels of 2: two groups.
            images_grad, kernel_grad = gradients(tf.ones((1, 3, 3, 4)), tf.ones((1, 1, 2, 4)))
            ok = bool(tf.reduce_all(images_grad == 2.0)) and bool(tf.reduce_all(kernel_grad == 9.0))
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError, tf.errors.NotFoundError) as exc:
        log.debug("grouped convolutions do not train on %s in graph mode (%s); fused groups run "
                  "one convolution per trial", device, exc.message.splitlines()[0])
        return False
    return ok
