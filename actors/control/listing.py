"""Which keys a reader sees: the config's in config order, then the database's by id; one found by its id.

Shared by the admin API (``GET /admin/keys``, ``GET /admin/keys/{id}``) and
``switchyard keys list|show``, so both list the same keys in the same order
and filter them by the same rules.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from switchyard.actors.control.keys import not_found
from switchyard.actors.control.records import KeyRecord
from switchyard.actors.control.shown import status_of
from switchyard.config.access import ApiKey

SOURCES = ("config", "database")

# (order: (0, id) for a config key, (1, id) for a database key), the key, its record (None: a config key)
Row = tuple[tuple[int, str], ApiKey, KeyRecord | None]


def find(config_keys: Iterable[ApiKey], records: Mapping[str, KeyRecord], key_id: str
         ) -> tuple[ApiKey, KeyRecord | None]:
    """The key with this id and its record (None for a config key); ``key_not_found`` when there is none."""
    for key in config_keys:
        if key.id == key_id:
            return key, None
    record = records.get(key_id)
    if record is None:
        raise not_found(key_id)
    return record.key, record


def rows(config_keys: Iterable[ApiKey], records: Mapping[str, KeyRecord], source: str | None) -> list[Row]:
    """Every key of ``source`` (None: both): config keys as the file lists them, then database keys by id."""
    out: list[Row] = []
    if source in (None, "config"):
        out += [((0, k.id), k, None) for k in config_keys]
    if source in (None, "database"):
        out += [((1, key_id), records[key_id].key, records[key_id]) for key_id in sorted(records)]
    return out


def matches(row: Row, organization_id: str | None, status: str | None, now: float) -> bool:
    """The row passes the filters given (None: any); a config key is always ``active``."""
    _, key, record = row
    if organization_id is not None and key.organization_id != organization_id:
        return False
    return status is None or (status_of(record, now) if record is not None else "active") == status
