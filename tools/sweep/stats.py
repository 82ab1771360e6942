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


def median(values):
    return quantile(values, 0.5)


def bootstrap_median_diff(base, other, resamples=4000, confidence=0.95, seed=20):
    """Median of OTHER minus median of BASE, with a percentile bootstrap
    confidence interval of that difference (each sample resampled with
    replacement on its own, RESAMPLES times).  None when either side has
    fewer than 2 values.  Seeded: a report remade from the same raw
    results says the same."""
    import random

    base = [v for v in base if v is not None]
    other = [v for v in other if v is not None]
    if len(base) < 2 or len(other) < 2:
        return None
    rng = random.Random(seed)
    diffs, changes = [], []
    for _ in range(resamples):
        a = [base[rng.randrange(len(base))] for _ in base]
        b = [other[rng.randrange(len(other))] for _ in other]
        diffs.append(median(b) - median(a))
        # The change relative to each resample's own base: an interval of
        # the relative change, which cannot fall below -100 %.
        changes.append(None if median(a) == 0 else (median(b) / median(a) - 1) * 100)
    alpha = (1 - confidence) / 2
    out = {"diff": median(other) - median(base),
           "lo": quantile(diffs, alpha), "hi": quantile(diffs, 1 - alpha),
           "confidence": confidence, "change": None, "change_lo": None, "change_hi": None}
    if median(base) != 0 and None not in changes:
        out.update(change=(median(other) / median(base) - 1) * 100,
                   change_lo=quantile(changes, alpha), change_hi=quantile(changes, 1 - alpha))
    return out


def verdict(ci):
    """'no difference shown' when the interval includes 0: the relative
    change's when there is one (the interval a report shows), else the
    difference's."""
    if ci is None:
        return "too few runs"
    lo, hi = (ci["change_lo"], ci["change_hi"]) if ci.get("change_lo") is not None else (ci["lo"], ci["hi"])
    if lo <= 0 <= hi:
        return "no difference shown"
    return "higher" if lo > 0 else "lower"


def change_interval(ci, base_median):
    """(change, lo, hi) in percent of a bootstrap_median_diff() result: the
    bootstrapped relative change, or, when a resampled base median is 0,
    the difference over BASE_MEDIAN (None where that is 0 too)."""
    if ci.get("change_lo") is not None:
        return ci["change"], ci["change_lo"], ci["change_hi"]
    return tuple(change_percent(base_median + ci[k], base_median) for k in ("diff", "lo", "hi"))
