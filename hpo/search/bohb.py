"""BOHB: Hyperband's budgets with a model-based choice of new configs
(Falkner, Klein and Hutter, ICML 2018), on synchronous brackets. The models live in
`hpo.search.surrogates`: the default, `model="gp"` (`bohb_gp`), is the multi-fidelity TPE
(`tpe`, `model="tpe"`) with its proposals chosen by a Gaussian process; `model="kde"` is the
paper's KDE (`kde_sampler`).

`BOHB` schedules like synchronous Hyperband, except that with model 'gp' or 'tpe' (one
objective) the search opens with a climbing bracket, whose configs climb every rung
instead of starting at the top, in place of the first iteration's full-budget bracket; and
a bracket whose first budget misleads (its ranking disagrees with the top budget's, see
`hpo.search.surrogates.tpe`) is skipped, down to plain model-based search at the full budget where
every lower budget misleads. It skips candidates equal to a pending or already evaluated config.

`resumes=False` says a larger budget trains afresh (a fraction of the data, not more
epochs), so a promotion costs its whole budget: BOHB then opens with no climbing bracket,
and its model starts no random probes at the budgets few configs reached (see `BOHB`).
"""

from __future__ import annotations

from hpo.search.hyperband import Hyperband, _BracketRun
from hpo.search.schedule import Bracket, Rung
from hpo.search.surrogates.model_choice import make_model
from hpo.space import SearchSpace


class BOHB(Hyperband):
    """BOHB with synchronous Hyperband scheduling (the paper's). `model`: 'gp' (default: the
    TPE's budget guards, new configs by expected improvement under a Gaussian process among
    the TPE's candidates, joined late in a long search by uniform and local ones,
    `hpo.search.surrogates.bohb_gp`; on a conditional space the process reads an inactive
    parameter as -1, outside the unit cube; a space with an unordered choice and no
    condition, or one with priors, keeps the TPE's proposals), 'tpe' (a multi-fidelity TPE that
    learns from every budget, `hpo.search.surrogates.tpe`) or 'kde' (the paper's KDE on the largest
    budget with enough results). `model_options`
    go to it: for 'kde' min_points_in_model, top_n_percent, num_samples, random_fraction,
    bandwidth_factor, min_bandwidth; for 'tpe' top_n_percent, max_good (25: the most configs
    l(x) holds; None: uncapped), num_samples, random_fraction, min_bandwidth, n_startup,
    rungs ('reliable' or 'deepest'),
    probe_budgets, kernels ('auto', 'joint' or 'independent'), initial_design ('latin' or
    'uniform'); for 'gp' those and fit_on ('joint', the default, every trusted budget's
    results with the budget as an input; 'top'; or 'ranking'), noise (the
    Gaussian process's, on normal scores; None: by the number of rows), candidates
    ('tpe', the default, or 'uniform': what expected improvement chooses among),
    explore_from (30: once the top budget holds that many results, 'tpe' candidates are
    joined by uniform draws and neighbours of the best configs; None: never). With several
    `objectives` or `constraints` the model is `hpo.search.multiobjective.pareto_tpe`'s
    (option `split`).

    `climbers` (model 'gp' or 'tpe', one objective, at least three budgets): the size of the
    climbing bracket, which opens the search in place of the first iteration's full-budget
    bracket (None: the number of top-budget results the rung agreement needs,
    `tpe.MIN_TOP_RESULTS`, at least the full-budget bracket's size; 0: Hyperband's
    full-budget bracket, last in the first iteration too). Later iterations run Hyperband's
    brackets.

    `resumes` (as `hpo.Simulation`'s): True (default) where a larger budget continues the
    trial's training from its smaller one (epochs: the Keras engine's case), False where each
    budget trains afresh (a fraction of the training set), so that a promotion costs its full
    budget. With False, by default, the search opens with no climbing bracket (`climbers`
    None means 0: its 6 configs through every rung would cost 40 budget units each where
    they cost 27 with continuation, 44% of a 20-evaluation search on rbv2_xgboost), and the
    model ('gp' or 'tpe') starts with `probe_budgets=False`: a config started at a budget
    that fewer than `n_startup` configs reached is the model's, not a random probe (where
    every promotion is charged in full, a 20-evaluation search holds about 9 results at the
    top budget, so every config a top-budget bracket started would be random). There,
    fitting model 'gp' on every trusted budget (`fit_on="joint"`, its default) matters most: "top"
    waits for a budget with `n_startup` results, which the top budget does not reach in such
    a search, and fits the process on the largest lower budget that has them, whether the
    rung agreement trusts it or not (on rbv2_xgboost budget 1 of 27 and then 3, with budget 1
    distrusted on most tasks). On rbv2_xgboost's 8 tuning tasks, seeds 0-19, BOHB's
    geometric mean over the best peer reads 0.772 with "joint" against 0.920 with "top" at
    20 full-budget evaluations, and 0.575 against 0.593 at 132
    (`hpo.search.surrogates.bohb_gp.FIT_ON` has the other families).
    benchmarks/notes/published_bohb.md, "BOHB when nothing resumes", has the measurements.

    `total_budget`: as `Hyperband`'s (a bracket that could not finish within what is left
    gives way to the next full-budget bracket); a promotion is charged its increment, or its
    full budget where nothing resumes. The climbing bracket always runs."""

    def __init__(self, space, *, seed: int = 0, direction: str = "minimize", min_budget: float = 1.0,
                 max_budget: float = 27.0, eta: float = 3.0, model: str = "gp", objectives=None, constraints=None,
                 tie_break: str = "hypervolume", climbers: int | None = None, resumes: bool = True,
                 total_budget: float | None = None, **model_options):
        space = SearchSpace.coerce(space)
        goals = dict(objectives=objectives, constraints=constraints, tie_break=tie_break)
        super().__init__(space, seed=seed, direction=direction, min_budget=min_budget, max_budget=max_budget,
                         eta=eta, sampler=make_model(space, model, model_options, direction=direction, resumes=resumes,
                                                     searcher=type(self), **goals),
                         total_budget=total_budget, **goals)
        if climbers is not None and int(climbers) < 0:
            raise ValueError(f"climbers must be >= 0, got {climbers}")
        self.resumes = resumes
        # The climbing bracket: its configs climb every rung, all promoted whatever they
        # score (each step a continuation, so it costs what starting them at the top costs).
        # Their results at every budget are pairs for the rung agreement
        # (`hpo.search.surrogates.rung_agreement`, own ranks), so opening the search with it judges
        # every lower budget before Hyperband's aggressive brackets are spent on them; where
        # a budget misleads, its configs are full-budget results, not lost. It runs once:
        # later, the budgets are judged on the results of every bracket, and Hyperband's
        # full-budget bracket serves the model better, since each of its configs is proposed
        # after the previous one's top result, where a climber's arrives only after its whole
        # bracket was proposed.
        self._climb: Bracket | None = None
        # With fewer than three budgets a climbing bracket (6 configs through every rung)
        # would cost more than Hyperband's whole iteration: left out there.
        climbs = self.sampler.judges_budgets and not self.goals.ranked and len(self.brackets) > 2
        if climbers and not climbs:
            # Asked for by name, a climbing bracket that would silently not run is an error.
            raise ValueError(f"climbers={climbers} needs model='gp' (the default) or model='tpe', one objective and no "
                             f"constraint, and at least three budgets (here {len(self.brackets)}: min_budget "
                             f"{min_budget}, max_budget {max_budget}, eta {eta})")
        if climbs:
            from hpo.search.surrogates.tpe import MIN_TOP_RESULTS
            full = self.brackets[-1]
            if climbers is not None:
                n = int(climbers)
            else:       # where nothing resumes, a climber pays every rung's budget in full: none
                n = max(full.rungs[0].n_configs, MIN_TOP_RESULTS) if resumes else 0
            if n:
                budgets = [first.budget for first in (b.rungs[0] for b in self.brackets)]
                self._climb = Bracket(s=full.s, rungs=tuple(Rung(n_configs=n, budget=b) for b in budgets))
                self.sampler.open_with_climb()

    @property
    def promotions_continue(self) -> bool:
        return self.resumes

    def first_iteration_jobs(self) -> int:
        """How many jobs the first iteration hands out (the climbing bracket that opens it
        included): what Keras Tuner's "one Hyperband iteration" means for this searcher."""
        return sum(rung.n_configs for p in range(len(self.brackets)) for rung in self._plan_at(p).rungs)

    def _plan_at(self, position: int) -> Bracket:
        """The bracket at `position` in the sequence: Hyperband's order, except that the
        climbing bracket opens the first iteration in place of its full-budget bracket (last)."""
        if self._climb is None or position >= len(self.brackets):
            return super()._plan_at(position)
        return self._climb if position == 0 else self.brackets[position - 1]

    def _start_bracket(self):
        # A bracket whose first budget the model does not trust (its ranking disagrees with
        # the top budget's: `MultiFidelityTPESampler.trusted_start`) is skipped: its budget
        # would go to configs judged where the ranking points the wrong way. The climbing
        # and full-budget brackets are always trusted, so one is found within the next
        # 2 * len(brackets) - 1 positions (the first iteration has no full-budget bracket).
        for _ in range(2 * len(self.brackets)):
            plan = self._plan_at(self._brackets_started)
            if plan is self._climb or self.sampler.trusted_start(plan.rungs[0].budget):
                break
            self._brackets_started += 1
        return super()._start_bracket()

    def _job_from(self, run: _BracketRun):
        if run.plan is self._climb and run.rung == 0 and run.to_sample > 0:
            # A climber is proposed as a config that starts at the top (as the full-budget
            # bracket's are): a probe until n_startup configs reached the top, then the model's.
            run.to_sample -= 1
            if self._queue:
                config = self._propose(self.max_budget)
            else:
                # The bracket's earlier climbers count as pending: probes spread over the
                # choices among themselves too (`MultiFidelityTPESampler._spread`).
                pending = [j.config for j in self.pending.values()] + list(run.issued.values())
                config = self.sampler.propose(self.rng, self.max_budget, pending)
            job = self._new_job(config, run.plan.rungs[0].budget, bracket=run.plan.s, rung=0)
            run.issued[job.trial_id] = dict(job.config)
            return job
        return super()._job_from(run)
