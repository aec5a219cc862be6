"""ModelDiscovery: asks each backend for its model list, at start and on an interval.

Publishes ``view``: backend name -> frozenset of discovered ids. A failed
fetch keeps the previous ids (a flapping backend should not make its models
vanish from routing); the health actor is the one that takes it out.

A backend's ``upstream_id`` (``model_configs[].upstream_id``) is the wire
name only: a discovered id equal to one is published as its public id, so
routing and the model list see the public name and never the upstream one.

Once a round has answered, a fallback chain entry no backend serves is
warned about (once per entry and config revision): with discovery on, the
loader cannot know (``config/load_resilience.py``: ``check_chain_models``).
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Iterable, Mapping

import httpx
import trio

from switchyard.actors.addressing import auth_headers, join_url
from switchyard.actors.ports import Upstream
from switchyard.actors.routing.candidates import unserved_chain_entries
from switchyard.config.kinds import kind_of
from switchyard.config.kinds.base import ListShape
from switchyard.config.load_resilience import chains_checked_at_load
from switchyard.config.rules import child
from switchyard.config.schema import BackendConfig, Snapshot

log = logging.getLogger("switchyard.discovery")


GOOGLE_PAGES = 20   # pages of 1,000 read of a Google-shaped list (a gemini backend's), at most


async def openai_ids(upstream: Upstream, backend: BackendConfig, path: str) -> list[str]:
    """``GET {path}`` in OpenAI's shape (``{"data": [{"id": ...}]}``): one page."""
    response = await upstream.client.get(join_url(backend.url, path), headers=auth_headers(backend))
    response.raise_for_status()
    data = response.json().get("data", [])
    return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]


async def google_ids(upstream: Upstream, backend: BackendConfig, path: str) -> list[str]:
    """``GET {path}`` in Google's shape (``{"models": [{"name": "models/ID"}], "nextPageToken"}``),
    every page, the ids without their ``models/`` prefix."""
    ids: list[str] = []
    params = {"pageSize": "1000"}
    for _ in range(GOOGLE_PAGES):
        response = await upstream.client.get(join_url(backend.url, path), params=params,
                                             headers=auth_headers(backend))
        response.raise_for_status()
        body = response.json()
        for m in body.get("models") or []:
            name = m.get("name") if isinstance(m, dict) else None
            if isinstance(name, str) and name:
                ids.append(name.removeprefix("models/"))
        token = body.get("nextPageToken")
        if not isinstance(token, str) or not token:
            return ids
        params = {"pageSize": "1000", "pageToken": token}
    raise ValueError(f"the model list has more than {GOOGLE_PAGES} pages")


# The reader of each model-list shape a kind declares (config/kinds: Kind.model_list).
READERS: Mapping[ListShape, Callable[[Upstream, BackendConfig, str], Awaitable[list[str]]]] = {
    ListShape.OPENAI: openai_ids,
    ListShape.GOOGLE: google_ids,
}


def public_ids(backend: BackendConfig, ids: Iterable[str]) -> frozenset[str]:
    """Discovered ids as routing names: each upstream id of ``backend`` becomes its public id."""
    if not backend.upstream_ids:
        return frozenset(ids)
    public = {wire: model for model, wire in backend.upstream_ids.items()}
    return frozenset(public.get(i, i) for i in ids)


def asked(backend: BackendConfig) -> bool:
    """Whether ``backend`` is asked for its models: enabled, with discovery on and a kind that lists them."""
    return backend.enabled and backend.discovery and kind_of(backend).model_list is not None


class ModelDiscoveryActor:
    name = "discovery"

    def __init__(self, snapshot: Snapshot, upstream: Upstream) -> None:
        self.snapshot = snapshot
        self.upstream = upstream
        self.view: Mapping[str, frozenset[str]] = {}
        self.targets = [b for b in snapshot.backends if asked(b)]
        self._warned: tuple[str, set[str]] = (snapshot.revision, set())   # revision, chain entries warned about

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        # The first round completes (bounded by the check timeout) before the
        # server reports ready, so glob-routed models are servable at once.
        await self.refresh_all()
        self.check_chains()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery  # where reconfigure() starts fetches for new backends
            task_status.started(self)
            while True:
                await trio.sleep(self.snapshot.discovery.interval)
                await self.refresh_all()
                self.check_chains()

    def reconfigure(self, snapshot: Snapshot) -> None:
        """New or changed backends are asked for their models at once; removed ones are dropped."""
        old = {b.name: (b.url, b.api_key, dict(b.upstream_ids)) for b in self.targets}
        self.snapshot = snapshot
        self.targets = [b for b in snapshot.backends if asked(b)]
        names = {b.name for b in self.targets}
        self.view = {n: ids for n, ids in self.view.items() if n in names}
        nursery = getattr(self, "_nursery", None)
        changed = [b for b in self.targets if old.get(b.name) != (b.url, b.api_key, dict(b.upstream_ids))]
        for b in changed:
            self.view = {n: ids for n, ids in self.view.items() if n != b.name}
        if nursery is not None:
            nursery.start_soon(self._reload_round, changed)

    async def _reload_round(self, changed: list[BackendConfig]) -> None:
        """The changed backends' lists, then the chain check for the new revision."""
        async with trio.open_nursery() as nursery:
            for b in changed:
                nursery.start_soon(self._refresh, b)
        self.check_chains()

    def check_chains(self) -> list[str]:
        """Log each chain entry no backend serves, once per config revision (not every round); the warnings
        logged now (a reload shows them in its answer)."""
        snapshot = self.snapshot
        if chains_checked_at_load(snapshot.backends):
            return []   # the loader warned already
        if self._warned[0] != snapshot.revision:
            self._warned = (snapshot.revision, set())
        warned = self._warned[1]
        out = []
        for chain, i, model in unserved_chain_entries(snapshot.fallback.fallback_chains, snapshot.backends,
                                                      self.view):
            path = child(child("fallback.fallback_chains", chain), i)
            if path not in warned:
                warned.add(path)
                out.append(f"{path}: after discovery no backend serves model {model!r}: this step of the chain "
                           f"never finds a backend")
                log.warning("config: %s", out[-1])
        return out

    async def refresh_all(self) -> None:
        async with trio.open_nursery() as nursery:
            for b in self.targets:
                nursery.start_soon(self._refresh, b)

    async def _refresh(self, backend: BackendConfig) -> None:
        timeout = self.snapshot.health_checks.timeout
        ids: frozenset[str] | None = None
        with trio.move_on_after(timeout):
            try:
                listing = kind_of(backend).model_list
                assert listing is not None   # asked(backend)
                ids = public_ids(backend, await READERS[listing.shape](self.upstream, backend, listing.path))
            except (httpx.HTTPError, ValueError, AttributeError, TypeError) as exc:
                log.warning("model discovery on %s failed: %s", backend.name, exc)
            except Exception as exc:   # inside the backend's adapter: its failed round, never the actor's crash
                log.error("model discovery on %s failed inside its adapter (%s)", backend.name,
                          type(exc).__name__, exc_info=exc)
        if ids is None:
            return
        if ids != self.view.get(backend.name):
            log.info("backend %s offers %d model(s)", backend.name, len(ids))
            self.view = {**self.view, backend.name: ids}
