"""The changes an administrator makes to organizations kept in the database: create, change, delete.

As for keys (``keys.py``): built from the view's record, written through the
control plane over the version they were made from (409 when someone else
changed it meanwhile), applied here at once and on every worker within the
poll. An id is the config's (``organizations[]``, read-only here) or the
database's, never both. An organization that database keys still name is
not deleted (its budget would silently stop counting for them).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import attrs

from switchyard.actors.control.keys import BOOTSTRAP, Actor, replaced
from switchyard.actors.control.plane import ControlPlane
from switchyard.actors.control.records import OrgRecord
from switchyard.actors.control.shown import org_facts
from switchyard.actors.control.store import ControlConflict
from switchyard.actors.errors import KeyConflict, RouteNotFound
from switchyard.config.key_body import ORG_FIELDS
from switchyard.config.limits import Organization


def org_not_found(org_id: str) -> RouteNotFound:
    return RouteNotFound(f"No organization with id '{org_id}'", code="organization_not_found")


class OrgChanges:
    def __init__(self, plane: ControlPlane, config_ids: Callable[[], frozenset[str]], *,
                 clock: Callable[[], float], actor: Actor = BOOTSTRAP) -> None:
        self.plane = plane
        self.actor = actor
        self._config_ids = config_ids
        self._clock = clock

    def record(self, org_id: str) -> OrgRecord:
        found = self.plane.view.organizations.get(org_id)
        if found is None:
            raise org_not_found(org_id)
        return found

    async def create(self, org_id: str, values: Mapping[str, Any], created_by: str | None) -> OrgRecord:
        store = self.plane.writable()
        if org_id in self._config_ids():
            raise KeyConflict(f"The id '{org_id}' is an organization of the config; choose another", param="body.id")
        now = self._clock()
        org = Organization(id=org_id, budget=values.get("budget"), rate_limit=values.get("rate_limit"),
                           allowed_mcp_servers=values.get("allowed_mcp_servers"),
                           allowed_mcp_tools=values.get("allowed_mcp_tools"))
        record = OrgRecord(org, now, now, created_by, dict(values.get("metadata") or {}))
        try:
            await self.plane.change(store.insert_organization, record, audit=self.actor.entry(
                now, "organization.create", "organization", org_id, None, org_facts(record)))
        except ControlConflict:
            raise KeyConflict(f"An organization with the id '{org_id}' exists", param="body.id") from None
        return record

    async def update(self, org_id: str, changes: Mapping[str, Any]) -> OrgRecord:
        store = self.plane.writable()
        old = self.record(org_id)
        org = attrs.evolve(old.organization, **{n: v for n, v in changes.items() if n in ORG_FIELDS})
        new = attrs.evolve(old, organization=org)
        if "metadata" in changes:
            new = attrs.evolve(new, metadata=dict(changes["metadata"] or {}))
        return await replaced(self.plane, store.replace_organization, old, new, self._clock(), "organization",
                              org_not_found, lambda written: self.actor.entry(
                                  written.updated_at, "organization.update", "organization", org_id,
                                  org_facts(old), org_facts(written)))

    async def delete(self, org_id: str) -> None:
        store = self.plane.writable()
        old = self.record(org_id)
        named = sorted(r.id for r in self.plane.view.records.values() if r.key.organization_id == org_id)
        if named:
            shown = ", ".join(named[:5]) + (f" and {len(named) - 5} more" if len(named) > 5 else "")
            raise KeyConflict(f"The organization '{org_id}' still has keys ({shown}); move or delete them first",
                              param="id")
        audit = self.actor.entry(self._clock(), "organization.delete", "organization", org_id, org_facts(old), None)
        if not await self.plane.change(store.delete_organization, org_id, audit=audit):
            raise org_not_found(org_id)
