"""One fresh interpreter that imports TensorFlow through `hpo.native_logs.import_tensorflow`,
then compiles XLA before anything of hpo's training engine is made. Two e2e tests read it:
tests/e2e/test_native_logs.py (what reached stderr up to and including the import) and
tests/e2e/test_xla_fusion_process.py (XLA's flags were read at that first compilation, before
a trainer could add the one-loop update). Each process start pays a TensorFlow import (about
5 CPU-s), so the two share one: both modules are in the xdist group TENSORFLOW_PROCESS_GROUP,
and the process runs once per test process."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap

from tests.support.cli import ROOT

TENSORFLOW_PROCESS_GROUP = "tensorflow_process"

# Written to stderr between the two parts, so each test reads its own part.
XLA_PART = "--- compiling XLA ---"

CODE = textwrap.dedent(f"""
    import sys
    from hpo.native_logs import import_tensorflow
    tf = import_tensorflow()
    print(tf.reduce_sum(tf.constant([1, 2])).numpy(), flush=True)
    print({XLA_PART!r}, file=sys.stderr, flush=True)
    print({XLA_PART!r}, flush=True)
    tf.function(lambda x: x * 2, jit_compile=True)(tf.ones(3))
    from hpo.training.xla_fusion import single_pass_update
    print(single_pass_update('xla', '/device:CPU:0'))
""")


def fresh_python(code: str, tf_log_level: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter at the repository root (bytes output), with
    TF_CPP_MIN_LOG_LEVEL `tf_log_level` and without the XLA_FLAGS this test process's trainers
    set: XLA reads its flags at a process's first compilation, so they would decide for it."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=300,
                          env={**env, "TF_CPP_MIN_LOG_LEVEL": tf_log_level})


@functools.cache
def tensorflow_then_xla() -> tuple[subprocess.CompletedProcess, tuple[bytes, bytes], tuple[bytes, bytes]]:
    """The process (`fresh_python` at log level 2), and its (stdout, stderr) before XLA_PART and
    after it."""
    done = fresh_python(CODE, "2")
    mark = XLA_PART.encode() + b"\n"
    out_before, _, out_after = done.stdout.partition(mark)
    err_before, _, err_after = done.stderr.partition(mark)
    return done, (out_before, err_before), (out_after, err_after)
