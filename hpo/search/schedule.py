"""The Hyperband bracket schedule (Li et al., JMLR 2018, Algorithm 1), as plain data."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Rung:
    n_configs: int
    budget: float


@dataclass(frozen=True)
class Bracket:
    s: int
    rungs: tuple[Rung, ...]


def max_bracket_index(min_budget: float, max_budget: float, eta: float) -> int:
    """s_max = floor(log_eta(max_budget / min_budget)); the epsilon absorbs float error at exact powers.
    A schedule that cannot run (a budget of 0, min_budget above max_budget, eta <= 1) is a
    ValueError saying which; the faces check their own arguments before this
    (`hpo.config.validation.check_schedule`), so this guards direct callers."""
    if not 0 < min_budget <= max_budget:
        raise ValueError(f"a Hyperband schedule needs 0 < min_budget <= max_budget, got min_budget={min_budget} "
                         f"and max_budget={max_budget}")
    if not eta > 1:
        raise ValueError(f"a Hyperband schedule needs eta > 1 (the halving rate), got eta={eta}")
    return int(math.floor(math.log(max_budget / min_budget) / math.log(eta) + 1e-9))


def rung_budgets(min_budget: float, max_budget: float, eta: float) -> list[float]:
    """Budgets of the rungs, smallest first, ending exactly at max_budget."""
    s_max = max_bracket_index(min_budget, max_budget, eta)
    return [max_budget * eta ** (k - s_max) for k in range(s_max + 1)]


def hyperband_brackets(min_budget: float, max_budget: float, eta: float) -> list[Bracket]:
    """All brackets of one Hyperband iteration, most exploratory (largest s) first.

    Bracket s starts n = ceil((s_max + 1) / (s + 1) * eta**s) configs at
    r = max_budget * eta**-s; successive halving keeps floor(n * eta**-i) at rung i.
    """
    s_max = max_bracket_index(min_budget, max_budget, eta)
    brackets = []
    for s in range(s_max, -1, -1):
        n = int(math.ceil((s_max + 1) / (s + 1) * eta ** s - 1e-9))
        rungs = tuple(Rung(n_configs=int(math.floor(n * eta ** -i + 1e-9)),
                           budget=max_budget * eta ** (i - s)) for i in range(s + 1))
        brackets.append(Bracket(s=s, rungs=rungs))
    return brackets
