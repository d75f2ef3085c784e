"""The program cache's bound, on stand-in programs (no TensorFlow)."""

from dataclasses import dataclass

import pytest

from hpo.training.program_cache import ProgramCache


@dataclass
class Program:
    name: str
    size: int = 1


def cache(capacity=3, budget=None, evicted=None):
    return ProgramCache(capacity, budget, on_evict=lambda key, program: evicted.append(key) if evicted is not None
                        else None, measure=lambda program: program.size)


def test_the_cache_never_holds_more_than_its_capacity_and_evicts_the_least_recently_used():
    evicted = []
    programs = cache(capacity=3, evicted=evicted)
    for name in "abcdefgh":
        programs.put((name,), Program(name))
        assert len(programs) <= 3
    assert programs.keys() == [("f",), ("g",), ("h",)]
    assert evicted == [("a",), ("b",), ("c",), ("d",), ("e",)]
    assert programs.evictions == 5


def test_a_lookup_makes_a_program_the_most_recently_used():
    programs = cache(capacity=2)
    programs.put(("a",), Program("a"))
    programs.put(("b",), Program("b"))
    assert programs.get(("a",)).name == "a"
    programs.put(("c",), Program("c"))
    assert ("a",) in programs and ("b",) not in programs


def test_hits_and_misses_are_counted():
    programs = cache()
    assert programs.get(("a",)) is None
    programs.put(("a",), Program("a"))
    assert programs.get(("a",)) is not None and programs.get(("a",)) is not None
    assert (programs.hits, programs.misses, programs.hit_rate) == (2, 1, pytest.approx(2 / 3))


def test_the_byte_budget_evicts_until_the_programs_fit_but_keeps_the_newest():
    evicted = []
    programs = cache(capacity=10, budget=100, evicted=evicted)
    programs.put(("a",), Program("a", 40))
    programs.put(("b",), Program("b", 40))
    programs.put(("c",), Program("c", 40))
    assert programs.keys() == [("b",), ("c",)] and programs.bytes == 80
    programs.put(("big",), Program("big", 500))
    assert programs.keys() == [("big",)] and evicted == [("a",), ("b",), ("c",)]


def test_discard_is_not_an_eviction():
    evicted = []
    programs = cache(evicted=evicted)
    programs.put(("a",), Program("a", 7))
    programs.discard(("a",))
    assert len(programs) == 0 and programs.bytes == 0 and evicted == [] and programs.evictions == 0


def test_a_cache_without_room_is_refused():
    with pytest.raises(ValueError, match="capacity 0"):
        ProgramCache(0)
