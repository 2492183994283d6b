"""Did a timing run look contended or unstable? The numbers that say so, and the warning.

Split from :mod:`polydom.featurizers.timing` (which measures) so that judging measurements is a
job of its own; it reads them through their methods only.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from .errors import CostMeasurementWarning  # noqa: F401 - defined with the package's errors
__all__ = ["CostMeasurementWarning", "TimingCheck", "check_timing", "MIN_CPU_WALL_RATIO", "MAX_REPEAT_SPREAD",
           "MAX_OTHER_THREADS"]


#: `check_timing`'s defaults. Below this share of the wall time on a core, the timing thread
#: was kept waiting for long stretches (a quiet machine gives about 0.98).
MIN_CPU_WALL_RATIO = 0.8
#: Above this median relative interquartile range of the repeats of one call, the timings are
#: unstable (a quiet machine gives a few percent).
MAX_REPEAT_SPREAD = 0.25
#: Above this many cores' worth of CPU used by the process's other threads while timing, our
#: own work competed with the timed calls.
MAX_OTHER_THREADS = 0.1


@dataclass(frozen=True)
class TimingCheck:
    """Whether a timing run looked contended or unstable, with the numbers that say so.

    Attributes
    ----------
    cpu_wall_ratio : float
        Over every timed call: measured time over wall time (NaN without wall times).
    feature_cpu_wall : dict of str to float
        The same per feature.
    feature_spread : dict of str to float
        `CostSamples.repeat_spread` per feature.
    feature_cold_ratio : dict of str to float
        `CostSamples.cold_ratio` per feature: not a problem in itself, but what serving on this
        machine, with caches as cold as the timing's first calls, pays over the fitted cost.
    other_threads : float
        Cores' worth of CPU the process's other threads used while timing
        (``other_threads_seconds / elapsed``; NaN when the elapsed time is unknown).
    problems : tuple of str
        One sentence per threshold crossed, numbers included; empty when the run looked sound.
    """

    cpu_wall_ratio: float
    feature_cpu_wall: dict = field(default_factory=dict)
    feature_spread: dict = field(default_factory=dict)
    feature_cold_ratio: dict = field(default_factory=dict)
    other_threads: float = math.nan
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """No threshold was crossed."""
        return not self.problems

    def message(self) -> str:
        """The problems as one warning text (empty when there are none)."""
        if not self.problems:
            return ""
        return ("feature timings look contended or unstable: " + "; ".join(self.problems)
                + ". Costs are fitted on the timing thread's CPU time, which contention inflates far "
                "less than wall time, but they may still be off: time on a quiet machine to be sure")

    def warn(self, stacklevel: int = 1) -> None:
        """Issue `message` as a `CostMeasurementWarning` when there are problems; ``stacklevel``
        1 names the line calling this method, 2 the line calling that function, and so on."""
        if self.problems:
            warnings.warn(self.message(), CostMeasurementWarning, stacklevel=stacklevel + 1)


def check_timing(
    measurements: "CostMeasurements",  # noqa: F821 - read through its methods only
    *,
    min_cpu_wall_ratio: float = MIN_CPU_WALL_RATIO,
    max_repeat_spread: float = MAX_REPEAT_SPREAD,
    max_other_threads: float = MAX_OTHER_THREADS,
) -> TimingCheck:
    """Say whether ``measurements`` were taken on a contended or unstable machine.

    Three signs, each compared with its threshold:

    * CPU/wall below ``min_cpu_wall_ratio`` (over all calls, or for one feature): the timing
      thread waited for a core, so other work competed for the machine;
    * a feature's repeat spread above ``max_repeat_spread``: repeats of one call disagree;
    * other threads of this process using more than ``max_other_threads`` cores while timing.

    Parameters
    ----------
    measurements : CostMeasurements
    min_cpu_wall_ratio, max_repeat_spread, max_other_threads : float

    Returns
    -------
    TimingCheck
        Its ``problems`` name each feature and number that crossed a threshold.

    Examples
    --------
    >>> import numpy as np
    >>> sizes, items = np.array([64, 64, 256, 256]), np.zeros(4, dtype=np.int64)
    >>> cpu = np.full(4, 1e-3)
    >>> from polydom.featurizers.timing import CostMeasurements, CostSamples
    >>> busy = CostSamples(sizes, cpu, items, wall_seconds=2 * cpu)
    >>> check_timing(CostMeasurements({"hog": busy}, (8, 16), 2, 1)).problems
    ('CPU/wall 0.50 over all calls (below 0.8)', 'hog: CPU/wall 0.50')
    """
    ratios = {name: measurements[name].cpu_wall_ratio() for name in measurements.names}
    spreads = {name: measurements[name].repeat_spread() for name in measurements.names}
    cpu = sum(float(np.sum(measurements[name].seconds)) for name in measurements.names)
    walls = [measurements[name].wall_seconds for name in measurements.names]
    wall = sum(float(np.sum(w)) for w in walls if w is not None)
    overall = cpu / wall if wall > 0 and all(w is not None for w in walls) else math.nan
    elapsed = measurements.elapsed
    other = measurements.other_threads_seconds / elapsed if elapsed > 0 else math.nan

    problems = []
    if overall < min_cpu_wall_ratio:  # False for NaN: no wall times, nothing to say
        problems.append(f"CPU/wall {overall:.2f} over all calls (below {min_cpu_wall_ratio:g})")
    problems += [f"{name}: CPU/wall {r:.2f}" for name, r in ratios.items() if r < min_cpu_wall_ratio]
    problems += [f"{name}: repeats spread {s:.0%} (interquartile range over median; above "
                 f"{max_repeat_spread:.0%})" for name, s in spreads.items() if s > max_repeat_spread]
    if other > max_other_threads:
        problems.append(f"other threads of this process used {other:.2f} cores while timing "
                        f"(above {max_other_threads:g}): our own workers or a thread pool competed")
    colds = {name: measurements[name].cold_ratio() for name in measurements.names}
    return TimingCheck(overall, ratios, spreads, colds, other, tuple(problems))
