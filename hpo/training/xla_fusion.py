"""XLA's multi-output fusion on the CPU: turned on for the training engine, and checked.

XLA:CPU fuses elementwise work that feeds one result into one loop, but loops that merely
read the same arrays (Adam's new weight, first and second moment, all from the gradient
and the old slots) stay separate unless the backend option `xla_cpu_use_multi_output_fusion`
is set. Adam's update is bound by memory bandwidth, so one loop instead of three is most
of its cost: `optimizers.single_pass_adam` is written for it. XLA reads `XLA_FLAGS` once,
at a process's first XLA compilation, so the option is added when the training engine is
imported; a process that compiled with XLA before that keeps its own flags, which
`fuses_adam_in_one_loop` notices (Adam then keeps Keras's three-loop form, which is
faster when nothing merges the loops).
"""

from __future__ import annotations

import functools
import logging
import os
import re
from typing import MutableMapping

log = logging.getLogger("hpo.train")

OPTION = "xla_cpu_use_multi_output_fusion"
OPT_OUT = "HPO_XLA_MULTI_OUTPUT_FUSION"
_EXTRA_OPTIONS = re.compile(r"--xla_backend_extra_options=(\S*)")


def request_multi_output_fusion(environ: MutableMapping[str, str] = os.environ) -> None:
    """Add the option to XLA_FLAGS, keeping whatever the user set there; `OPT_OUT=0` leaves
    them alone (XLA takes the option's presence as on, whatever value it is given)."""
    flags = environ.get("XLA_FLAGS", "")
    if OPTION in flags or environ.get(OPT_OUT) == "0":
        return
    extra = _EXTRA_OPTIONS.search(flags)
    if extra is None:
        environ["XLA_FLAGS"] = f"{flags} --xla_backend_extra_options={OPTION}".strip()
    else:
        joined = f"{extra.group(1)},{OPTION}" if extra.group(1) else OPTION
        environ["XLA_FLAGS"] = f"{flags[:extra.start(1)]}{joined}{flags[extra.end(1):]}"


@functools.cache
def fuses_adam_in_one_loop(device: str) -> bool:
    """Whether XLA on `device` computes `single_pass_adam`'s three results in one loop.

    Compiles it for small vectors to optimized HLO (no machine code; ~0.1 s, once per
    process and device, beside the second or so an XLA training step takes to compile)
    and looks for one fusion with three array outputs."""
    import tensorflow as tf

    from hpo.training.optimizers import single_pass_adam

    def update(variable, m, v, g):
        return single_pass_adam(variable, m, v, g, alpha=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7)

    try:
        with tf.device(device):
            compiled = tf.function(update, jit_compile=True)
            hlo = compiled.experimental_get_compiler_ir(*[tf.zeros([64])] * 4)(stage="optimized_hlo")
    except Exception as exc:   # noqa: BLE001 - a backend that cannot show its HLO: keep Keras's form
        log.debug("could not inspect XLA's fusion on %s (%s: %s)", device, type(exc).__name__, exc)
        return False
    return re.search(r"= \((f32\[64\]\{0\},? ?){3}\) fusion\(", hlo) is not None


def single_pass_update(mode: str, device: str) -> bool:
    """Whether a program compiled in `mode` on `device` should update in one pass (Adam(W)
    in both engines, SGD with momentum in the fused one)."""
    return mode == "xla" and fuses_adam_in_one_loop(device)
