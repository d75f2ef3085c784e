"""How far a budget's ranking of configurations agrees with the ranking a larger budget gives.

Multi-fidelity search trusts that what wins at a small budget also wins at a large one. Where
it does not (a learning rate that wins after one epoch and loses after thirty, a branch of the
space that looks best early), every rung below the reversal misleads both the promotions and
the model. This module measures it from the results alone.

For a pair of budgets (lower, upper), every configuration evaluated at `upper` gets a predicted
rank at `lower`: its own rank there where it ran there (a promoted config), else the
inverse-distance-weighted mean rank of its K nearest neighbours among the configs evaluated at
`lower`. The agreement is Spearman's correlation between those predicted ranks and the losses
at `upper`. Using every config at `upper` (not only the promoted ones, which are the top of
`lower` and so agree with one another by selection) is what lets a fresh config from another
branch or another learning-rate region show that the lower budget's order is wrong.

Distances are taken in the unit cube. A choice counts 1 where the values differ; an inactive
(conditional) entry counts 0 against another inactive one and 1 against an active one.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

K_NEIGHBOURS = 3
# The most recent configs used per budget: keeps ask() at a few ms with 1,000 results.
MAX_LOWER = 256
MAX_UPPER = 64


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (average ranks for ties); 0 where either side is constant."""
    rx, ry = rankdata(x), rankdata(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denominator = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / denominator) if denominator > 0 else 0.0


def distances(a: np.ndarray, b: np.ndarray, unordered: np.ndarray) -> np.ndarray:
    """Squared distances (len(a) x len(b)) between unit-cube rows, NaN meaning inactive."""
    x, y = a[:, None, :], b[None, :, :]
    missing_x, missing_y = np.isnan(x), np.isnan(y)
    diff = np.abs(np.nan_to_num(x) - np.nan_to_num(y))
    diff = np.where(unordered[None, None, :], (diff > 1e-9).astype(float), diff * diff)
    diff = np.where(missing_x | missing_y, (missing_x != missing_y).astype(float), diff)
    return diff.sum(axis=2)


def predicted_ranks(lower_vectors: np.ndarray, lower_losses: np.ndarray, upper_vectors: np.ndarray,
                    unordered: np.ndarray) -> np.ndarray:
    """For each upper row, its rank (0 best, 1 worst) at the lower budget, own or neighbours'."""
    ranks = (rankdata(lower_losses) - 1) / max(1, len(lower_losses) - 1)
    d = np.sqrt(distances(upper_vectors, lower_vectors, unordered))
    k = min(K_NEIGHBOURS, len(lower_losses))
    nearest = np.argpartition(d, k - 1, axis=1)[:, :k]
    near_d = np.take_along_axis(d, nearest, axis=1)
    # A config that ran at the lower budget (distance 0) takes its own rank: the weight 1/1e-9
    # swamps its neighbours'.
    weights = 1.0 / np.maximum(near_d, 1e-9)
    return (weights * ranks[nearest]).sum(axis=1) / weights.sum(axis=1)


def agreement(lower: tuple[np.ndarray, np.ndarray], upper: tuple[np.ndarray, np.ndarray],
              unordered: np.ndarray) -> float:
    """Spearman's rho between the lower budget's (predicted) ranks and the upper budget's
    losses, over the configs at the upper budget. `lower` and `upper` are (vectors, losses),
    the most recent MAX_LOWER and MAX_UPPER used."""
    lower_vectors, lower_losses = lower[0][-MAX_LOWER:], lower[1][-MAX_LOWER:]
    upper_vectors, upper_losses = upper[0][-MAX_UPPER:], upper[1][-MAX_UPPER:]
    predicted = predicted_ranks(lower_vectors, lower_losses, upper_vectors, unordered)
    return spearman(predicted, upper_losses)
