"""Keras Tuner's `errors.FailedTrialError`, for scripts that raise it from `build_model`:
it fails the trial it is raised in, as any exception from `build_model` does here, and the
search goes on."""


class FailedTrialError(Exception):
    """Raised in `build_model`: this trial fails, the search goes on."""
