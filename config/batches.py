"""``batches``: the Files and Batch APIs (``/v1/files``, ``/v1/batches``), and how the gateway runs batches.

A batch whose lines all name one model served only by OpenAI or Azure
backends is relayed to the provider (``relay``); every other batch is run by
the gateway: its lines go through the normal routing, at most
``concurrency`` at a time per worker (the share of the worker's calls batch
work may hold, so interactive calls are never starved), under a lease in the
ledger's database that another worker or instance takes over when it lapses
(docs/batches.md).
"""

from __future__ import annotations

from attrs import frozen

from switchyard.config import rules
from switchyard.config.fields import field, load_section
from switchyard.config.rules import Reader, child

MiB = 1024 * 1024
DAY = 86_400.0


@frozen
class BatchesConfig:
    enabled: bool = field(True, rules.boolean)              # /v1/files and /v1/batches served
    relay: bool = field(True, rules.boolean)                # OpenAI and Azure backends run their batches
    concurrency: int = field(4, rules.integer(1, 10_000))   # a worker's batch lines in flight at once
    max_file_bytes: int = field(100 * MiB, rules.size(minimum=1024, maximum=1024 * MiB))   # an upload's bound
    max_lines: int = field(50_000, rules.integer(1, 1_000_000))   # requests in one input file
    # files up to this size are kept in the database; larger ones in `directory` (a fleet: a shared mount)
    inline_bytes: int = field(4 * MiB, rules.size(minimum=0, maximum=1024 * MiB), restart=True)
    directory: str = field("", rules.string(), restart=True)   # "": <server.data_dir>/files
    lease: float = field(30.0, rules.duration(minimum=1, maximum=3600))   # a running batch's lease
    poll_interval: float = field(1.0, rules.duration(minimum=0.01, maximum=60))   # how often work is looked for
    file_retention: float = field(30 * DAY, rules.duration(minimum=3600, maximum=3650 * DAY))   # output files


def _lease_past_poll(config: BatchesConfig, r: Reader) -> None:
    """A lease renewed every third of itself must outlast a poll, or a busy worker loses it between two."""
    if config.lease < 3 * config.poll_interval:
        r.problems.error(child(r.path, "lease"), f"must be at least three times batches.poll_interval "
                                                 f"({3 * config.poll_interval:g}s), got {config.lease:g}s")


def batches(r: Reader) -> BatchesConfig:
    return load_section(BatchesConfig, r, _lease_past_poll)
