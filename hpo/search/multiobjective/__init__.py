"""Several objectives at once, for the searchers: the goals and constraints (`objectives`),
Pareto ranks and constrained orders (`pareto`), the Pareto-aware model BOHB uses
(`pareto_tpe`) and an exact hypervolume (`hypervolume`). Pure numpy."""

from hpo.search.multiobjective.objectives import Constraint, Goals, Objective

__all__ = ["Constraint", "Goals", "Objective"]
