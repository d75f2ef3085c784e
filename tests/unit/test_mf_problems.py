"""The synthetic multi-fidelity problems' stated optima: regret is measured from them."""

import numpy as np

from benchmarks.mf_problems import ALL_PROBLEMS, MAX_BUDGET, NOISE_FREE_TWINS

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


def test_each_noise_free_twin_is_its_noisy_problem_without_the_noise():
    rng = np.random.default_rng(1)
    assert sorted(NOISE_FREE_TWINS) == ["branin_twin", "levy4_twin", "styblinski3_twin"]
    for name, twin in NOISE_FREE_TWINS.items():
        noisy = ALL_PROBLEMS["noisy_" + name.removesuffix("_twin")]
        assert name not in ALL_PROBLEMS and twin.space == noisy.space and twin.optimum == noisy.optimum
        for _ in range(20):
            config = {k: float(rng.uniform(spec["low"], spec["high"])) for k, spec in twin.space.items()}
            assert twin.exact(config) == noisy.exact(config)
            # At the full budget the twin is the function itself, the same for every run's seed;
            # the noisy problem's draws differ between seeds around it.
            assert twin.evaluate(config, MAX_BUDGET, 0) == twin.evaluate(config, MAX_BUDGET, 5) == twin.exact(config)
            assert noisy.evaluate(config, MAX_BUDGET, 0) != noisy.evaluate(config, MAX_BUDGET, 5)
            # At a lower budget both see the shifted function; the twin adds nothing to it.
            shifted_value = twin.evaluate(config, 1.0, 0)
            draws = [noisy.evaluate(config, 1.0, seed) - shifted_value for seed in range(200)]
            assert abs(np.mean(draws)) < 0.5 * np.std(draws)
