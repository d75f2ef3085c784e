"""Imported once by the local backend's forkserver (`hpo.executors.local.worker_start_context`),
so that every worker forked from it starts with TensorFlow, Keras and the trainer's modules
already imported: a worker then starts in a fraction of a second instead of the seconds of
CPU one import costs, and a dead or recycled worker is replaced as cheaply.

TensorFlow is imported as the workers would import it (its C++ start-up records filtered, at
the log level a worker sets), and nothing more: no device is listed and no runtime is started
here, so each worker still sets its own thread pools."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from hpo.native_logs import import_tensorflow  # noqa: E402 - after the log level it reads at import

import_tensorflow()

import hpo.executors.worker_trainer  # noqa: E402,F401 - the trainer's modules, imported once for every worker
