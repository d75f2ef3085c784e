"""The `__main__` a local worker process starts from (`hpo.executors.local`).

A process started by `spawn` or a forkserver first runs its parent's `__main__` again (as
`__mp_main__`), so that functions pickled by name from it can be found. For a user's script
that is the whole script: a top-level `tuner.search(...)` without an
`if __name__ == "__main__":` guard would start a search of its own in every worker. Workers
are started with this module standing in as the parent's `__main__` instead; it does
nothing, and what a worker needs from the user's script (`build_model` and its closure)
reaches it by value (cloudpickle, `hpo.tuner.trainer.TrainerFactory`)."""
