"""Backlog triage: the K images most likely positive, found within one total budget.

A moderation team rescans a stored backlog when a policy changes. Computing every feature of
every image spends most of the time on images that are clearly fine. Triage spends it where it
can change the answer, in the spirit of BlazeIt's limit queries (a cheap model ranks, the
expensive one is spent where the ranking is in doubt):

1. **A ladder per image** (:func:`ladder`), from the index's skyline at the image's size: a
   first set, one near the middle of the costs above it, and the set served without a budget.
   The first set is the most accurate costing at most the same share of the image's full cost
   for every image, the share that makes the first pass's predicted total (decodes included)
   :data:`FIRST_PASS_SHARE` of the budget -- so every image is scored by a set of the same
   relative cost, and scores compare.
2. **Score every image**: decode it, compute its first rung's features, and score it: the
   probability its set's model gives the positive class (or label).
3. **Refine where membership is in doubt.** Let ``t`` be the K-th best score. An image's doubt
   is its distance to ``t`` in log-odds, divided by how far scores at its rung have moved when
   climbing so far (learned from the images refined; 1 until :data:`SPREAD_AFTER` have). The
   most doubtful image that the time left affords climbs one rung (features already computed
   are kept; the image is decoded again), and is scored again. Triage stops when the budget
   buys no further rung, or when no image is within :data:`SETTLED` spreads of ``t``
   (``docs/decisions/triage.md``).

**The budget.** Every decode and every feature is checked before it starts: it starts only if
the time spent so far plus its predicted cost fits the total. So the total is exceeded by at
most the overrun of the last decode or feature started -- less than that one step's measured
time. The time spent counts decoding and feature extraction (and reading image headers), on the
real clock.

A Ctrl-C (``KeyboardInterrupt``) during triage returns the ranking so far, marked
``interrupted``; images not yet scored rank last.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polydom.costs.decode import guarded_decode
from polydom.errors import InputError, PolydomError
from polydom.featurizers.sources import as_array, decode_image, header_shape, is_encoded

__all__ = ["Triage", "triage", "ladder", "FIRST_PASS_SHARE", "SETTLED", "SPREAD_AFTER"]

#: The share of the total budget the first pass plans to spend, decodes included.
FIRST_PASS_SHARE = 0.35
#: Refining stops when the most doubtful image is this many spreads from the K-th score.
SETTLED = 3.0
#: Images refined from a rung before their moves set that rung's spread.
SPREAD_AFTER = 10
#: Rungs per image: the first pass's set, one in the middle, the unlimited best.
MAX_RUNGS = 3
_CLIP = 1e-6


@dataclass(frozen=True)
class Triage:
    """What triage found: the top ``k`` images, best first, and how it spent the budget.

    Attributes
    ----------
    items : ndarray of int
        Positions (in the input) of the ``k`` images most likely positive, best first.
    scores : ndarray of float
        Their scores (the positive class's or label's probability).
    all_scores : ndarray of float
        Every image's last score; NaN for an image never scored.
    rungs : ndarray of int
        The rung each image reached (0 the first pass's; -1 not scored).
    features : list of tuple of str
        The set each image was last scored with.
    spent : float
        Seconds of decoding and extraction, on the real clock.
    longest_step : float
        The longest single decode or feature (the most ``spent`` may exceed the budget by).
    total_budget : float
    label : object
        The class or label ranked.
    refined : int
        Rungs climbed after the first pass.
    stopped : str
        ``"settled"`` (no image left in doubt), ``"budget"`` (no rung affordable), ``"top"``
        (every image at its last rung) or ``"interrupted"`` (Ctrl-C).
    """

    items: np.ndarray
    scores: np.ndarray
    all_scores: np.ndarray
    rungs: np.ndarray
    features: list
    spent: float
    longest_step: float
    total_budget: float
    label: Any
    refined: int
    stopped: str

    @property
    def interrupted(self) -> bool:
        """Whether a Ctrl-C ended triage (the ranking is the best found by then)."""
        return self.stopped == "interrupted"


def ladder(index, size: float, first_budget: float = 0.0, max_rungs: int = MAX_RUNGS) -> list[int]:
    """The keys of the sets an image of ``size`` climbs, cheapest first.

    The skyline at ``size`` -- the sets ``index.lookup`` serves as the budget grows, those whose
    score beats the empty set's -- gives the rungs: first the most accurate set costing at most
    ``first_budget`` (the cheapest skyline set if none does), then one near the geometric middle
    of the costs above it, and last the set served without a budget. Fewer when they
    coincide; empty when no set beats the empty one.
    """
    top = index.lookup(size, math.inf)
    if not top.features:
        return []
    empty = index.lookup(size, 0.0).accuracy
    top_cost = index.cost_of(top.features, size)
    costs: dict[int, float] = {}
    for fraction in np.geomspace(1e-4, 1.0, 25):
        choice = index.lookup(size, top_cost * fraction)
        if choice.features and choice.accuracy > empty:
            costs.setdefault(int(choice.key), index.cost_of(choice.features, size))
    costs.setdefault(int(top.key), top_cost)
    skyline = sorted(costs, key=costs.get)
    affordable = [k for k in skyline if costs[k] <= first_budget]
    first = affordable[-1] if affordable else skyline[0]
    above = [k for k in skyline if costs[k] > costs[first]]
    if not above:
        return [first]
    last = above[-1]
    rungs = [first]
    if max_rungs > 2 and len(above) > 1:
        middle_cost = math.sqrt(max(costs[first], 1e-12) * costs[last])
        rungs.append(min(above[:-1], key=lambda k: abs(math.log(max(costs[k], 1e-12) / middle_cost))))
    return rungs + [last]


@dataclass
class _Image:
    position: int
    source: Any  # a path or bytes, or the validated array
    size: int
    rungs: list = field(default_factory=list)
    rung: int = -1
    vectors: dict = field(default_factory=dict)
    score: float = math.nan
    features: tuple = ()


class _Budget:
    """Seconds spent against the total; each step asks before it starts."""

    def __init__(self, total: float, clock):
        self.total, self.clock, self.spent, self.longest = float(total), clock, 0.0, 0.0

    def affords(self, predicted: float) -> bool:
        return self.spent + predicted <= self.total

    def run(self, work):
        start = self.clock()
        try:
            return work()
        finally:
            took = self.clock() - start
            self.spent += took
            self.longest = max(self.longest, took)


class _Exhausted(PolydomError):
    """The budget does not afford the next step (caught inside triage; never reaches a caller)."""


class _Run:
    def __init__(self, state, images, k, total_budget, column, progress, clock):
        self.state, self.index, self.planner = state, state.index, state.planner
        self.k, self.column, self.clock = k, column, clock
        self.budget = _Budget(total_budget, clock)
        self.images = images
        self.progress = progress
        self.last_line = clock()
        self.moves: dict[int, list] = {}
        self.ladders: dict[int, list] = {}
        self.first_share = 0.0
        self.refined = 0

    # ------------------------------------------------------------------ one image

    def say(self, text: str, force: bool = False) -> None:
        if self.progress and (force or self.clock() - self.last_line >= 2.0):
            print(f"polydom triage: {text}", file=sys.stderr, flush=True)
            self.last_line = self.clock()

    def sized(self, position: int, source) -> _Image:
        if is_encoded(source):
            if not self.budget.affords(0.0):
                raise _Exhausted
            height, width = self.budget.run(lambda: header_shape(source, index=position))
        else:
            source = as_array(source, index=position)  # validated once, kept for the climbs
            height, width = source.shape[:2]
        return _Image(position, source, int(height) * int(width))

    def climb_ladders(self, images: list[_Image]) -> None:
        """Each image's ladder, its first rung the same share of its full cost for every image:
        the first pass plans :data:`FIRST_PASS_SHARE` of the budget, decodes included, so that
        every image is scored by a set of the same relative cost (and scores compare)."""
        # One ladder per 2% band of sizes: the sets an index serves change slowly with size, and
        # a backlog rarely repeats a size exactly.
        bands = [round(math.log(max(image.size, 1)) / math.log(1.02)) for image in images]
        full = {}
        for band, image in zip(bands, images):
            if band not in full:
                top = self.index.lookup(image.size, math.inf)
                full[band] = self.index.cost_of(top.features, image.size) if top.features else 0.0
        decoding = sum(guarded_decode(self.state.decode_fit, im.size) for im in images if is_encoded(im.source))
        total = sum(full[band] for band in bands)
        share = max(0.0, FIRST_PASS_SHARE * self.budget.total - decoding) / total if total > 0 else 0.0
        self.first_share = min(1.0, share)
        for band, image in zip(bands, images):
            if band not in self.ladders:
                self.ladders[band] = ladder(self.index, image.size, self.first_share * full[band])
            image.rungs = self.ladders[band]

    def pixels(self, image: _Image) -> np.ndarray:
        if not is_encoded(image.source):
            return image.source
        if not self.budget.affords(guarded_decode(self.state.decode_fit, image.size)):
            raise _Exhausted
        return self.budget.run(lambda: decode_image(image.source, index=image.position))

    def step_cost(self, image: _Image, rung: int) -> float:
        """Predicted seconds to bring ``image`` to ``rung``: its missing features (and a decode)."""
        names = self.index.space.frozenset(image.rungs[rung])
        missing = [n for n in names if n not in image.vectors]
        if not missing:
            return 0.0
        cost = self.index.cost_of(sorted(names), image.size) - self.index.cost_of(
            sorted(n for n in names if n in image.vectors), image.size)
        if is_encoded(image.source):
            cost += guarded_decode(self.state.decode_fit, image.size)
        return max(cost, 0.0)

    def climb(self, image: _Image, rung: int) -> None:
        """Compute what ``rung``'s set lacks and move ``image`` to it; ``_Exhausted`` (the image
        keeps its rung, and the features computed so far) when the budget runs out first."""
        plan = self.planner.plan(image.rungs[rung], self.index)
        missing = [f for f in plan.features if f.name not in image.vectors]
        if missing:
            array = self.pixels(image)
            prepared: dict = {}
            for feature in missing:
                if not self.budget.affords(self.index.cost_of([feature.name], image.size)):
                    raise _Exhausted
                image.vectors[feature.name] = self.budget.run(
                    lambda f=feature: f.evaluate(array, index=image.position, prepared=prepared))
        image.rung = rung
        image.features = plan.names

    def scores_of(self, images: list[_Image]) -> None:
        """Score ``images`` at their rungs, one model call per set."""
        by_key: dict[int, list[_Image]] = {}
        for image in images:
            by_key.setdefault(image.rungs[image.rung], []).append(image)
        for key, group in by_key.items():
            plan = self.planner.plan(key, self.index)
            X = np.stack([np.concatenate([im.vectors[n] for n in plan.names]) for im in group])
            proba = self.column(plan.model, X)
            for im, p in zip(group, proba):
                im.score = float(p)

    # ------------------------------------------------------------------ the passes

    def first_pass(self, images: list[_Image]) -> None:
        pending = []
        try:
            for done, image in enumerate(images, 1):
                if image.rungs:
                    self.climb(image, 0)
                    pending.append(image)
                if len(pending) >= 64:
                    self.scores_of(pending)
                    pending = []
                self.say(f"first pass: {done} of {len(images)} images scored, {self.budget.spent:.1f} of "
                         f"{self.budget.total:.1f} s spent, about "
                         f"{(len(images) - done) * self.budget.spent / done:.0f} s left in this pass")
        finally:  # stopped by the budget or a Ctrl-C: what was computed is still scored
            self.scores_of(pending)

    def spread(self, rung: int) -> float:
        """How far log-odds moved when images climbed from ``rung`` (median absolute deviation;
        1 before :data:`SPREAD_AFTER` moves)."""
        moves = self.moves.get(rung, ())
        if len(moves) < SPREAD_AFTER:
            return 1.0
        moves = np.asarray(moves)
        return max(0.05, 1.4826 * float(np.median(np.abs(moves - np.median(moves)))))

    def refine(self, images: list[_Image]) -> str:
        scored = [im for im in images if not math.isnan(im.score)]
        if len(scored) <= self.k:
            return "top"  # every scored image is in the top K already
        # Arrays over the scored images, updated in place as they climb: one iteration costs a
        # few vector operations however long the backlog.
        scores = np.array([im.score for im in scored])
        rung = np.array([im.rung for im in scored])
        last = np.array([len(im.rungs) - 1 for im in scored])
        skipped = np.zeros(len(scored), dtype=bool)
        spreads = np.ones(MAX_RUNGS)
        while True:
            t = _logit(float(np.partition(scores, len(scores) - self.k)[len(scores) - self.k]))
            logits = np.log(np.clip(scores, _CLIP, 1 - _CLIP) / np.clip(1 - scores, _CLIP, 1 - _CLIP))
            doubt = np.abs(logits - t) / spreads[rung]
            doubt[(rung >= last) | skipped] = np.inf
            j = int(np.argmin(doubt))
            if not np.isfinite(doubt[j]):
                return "budget" if skipped.any() else "top"
            if doubt[j] > SETTLED:  # among the images the time left still affords
                return "budget" if skipped.any() else "settled"
            image = scored[j]
            if not self.budget.affords(self.step_cost(image, image.rung + 1)):
                skipped[j] = True
                continue
            before, was = _logit(image.score), image.rung
            try:
                self.climb(image, was + 1)
            except _Exhausted:
                skipped[j] = True  # partly computed: it keeps the rung and score it had
                continue
            self.scores_of([image])
            scores[j], rung[j] = image.score, image.rung
            self.moves.setdefault(was, []).append(_logit(image.score) - before)
            spreads[was] = self.spread(was)
            self.refined += 1
            self.say(f"refining: {self.refined} rungs climbed, {self.budget.spent:.1f} of {self.budget.total:.1f} s "
                     f"spent, {max(0.0, self.budget.total - self.budget.spent):.1f} s left")

    def run(self) -> tuple[list[_Image], str]:
        images: list[_Image] = []
        stopped = "top"
        try:
            for position, source in enumerate(self.images):
                images.append(self.sized(position, source))
            self.climb_ladders(images)
            self.first_pass(images)
            stopped = self.refine(images)
        except _Exhausted:
            stopped = "budget"
        except KeyboardInterrupt:
            stopped = "interrupted"
        return images, stopped


def _logit(p: float) -> float:
    p = min(max(p, _CLIP), 1.0 - _CLIP)
    return math.log(p / (1.0 - p))


def positive_column(state, label):
    """``(label, column(model, X) -> probabilities)``: the class or label triage ranks by.

    Single-label: ``label`` is a class of ``classes_`` (default: the second of two); a set's
    model that never saw it gives 0. Multilabel: a label of ``classes_`` (default: the only one).
    """
    classes = state.classes
    if label is None:
        if state.multilabel and len(classes) == 1 or not state.multilabel and len(classes) == 2:
            label = classes[-1]
        else:
            what = "labels" if state.multilabel else "classes"
            raise InputError(f"label is required: the classifier has {len(classes)} {what} ({classes.tolist()!r:.80})")
    matches = np.flatnonzero(classes == label)
    if not len(matches):
        raise InputError(f"label {label!r:.60} is not one of classes_ ({classes.tolist()!r:.80})")
    position, answers = int(matches[0]), state.answers
    return classes[position], lambda model, X: answers.probas(model, X)[:, position]


def triage(state, images, k: int, total_budget: float, *, label=None, progress: bool = False,
           clock=time.perf_counter) -> Triage:
    """The ``k`` images of ``images`` most likely positive, within ``total_budget`` seconds.

    ``state`` is a classifier's serving state (:class:`~polydom.serving.state.ServingState`);
    :meth:`polydom.CostSensitiveClassifier.triage` is the public entry.
    """
    label, column = positive_column(state, label)
    run = _Run(state, images, k, total_budget, column, progress, clock)
    run.say(f"{len(images)} images, top {k}, {total_budget:g} s", force=True)
    done, stopped = run.run()
    n = len(images)
    all_scores = np.full(n, np.nan)
    rungs = np.full(n, -1, dtype=np.int64)
    features: list = [()] * n
    for image in done:
        all_scores[image.position] = image.score
        rungs[image.position] = image.rung if not math.isnan(image.score) else -1
        features[image.position] = image.features
    ranked = np.where(np.isnan(all_scores), -np.inf, all_scores)
    order = np.lexsort((np.arange(n), -ranked))[:k]
    run.say(f"done ({stopped}): {run.refined} rungs climbed after the first pass, {run.budget.spent:.1f} of "
            f"{total_budget:g} s spent", force=True)
    return Triage(items=order, scores=all_scores[order], all_scores=all_scores, rungs=rungs, features=features,
                  spent=run.budget.spent, longest_step=run.budget.longest, total_budget=float(total_budget), label=label, refined=run.refined,
                  stopped=stopped)
