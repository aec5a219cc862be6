"""Client rate limits and budgets, enforced before a call is dispatched.

``port`` is the interface the call path speaks (``Limiter``: admit, settle,
key_view) and its messages; ``local`` keeps the counters in this worker's
memory (exact within one worker) and decides with the pure core in
``actors/routing/limits.py``. The Redis limiter that shares them across a
fleet lives below the wire, in ``protocol/stores/redis_limits.py``.
"""
