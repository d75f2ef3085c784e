"""The ask/tell protocol every searcher implements.

A searcher decides *what* to evaluate (`Job.config`) and *how much* (`Job.budget`). It
never sees Keras: results come back as `TrialResult`s or plain floats. Internally every
searcher minimises a loss; `direction="maximize"` negates values on the way in.

Several objectives: `objectives=[...]` (names, {name, direction} mappings or `Objective`s)
and `constraints=["params <= 20000", ...]` make `tell` take a sequence or a dict of named
values (`hpo.search.multiobjective.objectives.Goals`); schedules then rank results as points
(`rank_for_promotion`, `hpo.search.multiobjective.pareto.constrained_order`). Without them a searcher has
one objective in `direction`.

Determinism: all randomness comes from one `numpy.random.Generator` seeded at
construction, and every state change happens in `ask` or `tell`. Replaying the same
sequence of asks and tells therefore rebuilds the same state, which is how studies resume.
"""

from __future__ import annotations

import abc
import math
import numbers
from typing import Any, Mapping

import numpy as np

from hpo.registry import DIRECTIONS
from hpo.search.multiobjective.objectives import Goals
from hpo.search.multiobjective.pareto import TIE_BREAKS, constrained_order, pareto_mask
from hpo.search.surrogates.blas import one_blas_thread
from hpo.search.surrogates.failure_neighbours import FailureNeighbours
from hpo.space import SearchSpace, python_values
from hpo.trial import Job, TrialResult
from hpo.trial import config_identity as config_key  # the searchers' name for the one config identity

PRIOR_START = 0.5      # share of new configs drawn around the priors before any evidence
PRIOR_RANGE = (0.05, 0.7)   # the least and the most of that share once evidence is in
PRIOR_EVIDENCE = 3     # results of each kind (around the prior, elsewhere) on one budget to judge by
FAILURE_REDRAWS = 3    # new draws at most for a config whose nearest finished config failed


class PriorTrust:
    """How often to draw around the user's priors (`prior:` on a parameter), learnt as
    PriorBand does: configs drawn around the prior compete with the others on the same
    budget. The share starts at PRIOR_START and becomes PRIOR_START * 2 * AUC, clipped to
    PRIOR_RANGE, where AUC is the chance that a prior-drawn config beats another one on the
    largest budget with PRIOR_EVIDENCE results of each kind: a good prior keeps (and grows)
    its share, a wrong one falls to the floor."""

    def __init__(self, space: SearchSpace):
        self.enabled = space.has_prior
        self.drawn: set[str] = set()                       # keys of configs drawn around the prior
        self.results: dict[float, dict[str, float]] = {}   # budget -> config key -> loss
        self._cached: tuple[int, float] | None = None

    def record(self, config: Mapping[str, Any], budget: float, loss: float) -> None:
        if self.enabled:
            self.results.setdefault(budget, {})[config_key(config)] = loss

    @property
    def share(self) -> float:
        if not self.enabled:
            return 0.0
        count = sum(len(r) for r in self.results.values())
        if self._cached is not None and self._cached[0] == count:
            return self._cached[1]
        share = PRIOR_START
        for budget in sorted(self.results, reverse=True):
            ours = [loss for key, loss in self.results[budget].items() if key in self.drawn]
            other = [loss for key, loss in self.results[budget].items() if key not in self.drawn]
            if len(ours) >= PRIOR_EVIDENCE and len(other) >= PRIOR_EVIDENCE:
                auc = win_rate(np.array(ours), np.array(other))
                share = float(np.clip(PRIOR_START * 2 * auc, *PRIOR_RANGE))
                break
        self._cached = (count, share)
        return share


class Taken:
    """The keys of the configs seen and of the pending ones, for `in` (no union is built: the
    seen set grows with the search, and a copy of it per ask did too)."""

    def __init__(self, seen: set[str], pending: set[str]):
        self.seen, self.pending = seen, pending

    def __contains__(self, key: object) -> bool:
        return key in self.seen or key in self.pending


class ConfigSampler:
    """Proposes new configurations. The default draws uniformly (around the priors for a
    learnt share, where the space has any); BOHB swaps in a model."""

    def __init__(self, space: SearchSpace):
        self.space = space
        self.priors = PriorTrust(space)
        self.seen: set[str] = set()

    def propose(self, rng: np.random.Generator, budget: float,
                pending: list[Mapping[str, Any]]) -> dict[str, Any]:
        if self.priors.enabled:
            return self.fresh(rng, pending)
        return self.space.sample(rng)

    def fresh(self, rng: np.random.Generator, pending: list[Mapping[str, Any]]) -> dict[str, Any]:
        """A model-free config: around the priors for their learnt share, else uniform; unseen if possible."""
        if self.priors.enabled and rng.random() < self.priors.share:
            return self.prior_draw(rng, pending)
        return unseen_sample(self.space, rng, self.seen, pending)

    def taken(self, pending: list[Mapping[str, Any]]) -> "Taken":
        """Keys of the configs a proposal must not repeat: those proposed or run, and the pending."""
        return Taken(self.seen, {config_key(c) for c in pending})

    def prior_draw(self, rng: np.random.Generator, pending: list[Mapping[str, Any]]) -> dict[str, Any]:
        """A config drawn around the priors, unseen if possible (remembered as drawn there)."""
        taken = self.taken(pending)
        config = self.space.sample_prior(rng)
        for _ in range(100):
            if config_key(config) not in taken:
                break
            config = self.space.sample_prior(rng)
        self.priors.drawn.add(config_key(config))
        return config

    def mark_seen(self, config: Mapping[str, Any]) -> None:
        """A config that entered from outside (an enqueued one): never propose it again."""
        self.seen.add(config_key(config))

    def observe(self, config: Mapping[str, Any], budget: float, loss: float) -> None:
        """Called for every finished job with a usable result; a model-free sampler ignores it."""

    def observe_failure(self, config: Mapping[str, Any], budget: float) -> None:
        """Called for every job that failed (or whose value was not a finite number). A model
        counts the config as its worst result, so that a region that fails stops being
        proposed; a model-free sampler ignores it."""

    # What a multi-fidelity searcher (BOHB) asks of its sampler. A sampler that judges how far
    # each budget's ranking can be trusted says so (`judges_budgets`); BOHB then opens the
    # search with a climbing bracket, which it announces (`open_with_climb`), and skips the
    # brackets that would start new configs where `trusted_start` says no.
    judges_budgets = False

    def trusted_start(self, budget: float) -> bool:
        """Whether new configs may start at `budget`; a sampler that judges no budget trusts all."""
        return True

    def open_with_climb(self) -> None:
        """BOHB opens with a climbing bracket: its configs are promoted through every rung
        whatever their results, which a budget-judging sampler may take into account."""


def win_rate(a: np.ndarray, b: np.ndarray) -> float:
    """The chance that a value of `a` is below one of `b` (ties count half), over every pair:
    the AUC of Mann and Whitney. Counted from `b` sorted, in O((n + m) log m) rather than by
    the n x m table of pairs (whose size grew with the search). Both counts are whole, so the
    figure is exactly the table's mean."""
    b = np.sort(b)
    below = np.searchsorted(b, a, side="left")
    above = np.searchsorted(b, a, side="right")
    wins = float((len(b) - above).sum()) + 0.5 * float((above - below).sum())
    return wins / (len(a) * len(b))


def optional_count(name: str, value: Any, least: int) -> int | None:
    """`value` as an int if it is a whole number >= `least` (12.0 too, as YAML may write it),
    None if None; else a ValueError."""
    if value is None:
        return None
    whole = isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or value < least:
        raise ValueError(f"{name} must be an integer >= {least} or None, got {value!r}")
    return int(value)


def check_model_options(top_n_percent: float, random_fraction: float, num_samples: int) -> None:
    """The options BOHB's models share, checked the same way for both."""
    if not 0 < top_n_percent < 100:
        raise ValueError(f"top_n_percent must be in (0, 100), got {top_n_percent}")
    if not 0 <= random_fraction <= 1:
        raise ValueError(f"random_fraction must be in [0, 1], got {random_fraction}")
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")


# The most configurations a density model (the TPE's l(x) and g(x), the paper's KDE) is fitted
# on and scored against: past it, `spread_over_ranking` keeps this many, evenly spaced over
# the ranking. Its cost per ask grows with its rows (at 3,000 jobs of a 7-parameter space the
# TPE's densities took 17 ms of a 29 ms ask; benchmarks/decision_time.py); a search of 132
# full-budget evaluations with Hyperband's budgets (10 iterations, about 500 configurations)
# stays below it, so the published figures never met this cap (l(x)'s own, `tpe.MAX_GOOD`, is another).
MAX_DENSITY_ROWS = 1000


def spread_over_ranking(n: int, limit: int = MAX_DENSITY_ROWS) -> np.ndarray:
    """Positions of at most `limit` of the n entries of a ranking (best first), evenly spread
    over it, the best and the worst included: all n where they fit. A split of the kept
    entries at a share gamma then splits the ranking at the same quantile, and each side's
    density keeps its shape with fewer kernels (each a little wider: the Parzen widths
    follow the gaps)."""
    if n <= limit:
        return np.arange(n)
    return np.round(np.linspace(0, n - 1, limit)).astype(int)


def with_room(array: np.ndarray, rows: int) -> np.ndarray:
    """`array` if it holds `rows` rows, else a copy grown by at least 64 rows and at least its
    own length (so that a table kept in place costs amortised O(1) a row); the new rows are
    uninitialised, the caller fills them."""
    if rows <= len(array):
        return array
    grow = max(64, rows - len(array), len(array))
    return np.concatenate([array, np.empty((grow, *array.shape[1:]), dtype=array.dtype)])


def latin_hypercube(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """n points in [0, 1)^d, one in each of the n equal slices of every axis."""
    return (np.argsort(rng.random((n, d)), axis=0) + rng.random((n, d))) / n


def unseen_sample(space: SearchSpace, rng: np.random.Generator, seen: set[str],
                  pending: list[Mapping[str, Any]]) -> dict[str, Any]:
    """A uniform draw, unseen if possible; in an exhausted discrete space, at least not pending."""
    running = {config_key(c) for c in pending}
    config = space.sample(rng)
    for avoid in (seen | running, running):
        for _ in range(100):
            if config_key(config) not in avoid:
                return config
            config = space.sample(rng)
    return config


class GoalsRefused(ValueError):
    """A searcher does not take these objectives or constraints; `argument` says which."""

    def __init__(self, message: str, argument: str):
        super().__init__(message)
        self.argument = argument      # 'objectives' or 'constraints'


def check_schedule_kinds(min_budget: Any, max_budget: Any, eta: Any, seed: Any) -> None:
    """The schedule's numbers and the seed of the right kind, refused by name: a searcher that
    plans its brackets from them before `Searcher.__init__` calls this first."""
    for name, value in (("min_budget", min_budget), ("max_budget", max_budget), ("eta", eta)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be a whole number >= 0, got {type(seed).__name__} {seed!r}")
    if seed < 0:
        raise ValueError(f"seed must be a whole number >= 0, got {seed!r}")


class Searcher(abc.ABC):
    """Base class: trial ids, pending jobs, direction handling and the finished history.

    Every searcher takes these keyword arguments: `seed` (a whole number >= 0: the same seed
    and the same results told give the same jobs), `direction` ('minimize' or 'maximize'),
    `min_budget`, `max_budget` and `eta` (the rung budgets are `max_budget * eta**-k`, so
    the lowest lies in [min_budget, min_budget * eta) and budgets are floats: 1, 27, eta 2
    gives 1.6875, 3.375, ... 27), `objectives`, `constraints` and `tie_break` (several
    objectives; see `hpo.search.multiobjective`). `ask()` returns the next `Job`, or None:
    with jobs pending, wait for one of their results; with none pending, the search is
    finished (a finite space used up, a schedule run through). `tell(job, result)` takes the
    job `ask` returned and a float, None (a failure), a `TrialResult`, or with several
    objectives a sequence or dict of their values; what it refuses leaves the job pending."""

    # A searcher that reads learning curves (`TrialResult.curve`: the objective after each
    # epoch of a job) says so; the runner then sends them, and the study stores them with the
    # result, so that a replay tells the same. The others are told the final value only.
    reads_curves = False
    # A searcher that plans its schedule for the budget the whole search will spend says so,
    # and takes it through `plan_total_budget`; the runner then tells it `search.total_budget`.
    plans_total_budget = False

    @property
    def promotions_continue(self) -> bool:
        """Whether a promotion trains on from its parent (False: each budget trains afresh,
        `BOHB(resumes=False)`)."""
        return True

    @property
    def promotes(self) -> bool:
        """Whether a job may continue a trial to a larger budget (False where every job is a
        new config at one budget)."""
        return self.min_budget < self.max_budget

    def charge(self, budget: float, parent_budget: float | None) -> float:
        """The budget a job to `budget` spends after its parent's `parent_budget` (None: a new
        config): the increment where promotions continue, else the whole budget. What
        `search.total_budget` and `Hyperband.total_budget` count."""
        return budget - (parent_budget if parent_budget is not None and self.promotions_continue else 0.0)

    def __init__(self, space: SearchSpace | Mapping[str, Any], *, seed: int = 0,
                 direction: str = "minimize", min_budget: float = 1.0, max_budget: float = 1.0,
                 eta: float = 3.0, sampler: ConfigSampler | None = None, objectives=None, constraints=None,
                 tie_break: str = "hypervolume"):
        self.space = SearchSpace.coerce(space)
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be 'minimize' or 'maximize', got {direction!r}")
        if tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {list(TIE_BREAKS)}, got {tie_break!r}")
        self.goals = Goals.build(objectives, constraints, direction)
        if objectives is not None:       # the first objective's direction is what `best` ranks by
            direction = self.goals.objectives[0].direction
        self.tie_break = tie_break
        self.points: dict[int, tuple[np.ndarray, float]] = {}   # told trial id -> (losses, violation)
        check_schedule_kinds(min_budget, max_budget, eta, seed)
        if not (0 < min_budget <= max_budget):
            raise ValueError(f"need 0 < min_budget <= max_budget, got {min_budget} and {max_budget}")
        if eta < 2:
            raise ValueError(f"eta must be >= 2, got {eta}")
        self.seed = seed
        self.direction = direction
        self.min_budget = float(min_budget)
        self.max_budget = float(max_budget)
        self.eta = float(eta)
        self.rng = np.random.default_rng(seed)
        self.sampler = sampler or ConfigSampler(self.space)
        self.pending: dict[int, Job] = {}
        self.history: list[tuple[Job, TrialResult]] = []
        self._next_trial_id = 0
        self._queue: list[dict[str, Any]] = []
        self._failure_neighbours = FailureNeighbours(self.space)
        self._filling = False          # the ask in progress only fills a fused group (`ask`)

    # --- the protocol -------------------------------------------------------------------
    def ask(self, fill: bool = False) -> Job | None:
        """The next job, or None when the searcher must wait for pending jobs first. `fill`:
        every worker is busy and the job would only join a trainer's fused group
        (`training.fuse`); a searcher that opens new work for idle workers (synchronous
        Hyperband's next bracket) waits instead, so fusing leaves the search's jobs as they are."""
        self._filling = fill
        try:
            with one_blas_thread():
                job = self._next_job()
        finally:
            self._filling = False
        if job is not None:
            self.pending[job.trial_id] = job
        return job

    def tell(self, job: Job, result) -> None:
        """Report a job's outcome: a float (the objective) or a TrialResult; with several
        objectives a sequence of their values or a dict of named values (objectives,
        constraints' values, any other metric)."""
        if job.trial_id not in self.pending:
            raise KeyError(f"trial {job.trial_id} was not asked by this searcher or was already told")
        asked = self.pending[job.trial_id]
        if job != asked:    # another searcher's job of the same id, or one edited since
            raise ValueError(f"trial {job.trial_id} was asked as {asked}, and is told as {job}")
        self.goals.check_told(result)
        result = self.goals.result_of(result)
        with one_blas_thread():
            self._record(asked, result)

    def _record(self, job: Job, result: TrialResult) -> None:
        # Read before anything changes: a result they refuse (a constraint's value given as
        # text) leaves the job pending.
        loss = self.loss_of(result)
        point = (self.goals.losses(result), self.goals.violation(result)) if self.goals.ranked else None
        del self.pending[job.trial_id]
        self.history.append((job, result))
        if point is not None:
            self.points[job.trial_id] = point
            if hasattr(self.sampler, "observe_point"):
                self.sampler.observe_point(job.config, job.budget, *point)
        self._failure_neighbours.record(config_key(job.config), job.config, failed=not math.isfinite(loss))
        if math.isfinite(loss):
            self.sampler.priors.record(job.config, job.budget, loss)
            self.sampler.observe(job.config, job.budget, loss)
        else:
            self.sampler.observe_failure(job.config, job.budget)
        self._on_result(job, loss)

    def enqueue(self, config: Mapping[str, Any]) -> None:
        """Run `config` before any proposed one, at the budgets the schedule gives new
        configs (a known-good starting point). Enqueue before the first ask, and in the same
        order when a study is rebuilt by replay."""
        config = python_values(dict(config))     # numpy's scalars, as `hpo.optimize`'s initial_configs take them
        problem = self.space.why_not(config)
        if problem:
            raise ValueError(f"cannot enqueue {config!r}: {problem}")
        self._queue.append(config)

    @property
    def n_asked(self) -> int:
        """How many jobs this searcher has handed out."""
        return self._next_trial_id

    # --- helpers for subclasses ---------------------------------------------------------
    def loss_of(self, result: TrialResult) -> float:
        """The value to minimise; failed trials rank last."""
        if not result.ok:
            return math.inf
        return float(result.value) if self.direction == "minimize" else -float(result.value)

    def rank_for_promotion(self, losses: Mapping[int, float], limit: int | None = None) -> list[int]:
        """The trial ids with a usable result (`losses`: trial id -> loss), best first: the one
        place a schedule orders a rung. One objective: by loss, then trial id. Several, or
        constraints: by `constrained_order` on the told points (failed ones left out); with
        `limit`, only the first `limit` are in order (a rung promotes from its top only)."""
        usable = [tid for tid, loss in losses.items() if math.isfinite(loss)]
        if not self.goals.ranked:
            return sorted(usable, key=lambda tid: (losses[tid], tid))
        usable.sort()
        if not usable:
            return []
        points = np.array([self.points[tid][0] for tid in usable])
        violations = np.array([self.points[tid][1] for tid in usable])
        order = constrained_order(points, violations, self.tie_break, limit)
        return [usable[i] for i in order if math.isfinite(violations[i])]

    def _new_job(self, config: Mapping[str, Any], budget: float, *, continues: int | None = None,
                 bracket: int | None = None, rung: int | None = None) -> Job:
        job = Job(trial_id=self._next_trial_id, config=dict(config), budget=float(budget),
                  continues=continues, bracket=bracket, rung=rung)
        self._next_trial_id += 1
        return job

    def _propose(self, budget: float) -> dict[str, Any]:
        if self._queue:
            config = self._queue.pop(0)
            self.sampler.mark_seen(config)
            return config
        pending = [j.config for j in self.pending.values()]
        config = self.sampler.propose(self.rng, budget, pending)
        for _ in range(FAILURE_REDRAWS):
            if not self._failure_neighbours.beside_failure(config):
                break
            config = self.sampler.propose(self.rng, budget, pending)
        return config

    @abc.abstractmethod
    def _next_job(self) -> Job | None: ...

    def _on_result(self, job: Job, loss: float) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Scheduling reaction to a finished job (promotions and the like)."""

    # --- reporting ----------------------------------------------------------------------
    def stats(self) -> dict[str, float]:
        """Figures worth plotting over a search (TensorBoard's `searcher/*` scalars)."""
        stats = {"asked": float(self.n_asked), "pending": float(len(self.pending))}
        stats.update(self.sampler.stats() if hasattr(self.sampler, "stats") else {})
        return stats

    @property
    def best(self) -> tuple[Job, TrialResult] | None:
        """The best finished job at the largest budget reached by any successful job."""
        ok = [(j, r) for j, r in self.history if r.ok]
        if self.goals.constraints:      # a feasible result, where there is one
            feasible = [(j, r) for j, r in ok if self.goals.violation(r) == 0]
            ok = feasible or ok
        if not ok:
            return None
        top_budget = max(j.budget for j, _ in ok)
        return min(((j, r) for j, r in ok if j.budget == top_budget), key=lambda jr: self.loss_of(jr[1]))

    def pareto_front(self) -> list[tuple[Job, TrialResult]]:
        """The finished jobs on the Pareto front at the largest budget a successful job
        reached: feasible and not dominated by another there (with no feasible one, the least
        violating). One objective: the best job(s), ties included."""
        ok = [(j, r) for j, r in self.history if r.ok]
        if not ok:
            return []
        top_budget = max(j.budget for j, _ in ok)
        top = [(j, r) for j, r in ok if j.budget == top_budget]
        losses = np.array([self.goals.losses(r) for _, r in top])
        violations = np.array([self.goals.violation(r) for _, r in top])
        return [jr for jr, keep in zip(top, pareto_mask(losses, violations)) if keep]
