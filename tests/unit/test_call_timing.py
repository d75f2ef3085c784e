"""Timing candidates against each other on a machine whose speed drifts."""

from pytest import approx

from hpo.training.call_timing import first_call_seconds, steady_seconds


class DriftingMachine:
    """A fake clock and candidates whose calls cost `cost` seconds each, `slowdown` times as
    much during the first `slow_calls` calls (a neighbour's job, a throttled core)."""

    def __init__(self, costs: dict[str, float], slow_calls: int, slowdown: float = 3.0):
        self.now, self.calls_made, self.order = 0.0, 0, []
        self.costs, self.slow_calls, self.slowdown = costs, slow_calls, slowdown

    def clock(self) -> float:
        return self.now

    def candidate(self, name: str):
        def call():
            factor = self.slowdown if self.calls_made < self.slow_calls else 1.0
            self.now += self.costs[name] * factor
            self.calls_made += 1
            self.order.append(name)
        return call


def one_after_another(machine: DriftingMachine, names, repeats: int) -> dict[str, float]:
    """How candidates were timed before: every repeat of one, then the next's."""
    medians = {}
    for name in names:
        times = sorted(first_call_seconds(machine.candidate(name), machine.clock) for _ in range(repeats))
        medians[name] = times[len(times) // 2]
    return medians


def test_a_slow_spell_costs_each_candidate_one_sample_and_the_ranking_survives():
    costs = {"xla": 1.0, "graph": 1.2}
    machine = DriftingMachine(costs, slow_calls=2)         # the whole first round runs 3x slower
    medians = steady_seconds({name: machine.candidate(name) for name in costs}, repeats=3, clock=machine.clock)
    assert medians == approx({"xla": 1.0, "graph": 1.2})
    assert machine.order == ["xla", "graph"] * 3              # in turn, each once per round

    # The same spell, timed one candidate after another, sinks the first candidate's median.
    before = one_after_another(DriftingMachine(costs, slow_calls=2), costs, repeats=3)
    assert before == approx({"xla": 3.0, "graph": 1.2})


def test_each_candidate_keeps_the_median_of_its_own_rounds():
    machine = DriftingMachine({"k1": 4.0, "k2": 2.5, "k4": 2.0}, slow_calls=0)
    medians = steady_seconds({name: machine.candidate(name) for name in ("k1", "k2", "k4")}, repeats=5,
                             clock=machine.clock)
    assert medians == approx({"k1": 4.0, "k2": 2.5, "k4": 2.0})
    assert machine.order.count("k4") == 5


def test_a_first_call_is_timed_on_its_own():
    machine = DriftingMachine({"xla": 1.0}, slow_calls=1, slowdown=40.0)   # a compile, say
    assert first_call_seconds(machine.candidate("xla"), machine.clock) == approx(40.0)
    assert steady_seconds({"xla": machine.candidate("xla")}, repeats=2, clock=machine.clock) == approx({"xla": 1.0})
