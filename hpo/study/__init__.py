"""The study: the SQLite store that is a search's single source of truth (`store`), the
one-driver lock (`lock`), the checks before a store is trusted (`integrity`), creating,
resuming or refusing a study (`resume`), and what the views read of several objectives
(`pareto`)."""

from hpo.study.store import DB_NAME, Study, TrialRow

__all__ = ["DB_NAME", "Study", "TrialRow"]
