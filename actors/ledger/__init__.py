"""The usage ledger: one record per call (and per classifier try), with its cost, kept in a store.

``record`` is the row and the query; ``pricing`` prices a call's usage; the
``LedgerActor`` takes records off the request path, writes them in batches,
spills them to a local file while the store is away and replays them after.
The stores themselves (SQLite, PostgreSQL, memory) sit behind
``actors.ports.UsageStore`` and are chosen at start by the serving layer.
"""
