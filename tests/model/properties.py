"""The settings of the property-based tests of the pure modules (hypothesis).

No example database: the failing example is printed in the test's output (with the seed to
replay it), and nothing is written into the checkout. No per-example deadline and no "too slow"
health check: the tests run on shared, busy machines, and a time limit would fail them for the
machine's sake, not the code's.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

PROPERTIES = settings(database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
