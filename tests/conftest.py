"""Settings for the whole suite.

Property tests run on shared 2-core CI machines: a first draw that happens
to be slow (imports, a busy neighbour) must not fail a run, and a deadline
per example measures the machine, not the code. The properties themselves
are unchanged.
"""

from hypothesis import HealthCheck, settings

settings.register_profile("switchyard", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("switchyard")
