# SPDX-License-Identifier: GPL-2.0-or-later
"""Order statistics over the repetitions of one sweep point.

Medians and quartiles rather than means: on shared and emulated machines a
repetition is sometimes disturbed by something else, and one such outlier
must not move the figure that is compared.
"""

import math


def quantile(values, q):
    """The q-quantile (0..1) with linear interpolation between order
    statistics (Hyndman & Fan type 7, the default of R and numpy)."""
    if not values:
        raise ValueError("quantile of no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary(values):
    """n, median, q1, q3, iqr, min, max, mean of VALUES (None if empty)."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    q1 = quantile(values, 0.25)
    q3 = quantile(values, 0.75)
    return {
        "n": len(values),
        "median": quantile(values, 0.5),
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "min": min(values),
        "max": max(values),
        "mean": sum(values) / len(values),
    }


def change_percent(value, baseline):
    """VALUE relative to BASELINE in percent; None when there is no
    baseline to compare with (missing or zero)."""
    if value is None or baseline is None or baseline == 0:
        return None
    return (value - baseline) / abs(baseline) * 100.0


def ratio(value, baseline):
    if value is None or baseline is None or baseline == 0:
        return None
    return value / baseline
