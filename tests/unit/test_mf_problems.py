"""The synthetic multi-fidelity problems' stated optima: regret is measured from them."""

import numpy as np

from benchmarks.mf_problems import ALL_PROBLEMS

BRANCH_PROBLEMS = ("branch3_rev", "branch4_strong", "branch3_mild", "branch3_late", "branch3_uneven")


def test_no_config_of_a_branch_problem_beats_its_optimum_and_branch_zero_reaches_it():
    rng = np.random.default_rng(0)
    for name in BRANCH_PROBLEMS:
        problem = ALL_PROBLEMS[name]
        labels = problem.space["branch"]["values"]
        numbers = [k for k in problem.space if k != "branch"]
        # Random configs of every branch: none below the optimum.
        for _ in range(300):
            config = {"branch": labels[rng.integers(len(labels))], **{k: float(rng.random()) for k in numbers}}
            assert problem.exact(config) >= problem.optimum
        # Coordinate search in branch 0 from the middle: down to the optimum.
        config = {"branch": labels[0], **{k: 0.5 for k in numbers}}
        own = [k for k in numbers if k.startswith(f"{labels[0]}_")]
        for step in (0.1, 0.01, 0.001, 0.0001):
            for _ in range(30):
                for k in own:
                    options = [min(1.0, max(0.0, config[k] + d)) for d in (-step, 0.0, step)]
                    config[k] = min(options, key=lambda v: problem.exact({**config, k: v}))
        assert problem.optimum == 0.0 and problem.exact(config) < 1e-5
