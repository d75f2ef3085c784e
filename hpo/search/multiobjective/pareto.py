"""Ranking points with several objectives: non-dominated sorting, crowding distance,
hypervolume contributions and Deb's constraint domination. Every objective is a loss
(smaller is better); rows are points, columns objectives.

`constrained_order` is what the searchers use to rank a rung or split a model's good from
bad configs: feasible points first, by non-dominated rank (NSGA-II, Deb et al. 2002), ties
broken by hypervolume contribution with two objectives (`tie_break="hypervolume"`, the
default) or crowding distance (`"crowding"`, and what "hypervolume" falls back to with three
or more, where exact contributions cost far more), the larger first, as MO-ASHA (Schmucker
et al. 2021); then infeasible points by total violation (Deb 2000); points
without usable values last. Ties left after that go to the lower index, so the order is
deterministic.
"""

from __future__ import annotations

import bisect

import numpy as np

TIE_BREAKS = ("crowding", "hypervolume")


def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    """a is no worse than b everywhere and better somewhere."""
    return bool(np.all(a <= b) and np.any(a < b))


def non_dominated_ranks(points: np.ndarray, limit: int | None = None) -> np.ndarray:
    """Each point's front (0: not dominated by any). With `limit`, peeling may stop once at
    least `limit` points are ranked (those left get rank len(points)); two objectives are
    always ranked in full, in O(n log n)."""
    points = np.asarray(points, dtype=float)
    n = len(points)
    ranks = np.full(n, n, dtype=int)
    if n == 0:
        return ranks
    if points.shape[1] == 1:
        # One objective: fronts are the distinct values in order.
        _, inverse = np.unique(points[:, 0], return_inverse=True)
        return inverse.reshape(-1).astype(int)
    if points.shape[1] == 2:
        return _two_objective_ranks(points)
    # Distinct points in lexicographic order (equal points share a front): a point can only be
    # dominated by one before it, which is already no worse in the first objective, so
    # dominated_by[i, j] (j dominates i) is j < i and no worse in every other objective.
    # Built one objective at a time into one buffer: n x n, never n x n x m.
    unique, inverse = np.unique(points, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    u = len(unique)
    dominated_by = np.tri(u, k=-1, dtype=bool)
    buffer = np.empty((u, u), dtype=bool)
    for j in range(1, points.shape[1]):
        column = unique[:, j]
        np.less_equal(column[None, :], column[:, None], out=buffer)
        dominated_by &= buffer
    count = dominated_by.view(np.uint8).sum(axis=1, dtype=np.int64)
    unique_ranks = np.full(u, n, dtype=int)
    sizes = np.bincount(inverse, minlength=u)          # how many points each distinct one stands for
    remaining = np.ones(u, dtype=bool)
    rank, done = 0, 0
    while remaining.any():
        front = remaining & (count == 0)
        unique_ranks[front] = rank
        remaining &= ~front
        done += int(sizes[front].sum())
        if limit is not None and done >= limit:
            break
        count -= dominated_by[:, front].view(np.uint8).sum(axis=1, dtype=np.int64)
        rank += 1
    return unique_ranks[inverse]


def _two_objective_ranks(points: np.ndarray) -> np.ndarray:
    """Fronts of two objectives in O(n log n): in lexicographic order, a point joins the first
    front whose last member (its smallest second objective so far) does not dominate it."""
    order = np.lexsort((points[:, 1], points[:, 0]))
    ordered = points[order]
    distinct = np.ones(len(points), dtype=bool)          # equal points share a front
    distinct[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    last: list[float] = []          # per front, its last member's second objective (non-decreasing)
    fronts = []
    for f2 in ordered[distinct, 1].tolist():
        k = bisect.bisect_right(last, f2)
        if k == len(last):
            last.append(f2)
        else:
            last[k] = f2
        fronts.append(k)
    ranks = np.empty(len(points), dtype=int)
    ranks[order] = np.array(fronts, dtype=int)[np.cumsum(distinct) - 1]
    return ranks


def crowding_distance(points: np.ndarray) -> np.ndarray:
    """NSGA-II's crowding distance within one front: the extremes of every objective get inf."""
    points = np.asarray(points, dtype=float)
    n, m = points.shape
    distance = np.zeros(n)
    if n <= 2:
        return np.full(n, np.inf)
    for j in range(m):
        order = np.argsort(points[:, j], kind="stable")
        column = points[order, j]
        span = column[-1] - column[0]
        distance[order[0]] = distance[order[-1]] = np.inf
        if span > 0:
            distance[order[1:-1]] += (column[2:] - column[:-2]) / span
    return distance


def hypervolume_contributions(points: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray:
    """Each point's exclusive hypervolume within one front of two objectives, against
    `reference` (default: 10% of the range past the worst of each objective; a point at an
    extreme then still counts). Needs two objectives: more use crowding distance."""
    points = np.asarray(points, dtype=float)
    n, m = points.shape
    if m != 2:
        raise ValueError(f"hypervolume contributions are computed for two objectives, got {m}")
    if n == 0:
        return np.zeros(0)
    if reference is None:
        low, high = points.min(axis=0), points.max(axis=0)
        reference = high + 0.1 * np.where(high > low, high - low, 1.0)
    order = np.lexsort((points[:, 1], points[:, 0]))
    f1, f2 = points[order, 0], points[order, 1]
    right = np.append(f1[1:], reference[0])          # the next point along objective 1
    above = np.insert(f2[:-1], 0, reference[1])      # the previous point along objective 2
    contribution = np.zeros(n)
    contribution[order] = np.clip(right - f1, 0, None) * np.clip(above - f2, 0, None)
    return contribution


def front_tie_break_scores(points: np.ndarray, ranks: np.ndarray, tie_break: str) -> np.ndarray:
    """Every point's tie-break score within its front (`ranks`: the front of each point), all
    fronts at once: each front's objectives scaled to [0, 1] over its members, then crowding
    distance or (two objectives) hypervolume contribution, the values that `crowding_distance`
    and `hypervolume_contributions` give front by front. A rung or model ranks hundreds of
    points in dozens of fronts at every ask: one pass of sorts, not a loop over fronts."""
    points = np.asarray(points, dtype=float)
    n, m = points.shape
    if n == 0:
        return np.zeros(0)
    fronts = int(ranks.max()) + 1
    low = np.full((fronts, m), np.inf)
    high = np.full((fronts, m), -np.inf)
    np.minimum.at(low, ranks, points)
    np.maximum.at(high, ranks, points)
    spread = high - low
    scaled = (points - low[ranks]) / np.where(spread > 0, spread, 1.0)[ranks]
    if tie_break == "hypervolume" and m == 2:
        return _front_contributions(scaled, ranks, np.where(spread > 0, 1.1, 0.1))
    distance = np.zeros(n)
    for j in range(m):
        order = np.lexsort((scaled[:, j], ranks))        # by front, then objective j; stable
        column, front = scaled[order, j], ranks[order]
        starts = np.ones(n, dtype=bool)
        starts[1:] = front[1:] != front[:-1]
        ends = np.ones(n, dtype=bool)
        ends[:-1] = starts[1:]
        span = (spread[:, j] > 0)[front]               # scaled: a front's range is 1 or 0
        distance[order[starts | ends]] = np.inf
        inner = np.flatnonzero(~(starts | ends) & span)
        distance[order[inner]] += column[inner + 1] - column[inner - 1]
    return distance


def _front_contributions(scaled: np.ndarray, ranks: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """`hypervolume_contributions` of every front at once (`reference`: per front)."""
    n = len(scaled)
    order = np.lexsort((scaled[:, 1], scaled[:, 0], ranks))
    f1, f2, front = scaled[order, 0], scaled[order, 1], ranks[order]
    same = front[1:] == front[:-1]
    right = reference[front, 0].copy()
    right[:-1][same] = f1[1:][same]                   # the next member along objective 1
    above = reference[front, 1].copy()
    above[1:][same] = f2[:-1][same]                   # the previous member along objective 2
    contribution = np.zeros(n)
    contribution[order] = np.clip(right - f1, 0, None) * np.clip(above - f2, 0, None)
    return contribution


def _as_points(losses, violations) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Losses and violations as float arrays (no violations: all feasible), and which points are
    usable: every loss and the violation finite."""
    losses = np.asarray(losses, dtype=float)
    violations = np.zeros(len(losses)) if violations is None else np.asarray(violations, dtype=float)
    return losses, violations, np.all(np.isfinite(losses), axis=1) & np.isfinite(violations)


def constrained_order(losses: np.ndarray, violations: np.ndarray | None = None,
                      tie_break: str = "hypervolume", limit: int | None = None) -> np.ndarray:
    """Indices of the points best first (see the module's docstring). With `limit`, only the
    first `limit` positions are ranked exactly; the rest follow in index order."""
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {list(TIE_BREAKS)}, got {tie_break!r}")
    losses, violations, usable = _as_points(losses, violations)
    feasible = np.flatnonzero(usable & (violations == 0))
    infeasible = np.flatnonzero(usable & (violations > 0))
    unusable = np.flatnonzero(~usable)
    parts = []
    if len(feasible):
        points = losses[feasible]
        ranks = non_dominated_ranks(points, limit)
        if limit is not None and limit < len(feasible):
            # Fronts past the one that fills the first `limit` positions need no order.
            last = np.sort(ranks)[limit - 1] if limit > 0 else -1
            ranks = np.where(ranks <= last, ranks, len(feasible))
        ties = np.zeros(len(feasible))
        scored = np.flatnonzero(ranks < len(feasible))
        if len(scored):
            ties[scored] = front_tie_break_scores(points[scored], ranks[scored], tie_break)
        # Sort keys: rank, then larger tie-break score, then index.
        parts.append(feasible[np.lexsort((feasible, -ties, ranks))])
    if len(infeasible):
        parts.append(infeasible[np.lexsort((infeasible, violations[infeasible]))])
    parts.append(unusable)
    return np.concatenate(parts).astype(int) if parts else np.zeros(0, dtype=int)


def pareto_mask(losses: np.ndarray, violations: np.ndarray | None = None) -> np.ndarray:
    """Which points are on the feasible Pareto front (usable, feasible, non-dominated).
    Where no point is feasible, the front is the least-violating usable points."""
    losses, violations, usable = _as_points(losses, violations)
    n = len(losses)
    mask = np.zeros(n, dtype=bool)
    if not usable.any():
        return mask
    feasible = usable & (violations == 0)
    if not feasible.any():
        least = violations[usable].min()
        feasible = usable & (violations == least)
    index = np.flatnonzero(feasible)
    mask[index[non_dominated_ranks(losses[index]) == 0]] = True
    return mask
