"""A trial's initial weights without a live model.

A reused program starts each trial from the values a fresh build under the trial's seed
would give. A real build vouches once per architecture that the stateless path
(`hpo.training.initial_weights.stateless_build`) reproduces them; after two stateless builds
under different seeds, a learnt recipe replays the draws without running the builder at
all (where a tunable parameter had one value in both builds, only at that value: another
value relearns). A builder whose `builds_stateless` is False (one that makes variables
outside its layers, as a model compiled with its optimizer does) is built for real each time.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, Mapping

from hpo.errors import TrialFailed
from hpo.training.context import TrainingContext
from hpo.training.initial_weights import (
    InitRecipe,
    StatelessBuild,
    learn_recipe,
    same_in_both,
    same_values,
    stateless_build,
)
from hpo.training.program import architecture_signature
from hpo.training.seeding import seed_trial

log = logging.getLogger("hpo.train")


class FreshWeights:
    """Per architecture signature: whether the stateless path was checked against a real
    build (`checked`), and the replay recipe, the first stateless build to learn it from, or
    False (`recipes`)."""

    def __init__(self, context: TrainingContext, build_model: Callable[[Mapping[str, Any], int], Any]):
        """`build_model(params, seed)`: a real, seeded build on the context's device (the
        trainer's, which may hand back a model it kept)."""
        self.context = context
        self.build_model = build_model
        self.checked: dict[str, bool] = {}
        self.recipes: dict[str, InitRecipe | StatelessBuild | bool] = {}

    def values(self, params: Mapping[str, Any], seed: int) -> list:
        """The values a fresh seeded build gives its variables (`model.variables` order),
        without a live model once a real build has vouched for the stateless path, and
        without running the builder once two stateless builds have taught a recipe."""
        signature = architecture_signature(params, self.context.builder)
        if self.checked.get(signature) is None:
            model = self.build_model(params, seed)
            self.verify(signature, model, params, seed)
            return [v.value for v in model.variables]
        if not self.checked[signature]:
            return [v.value for v in self.build_model(params, seed).variables]
        try:
            recipe = self.recipes.get(signature)
            if isinstance(recipe, InitRecipe) and recipe.covers(params):
                return self._on_device(seed, lambda: recipe.values(params))
            # Learning while there is no recipe yet, or one pinned to values this trial lies outside.
            learning = recipe is None or isinstance(recipe, StatelessBuild) \
                or (isinstance(recipe, InitRecipe) and bool(recipe.pinned))
            build = self._stateless_build(params, seed, record_draws=learning)
        except Exception as exc:
            raise TrialFailed(f"model builder failed: {type(exc).__name__}: {exc}") from exc
        if learning:
            self._learn_recipe(signature, recipe, build)
        return build.values

    def _learn_recipe(self, signature: str, first: StatelessBuild | InitRecipe | None, build: StatelessBuild) -> None:
        """A recipe from an earlier build (`first`, or the build a pinned recipe this trial fell
        outside of was learnt from) and this one."""
        if isinstance(first, InitRecipe):
            first = first.learnt_from
        if first is None:
            self.recipes[signature] = build       # the next trial teaches it
            return
        tunable = getattr(self.context.builder, "tunable_params", ())
        recipe = learn_recipe(first, build, tunable)
        pinned = same_in_both(first.params, build.params, tunable)
        if recipe and pinned:
            recipe = dataclasses.replace(recipe, pinned=pinned, learnt_from=build)
        self.recipes[signature] = recipe or False
        if not self.recipes[signature]:
            log.info("initial weights do not follow the seeds and parameters in a way we can replay; "
                     "running the builder for each trial")

    def _stateless_build(self, params: Mapping[str, Any], seed: int,
                         record_draws: bool = False) -> StatelessBuild | None:
        """`stateless_build` under the trial's seed, on the context's device."""
        context = self.context
        return self._on_device(seed, lambda: stateless_build(context.builder, params, context.input_shape,
                                                             context.num_classes, record_draws))

    def _on_device(self, seed: int, make: Callable):
        import tensorflow as tf

        seed_trial(seed)
        with tf.device(self.context.device):
            return make()

    def forget(self, signature: str) -> None:
        """Drop what is kept for an architecture (its trainer evicted its program): if it
        comes back, a real build vouches for it again."""
        self.checked.pop(signature, None)
        self.recipes.pop(signature, None)

    def verify(self, signature: str, model, params: Mapping[str, Any], seed: int) -> None:
        if signature in self.checked:
            return
        if not getattr(self.context.builder, "builds_stateless", True):
            self.checked[signature] = False       # the builder says why not: no build to compare
            return
        try:
            build = self._stateless_build(params, seed, record_draws=True)
        except Exception:   # noqa: BLE001 - a builder that needs live variables: real builds it is
            build = None
        self.checked[signature] = same_values(model.variables, build and build.values)
        if self.checked[signature]:
            self.recipes[signature] = build       # the first of the two builds a recipe needs
        else:
            log.info("stateless initialisation does not reproduce this builder's weights; building each trial")
