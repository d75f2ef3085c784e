"""Drives a searcher against a cheap synthetic objective, like a pool of workers would."""

import math

import numpy as np

from hpo.trial import TrialResult, TrialState

SPACE = {
    "x": {"type": "float", "low": -5.0, "high": 10.0},
    "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
    "n": {"type": "int", "low": 1, "high": 8},
    "opt": {"type": "choice", "values": ["adam", "sgd", "rmsprop"]},
    "momentum": {"type": "float", "low": 0.0, "high": 0.99, "when": {"opt": ["sgd", "rmsprop"]}},
}


def objective(config, budget):
    """Smooth in x and lr, noisy-ish in budget, lower is better."""
    penalty = {"adam": 0.0, "sgd": 0.5, "rmsprop": 0.2}[config["opt"]]
    return ((config["x"] - 2.0) ** 2 + (math.log10(config["lr"]) + 2.5) ** 2 + 0.1 * config["n"]
            + penalty + config.get("momentum", 0.0) + 3.0 / budget)


def drive(searcher, n_jobs, workers=1, fail_every=0, told=None):
    """Ask/tell n_jobs jobs with up to `workers` pending; returns [(job, result)] in tell order,
    each result as the searcher recorded it. `told(job)`: what to tell instead of the harness's
    objective."""
    log, pending = [], []
    asked = 0
    while asked < n_jobs or pending:
        while asked < n_jobs and len(pending) < workers:
            job = searcher.ask()
            if job is None:
                break
            pending.append(job)
            asked += 1
        if not pending:
            break
        job = pending.pop(0)  # FIFO: the oldest job finishes first
        if told is not None:
            result = told(job)
        elif fail_every and job.trial_id % fail_every == fail_every - 1:
            result = TrialResult(value=None, state=TrialState.FAILED, error="boom")
        else:
            result = TrialResult(value=objective(job.config, job.budget))
        searcher.tell(job, result)
        log.append((job, searcher.history[-1][1]))
    return log


def signature(log):
    return [(j.trial_id, tuple(sorted(j.config.items())), j.budget, j.continues) for j, _ in log]


def unit_configs(space, log):
    return np.array([space.to_unit(j.config) for j, _ in log])
