"""Client rate limits and budgets, enforced before a call is dispatched.

The call path speaks to ``actors/ports.py``'s ``Limiter`` (admit, settle,
key_view) in the messages of ``tickets``; ``local`` keeps the counters in this worker's
memory (exact within one worker) and decides with the pure core in
``actors/routing/limits.py``. The Redis limiter that shares them across a
fleet lives below the wire, in ``protocol/stores/redis_limits.py``.
"""
