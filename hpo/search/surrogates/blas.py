"""One BLAS thread while a searcher decides.

The searchers' linear algebra is small: a Gaussian process over at most a few hundred rows,
kernels of a few hundred candidates. On matrices this size a multithreaded BLAS
(OpenBLAS sizes its pool for the whole machine) spends more time waking and joining its
threads than computing, and on a busy machine far more: a 200 x 200 Cholesky factorisation
measured 0.18 ms on one thread and 37 ms on two of a shared 2-core machine
(benchmarks/decision_time.py measures the driver's decisions). `Searcher.ask` and
`Searcher.tell` therefore run under `one_blas_thread()`, which also makes a seeded search
give the same floats whatever the machine's core count. The pool's size is restored on
exit, so the caller's own numpy work keeps its threads (the limit is process-wide while it
holds: an objective running on another thread meanwhile gets one BLAS thread too).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

_controller = None      # threadpoolctl's ThreadpoolController, made at first use (a scan of loaded libraries)
_blas = ()              # its BLAS libraries' controllers


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Limit the BLAS libraries numpy and scipy loaded to one thread for the block, and
    restore their pools after it. Without threadpoolctl (scikit-learn's dependency), a no-op;
    so too where every pool already has one thread (`OPENBLAS_NUM_THREADS=1`, a caller's own
    limit): reading the pools' sizes costs a few microseconds where setting and restoring
    them costs tens, on every ask and tell."""
    global _controller, _blas
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _controller = False
        else:
            import scipy.linalg  # noqa: F401 - loads scipy's own BLAS, so that it is limited too
            _controller = ThreadpoolController()
            _blas = tuple(_controller.select(user_api="blas").lib_controllers)
    if not _controller or all(library.get_num_threads() == 1 for library in _blas):
        yield
        return
    with _controller.limit(limits=1, user_api="blas"):
        yield
