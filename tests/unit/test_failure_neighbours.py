"""A new config whose nearest finished config failed is drawn again (issue 59, case 6)."""


from hpo.search import RandomSearch
from hpo.search.base import config_key
from hpo.search.surrogates.failure_neighbours import FailureNeighbours
from hpo.space import SearchSpace
from hpo.trial import TrialResult

SPACE = SearchSpace.from_dict({
    "units": {"type": "int", "low": 1, "high": 256},
    "optimizer": {"type": "choice", "values": ["adam", "sgd"]},
    "momentum": {"type": "float", "low": 0.0, "high": 0.9, "when": {"optimizer": "sgd"}},
})


def record(neighbours, config, failed):
    neighbours.record(config_key(config), config, failed=failed)


def test_a_config_beside_a_failure_is_flagged_once_something_has_worked():
    neighbours = FailureNeighbours(SPACE)
    record(neighbours, {"units": 250, "optimizer": "adam"}, failed=True)
    assert not neighbours.beside_failure({"units": 240, "optimizer": "adam"}), "nothing has worked yet"
    record(neighbours, {"units": 10, "optimizer": "adam"}, failed=False)
    assert neighbours.beside_failure({"units": 240, "optimizer": "adam"})
    assert not neighbours.beside_failure({"units": 20, "optimizer": "adam"})


def test_nothing_is_flagged_where_nothing_failed_and_a_configs_latest_outcome_counts():
    neighbours = FailureNeighbours(SPACE)
    record(neighbours, {"units": 10, "optimizer": "adam"}, failed=False)
    record(neighbours, {"units": 250, "optimizer": "adam"}, failed=False)
    assert not neighbours.beside_failure({"units": 240, "optimizer": "adam"})
    record(neighbours, {"units": 250, "optimizer": "adam"}, failed=True)     # the same config fails later
    assert neighbours.beside_failure({"units": 240, "optimizer": "adam"})


def test_an_inactive_parameter_keeps_a_branch_apart():
    neighbours = FailureNeighbours(SPACE)
    record(neighbours, {"units": 128, "optimizer": "sgd", "momentum": 0.5}, failed=True)
    record(neighbours, {"units": 128, "optimizer": "adam"}, failed=False)
    assert neighbours.beside_failure({"units": 130, "optimizer": "sgd", "momentum": 0.4})
    assert not neighbours.beside_failure({"units": 130, "optimizer": "adam"})


def test_random_search_stops_drawing_beside_the_failing_half():
    def run(fails):
        # 1,024 configs: 200 asks never run through the passing half (random search repeats none).
        searcher = RandomSearch({"units": {"type": "int", "low": 1, "high": 1024}}, seed=3)
        failed = 0
        for _ in range(200):
            job = searcher.ask()
            bad = fails(job.config)
            failed += bad
            searcher.tell(job, TrialResult(value=None) if bad else TrialResult(value=1.0))
        return failed

    assert run(lambda c: False) == 0
    failed = run(lambda c: c["units"] > 512)
    assert failed < 0.25 * 200, failed      # a uniform draw lands there half the time
