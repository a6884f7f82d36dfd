"""The O(log n) stoppers of issue #45 decide exactly as the O(n) originals they replace
(``reference_stoppers.py``): the same reports, random learning curves with NaNs, infinities, ties
(signed zeros among them), an epoch reported twice, re-runs, trials that report a late epoch first
(skipping rungs) and interleaved trials, fed to both, give the same decision sequence, the same
``replay()`` and the same rung contents. The structures they rest on are checked against brute
force: :class:`OrderedValues` against a sorted list, :class:`ParetoLayers` and
:func:`front_index` against the original non-dominated sorting."""

from __future__ import annotations

import math
import statistics
from typing import Callable

import numpy as np
import pytest
from reference_stoppers import (
    ReferenceAshaStopper,
    ReferenceIEpochStopper,
    ReferenceMedianStopper,
    ReferenceParetoAshaStopper,
    reference_front_index,
)

from hpo.stoppers import AshaStopper, IEpochStopper, MedianStopper, ParetoAshaStopper, Stopper, front_index
from hpo.stoppers.ordered_values import OrderedValues
from hpo.stoppers.pareto_layers import ParetoLayers

TIES = (0.0, -0.0, 0.5, 0.5, 1.0, math.inf)  # values many trials report alike


def _loss(rng: np.random.Generator, level: float, speed: float, epoch: int) -> float:
    """A noisy decreasing curve, coarsely rounded (ties); now and then NaN, infinite or a tie."""
    draw = rng.random()
    if draw < 0.03:
        return math.nan
    if draw < 0.04:
        return -math.inf if rng.random() < 0.2 else math.inf
    if draw < 0.10:
        return float(rng.choice(TIES))
    return round(level + 1.0 / (1 + speed * epoch) + rng.normal(0, 0.03), 2)


def report_stream(seed: int, trials: int, epochs: int, objectives: int,
                  decide: Callable[[int, int, object], bool] | None = None) -> list[tuple[int, int, object]]:
    """Reports ``(trial, epoch, value)`` of ``trials`` interleaved trials: mostly the next epoch of
    a running trial, sometimes a jump ahead (a late epoch first), the same epoch again, or a
    re-run from epoch 1; a new trial starts while fewer than 12 run. Two objectives: the loss and
    the seconds trained (rounded: ties; NaN now and then). With ``decide`` (a stopper's report) a
    trial told to stop reports at most two more epochs (as a journal holds them) and ends."""
    rng = np.random.default_rng(seed)
    shape = {t: (rng.uniform(0.0, 1.0), rng.uniform(0.2, 3.0), rng.uniform(0.5, 2.0)) for t in range(trials)}
    waiting, running, out = list(range(trials)), {}, []
    stopped: dict[int, int] = {}  # trial -> reports it still makes after its stop
    while waiting or running:
        if waiting and (len(running) < 12 or rng.random() < 0.05):
            running[waiting.pop(0)] = 0
        trial = int(rng.choice(sorted(running)))
        last, draw = running[trial], rng.random()
        if draw < 0.04 and last:
            epoch = last  # the same epoch again
        elif draw < 0.06 and last:
            epoch = 1  # re-run
        elif draw < 0.12:
            epoch = last + int(rng.integers(2, 10))  # a late epoch first
        else:
            epoch = last + 1
        epoch = min(epoch, epochs)
        level, speed, pace = shape[trial]
        loss = _loss(rng, level, speed, epoch)
        if objectives == 1:
            value: object = loss
        else:
            seconds = math.nan if rng.random() < 0.04 else round(pace * epoch, 1)
            value = (loss, seconds)
        out.append((trial, epoch, value))
        running[trial] = epoch
        if decide is not None and trial not in stopped and decide(trial, epoch, value):
            stopped[trial] = int(rng.integers(0, 3))
        if epoch == epochs or rng.random() < 0.02 or stopped.get(trial, 1) == 0:
            del running[trial]
            stopped.pop(trial, None)
        elif trial in stopped:
            stopped[trial] -= 1
    return out


def decisions(stopper: Stopper, stream) -> list[bool]:
    return [stopper.report(t, e, v) for t, e, v in stream]


CASES = {
    "asha-1-3-0": (lambda: AshaStopper(1, 3, 0), lambda: ReferenceAshaStopper(1, 3, 0), 1),
    "asha-2-2-1": (lambda: AshaStopper(2, 2, 1), lambda: ReferenceAshaStopper(2, 2, 1), 1),
    "asha-1-4-0": (lambda: AshaStopper(1, 4, 0), lambda: ReferenceAshaStopper(1, 4, 0), 1),
    "median-1-3": (lambda: MedianStopper(1, 3), lambda: ReferenceMedianStopper(1, 3), 1),
    "median-3-1": (lambda: MedianStopper(3, 1), lambda: ReferenceMedianStopper(3, 1), 1),
    "i-epoch-2": (lambda: IEpochStopper(2, 1 / 3), lambda: ReferenceIEpochStopper(2, 1 / 3), 1),
    "pareto-asha-1-3": (lambda: ParetoAshaStopper(1, 3), lambda: ReferenceParetoAshaStopper(1, 3), 2),
    "pareto-asha-1-2": (lambda: ParetoAshaStopper(1, 2), lambda: ReferenceParetoAshaStopper(1, 2), 2),
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_reports_give_the_same_decisions(case, seed):
    """Every report of a fixed stream (a stopped trial's later reports judged again too), then a
    stream the original drives (a stopped trial ends after at most two more reports)."""
    new, old, objectives = CASES[case]
    trials = 80 if objectives == 2 else 400  # the original pareto-asha sorts its rung into fronts: O(n^2)
    stream = report_stream(seed, trials, epochs=30, objectives=objectives)
    assert len(stream) > 1500
    assert any(epoch <= last for (_, epoch, _), last in _previous_epochs(stream))  # repeats, re-runs
    assert any(epoch > last + 1 for (_, epoch, _), last in _previous_epochs(stream))  # rungs skipped
    ours, theirs = new(), old()
    expected = decisions(theirs, stream)
    assert decisions(ours, stream) == expected
    assert sum(expected) > 100 and len(expected) - sum(expected) > 100  # decisions both ways
    _assert_same_state(ours, theirs)

    ours, theirs, asked = new(), old(), []

    def decide(*report) -> bool:
        asked.append((report, theirs.report(*report)))
        return asked[-1][1]

    stream = report_stream(seed + 10, trials, epochs=30, objectives=objectives, decide=decide)
    assert len(stream) > len(asked) and sum(stop for _, stop in asked) > 10
    assert [ours.report(*report) for report, _ in asked] == [stop for _, stop in asked]
    _assert_same_state(ours, theirs)
    assert new().replay(stream) == old().replay(stream)


def _assert_same_state(ours: Stopper, theirs: Stopper) -> None:
    """The attributes other code may read hold the same: a rung's values, a trial's next rung."""
    if hasattr(theirs, "rungs"):
        assert _same(ours.rungs.values, theirs.rungs.values)
        assert ours.rungs.next_rung == theirs.rungs.next_rung and ours.rungs.last_epoch == theirs.rungs.last_epoch
    else:
        assert _same(ours.at_epoch, theirs.at_epoch)


@pytest.mark.parametrize("case", sorted(CASES))
def test_replay_and_resume_give_the_same_decisions(case):
    """replay() of a journal (a trial's reports after its stop skipped) returns the same trials,
    and the reports after the resume are decided alike."""
    new, old, objectives = CASES[case]
    stream = report_stream(7, 80 if objectives == 2 else 200, epochs=30, objectives=objectives)
    journal, later = stream[: len(stream) * 2 // 3], stream[len(stream) * 2 // 3:]
    ours, theirs = new(), old()
    assert ours.replay(journal) == theirs.replay(journal)
    assert decisions(ours, later) == decisions(theirs, later)


def test_pareto_asha_of_three_objectives_decides_as_before():
    """Vectors of another length than two are sorted into fronts per decision, as before."""
    stream = [(t, e, (*v, float(t % 4))) for t, e, v in report_stream(3, 40, epochs=30, objectives=2)]
    ours, theirs = ParetoAshaStopper(1, 3), ReferenceParetoAshaStopper(1, 3)
    expected = decisions(theirs, stream)
    assert decisions(ours, stream) == expected and 0 < sum(expected) < len(expected)
    assert ours.layers and all(layers is None for layers in ours.layers)


def _previous_epochs(stream):
    """Each report with the epoch its trial reported last (0: none)."""
    last: dict[int, int] = {}
    for report in stream:
        yield report, last.get(report[0], 0)
        last[report[0]] = report[1]


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN, in the same order."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b or (math.isnan(a) and math.isnan(b))


def test_the_rules_on_hand_made_rungs():
    """Ties, a re-run's replaced value and a late first report, on values one can check by hand."""
    asha = AshaStopper(1, 2)
    assert not asha.report(0, 1, 0.5) and asha.report(1, 1, 0.5 + 1e-9)  # 2 values: only the best goes on
    assert not asha.report(2, 1, 0.5)  # a tie with the best: not worse than sorted[0]
    assert not asha.report(3, 4, 0.1)  # epoch 4 first: judged at rungs 1, 2 and 4 in turn
    assert asha.rungs.values == [{0: 0.5, 1: 0.5 + 1e-9, 2: 0.5, 3: 0.1}, {3: 0.1}, {3: 0.1}]
    assert asha.report(0, 1, 0.7)  # re-run of trial 0: its 0.5 at rung 0 is replaced
    assert list(asha.rungs.ordered[0]) == [0.1, 0.5, 0.5 + 1e-9, 0.7]
    median = MedianStopper(1, 2)
    for t, v in enumerate([0.2, math.nan, 0.4]):
        median.report(t, 1, v)
    assert not median.report(3, 1, 0.3)  # median of 0.2, 0.4 (the NaN left out) is 0.3: not worse
    assert median.report(3, 1, 0.35)  # the same epoch again: 0.3 replaced, judged against the same
    assert median.report(4, 1, 0.31) == (0.31 > statistics.median([0.2, 0.4, 0.35]))


def test_ordered_values_answer_as_a_sorted_list():
    rng = np.random.default_rng(3)
    ours, theirs = OrderedValues(load=4), []
    for step in range(6000):
        if theirs and rng.random() < 0.4:
            value = theirs[int(rng.integers(len(theirs)))]
            ours.remove(value)
            theirs.remove(value)
        else:
            value = float(rng.choice(TIES)) if rng.random() < 0.2 else float(rng.integers(-50, 50))
            ours.add(value)
            theirs.append(value)
        theirs.sort()
        probe = float(rng.integers(-52, 52)) / 1.0
        assert len(ours) == len(theirs) and ours.count_below(probe) == sum(v < probe for v in theirs)
        if theirs:
            k = int(rng.integers(len(theirs)))
            assert ours[k] == theirs[k] and ours[-1] == theirs[-1]
        if step % 500 == 0:
            assert list(ours) == theirs
    with pytest.raises(ValueError):
        ours.remove(1e9)
    with pytest.raises(IndexError):
        ours[len(theirs)]
    assert list(OrderedValues([3.0, 1.0, 2.0, 1.0], load=1)) == [1.0, 1.0, 2.0, 3.0]


def _brute_fronts(points: list[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    index = reference_front_index(points)
    return [sorted(p for p, f in zip(points, index) if f == k) for k in range(max(index, default=-1) + 1)]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_pareto_layers_stay_the_fronts_of_their_points(seed):
    """Random adds and removes on a small grid (many ties and equal points, infinities): after each
    the fronts are those of the original sorting, and an added point's front is its front there."""
    rng = np.random.default_rng(seed)
    grid = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, math.inf] if seed % 2 else [float(v) for v in range(25)]
    layers, points = ParetoLayers(), []
    for _ in range(300):
        if points and rng.random() < 0.35:
            point = points.pop(int(rng.integers(len(points))))
            layers.remove(point)
        else:
            point = (float(rng.choice(grid)), float(rng.choice(grid)))
            points.append(point)
            front = layers.add(point)
            brute = reference_front_index(points)
            assert front == brute[-1]
            assert layers.count_before(front) == sum(f < front for f in brute)
        assert [sorted(f) for f in layers.fronts()] == _brute_fronts(points) and len(layers) == len(points)
    with pytest.raises(ValueError):
        layers.remove((-1.0, -1.0))


@pytest.mark.parametrize("dims", [2, 3])
def test_front_index_is_the_original_sorting(dims):
    rng = np.random.default_rng(dims)
    for n in (0, 1, 5, 60, 300):
        values = [tuple(float(v) for v in rng.integers(0, 12, dims)) for _ in range(n)]
        assert front_index(values) == reference_front_index(values)
    with_nan = [(1.0, math.nan), (0.0, 1.0), (2.0, 2.0), (math.nan, 0.0)]
    assert front_index(with_nan) == reference_front_index(with_nan)
