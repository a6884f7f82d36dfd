"""Non-dominated sorting of a changing set of points of two objectives, kept up to date point by
point: what lets pareto-asha judge a trial without sorting its whole rung into fronts (issue #45).

A front (layer) is a staircase: no point of it dominates another, so sorted by the first objective
``x`` ascending its second ``y`` descends (points with the same ``x`` are equal, side by side).
Front ``k`` holds the points whose longest chain of dominating points has length ``k``: the fronts
that peeling off the non-dominated points again and again gives. Facts the updates rest on:

- the front a point belongs on is one past the last front holding a point that dominates it, and
  the fronts holding such a point are a prefix (a dominator on front k has one on front k - 1):
  a binary search over the fronts, one bisection each;
- adding a point moves each other point down one front or not at all, removing one moves each up
  one or not at all; the points that move off one front are a contiguous run of it, and they move
  off the next front exactly the run they dominate there (adding) or leave uncovered (removing):
  two bisections and a splice per front, until a front has nothing to move;
- a point's arrival moves no point on an earlier front than its own.

A change costs O(log n) per front it reaches; the fronts below the first unchanged one are not
looked at, and a run that covers a whole front shifts all later fronts by one list insertion.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Iterable, Sequence

__all__ = ["ParetoLayers", "front_index_2d"]

Point = tuple[float, float]


class ParetoLayers:
    """Points ``(x, y)``, both minimised, no NaN (infinities are fine), sorted into Pareto fronts.
    :meth:`add` returns the front a new point lands on, :meth:`count_before` how many points lie
    on earlier fronts, :meth:`remove` takes one point out; the fronts stay exact after each."""

    def __init__(self, points: Iterable[Point] = ()) -> None:
        self._xs: list[list[float]] = []  # front -> its points' x, ascending
        self._negys: list[list[float]] = []  # front -> its points' -y, ascending (y descending)
        self._len = 0
        for point in sorted(points):  # in this order a point never dominates one added before it
            self.add(point)

    def __len__(self) -> int:
        return self._len

    def fronts(self) -> list[list[Point]]:
        """The fronts, first first, each sorted by ``x``."""
        return [[(x, -ny) for x, ny in zip(xs, negys)] for xs, negys in zip(self._xs, self._negys)]

    def front_of(self, point: Point) -> int:
        """The front ``point`` is on, or would land on if added (0: nothing dominates it)."""
        low, high = 0, len(self._xs)
        while low < high:
            mid = (low + high) // 2
            if self._dominated_on(mid, point):
                low = mid + 1
            else:
                high = mid
        return low

    def count_before(self, front: int) -> int:
        """How many points lie on the fronts before ``front``."""
        return sum(map(len, self._xs[:front]))

    def add(self, point: Point) -> int:
        """Add ``point``; returns its front. The points it dominates move down a front, and so on."""
        x, y = point
        front = self.front_of(point)
        self._len += 1
        if front == len(self._xs):
            self._xs.append([x])
            self._negys.append([-y])
            return front
        xs, negys = self._xs[front], self._negys[front]
        start = bisect_left(xs, x)
        if start < len(xs) and xs[start] == x and negys[start] == -y:
            start = bisect_right(xs, x)  # points equal to it stay beside it
        end = bisect_right(negys, -y)  # [start, end): x and y no better than its, not equal to it
        self._push_down(front, [x], [-y], start, end)
        return front

    def remove(self, point: Point) -> None:
        """Remove one point equal to ``point`` (ValueError when there is none); the points only it
        dominated on the next front move up, and so on."""
        x, y = point
        front = self.front_of(point)
        xs = self._xs[front] if front < len(self._xs) else []
        i = bisect_left(xs, x)
        if not (i < len(xs) and xs[i] == x and self._negys[front][i] == -y):
            raise ValueError(f"ParetoLayers.remove: {point!r} is not there")
        del xs[i]
        del self._negys[front][i]
        self._len -= 1
        if i < len(xs) and xs[i] == x:  # an equal point stays: it dominates what this one did
            return
        self._pull_up(front, i)

    def _dominated_on(self, front: int, point: Point) -> bool:
        """Whether a point of ``front`` dominates ``point``: of its points with ``x`` no larger,
        the last has the smallest ``y``."""
        x, y = point
        xs = self._xs[front]
        i = bisect_right(xs, x) - 1
        if i < 0:
            return False
        y_there = -self._negys[front][i]
        return y_there < y or (y_there == y and xs[i] < x)

    def _push_down(self, front: int, run_xs: list[float], run_negys: list[float], start: int, end: int) -> None:
        """Put the run (a staircase) on ``front``, where it dominates ``[start, end)``; what it
        dominates goes down to the next front, where it dominates a run found the same way."""
        while True:
            xs, negys = self._xs[front], self._negys[front]
            if start >= end:  # it dominates nothing there: it joins the front
                xs[start:start] = run_xs
                negys[start:start] = run_negys
                return
            if start == 0 and end == len(xs):  # it dominates the whole front, so every later one
                self._xs.insert(front, run_xs)
                self._negys.insert(front, run_negys)
                return
            moved_xs, moved_negys = xs[start:end], negys[start:end]
            xs[start:end], negys[start:end] = run_xs, run_negys
            run_xs, run_negys = moved_xs, moved_negys
            front += 1
            if front == len(self._xs):
                self._xs.append(run_xs)
                self._negys.append(run_negys)
                return
            # on the next front: x no smaller than the run's first, y no smaller than its last
            start = bisect_left(self._xs[front], run_xs[0])
            end = bisect_right(self._negys[front], run_negys[-1])

    def _pull_up(self, front: int, gap: int) -> None:
        """Points left ``front`` before index ``gap``: the points of the next front that no point
        left on ``front`` dominates (x before the gap's right neighbour's, y below its left one's)
        move up into the gap, and so on."""
        while True:
            xs, negys = self._xs[front], self._negys[front]
            if not xs:  # the front is gone: every later front moves up one
                del self._xs[front]
                del self._negys[front]
                return
            if front + 1 == len(self._xs):
                return
            next_xs, next_negys = self._xs[front + 1], self._negys[front + 1]
            first = bisect_right(next_negys, negys[gap - 1]) if gap > 0 else 0
            last = bisect_left(next_xs, xs[gap]) if gap < len(xs) else len(next_xs)
            if first >= last:
                return
            xs[gap:gap] = next_xs[first:last]
            negys[gap:gap] = next_negys[first:last]
            del next_xs[first:last]
            del next_negys[first:last]
            front, gap = front + 1, first


def front_index_2d(points: Sequence[Sequence[float]]) -> list[int]:
    """The front of each point of two objectives (no NaN): 0 for the Pareto front, 1 for the front
    once it is removed, ... In O(n log^2 n): the points are added in ascending order, so none moves."""
    layers, index = ParetoLayers(), [0] * len(points)
    for i in sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1])):
        index[i] = layers.add((points[i][0], points[i][1]))
    return index
