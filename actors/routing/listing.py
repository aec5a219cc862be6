"""What the model-list routes show: each listed model with its resolved metadata.

Pure (no clock, no I/O): ``list_models`` takes the Snapshot and the discovery
view and returns one ``ListedModel`` per id that ``listed_models`` offers
(public backends' exact models, discovered ids their globs admit, every
discovered id of a backend that lists none), in id order.

A listed id gets metadata when name resolution (``config/names.py``) finds a
catalogue entry for it. The catalogue it is resolved against holds, first,
the ``model_configs`` entries (id and aliases) of the backends that serve
that id, in config order, then the merged metadata-file entries; earlier
entries win ties, so a backend's own definition beats the files. A backend's
``model_configs`` never lends metadata to an id that backend does not serve.

The metadata shown is the entry's file layers with, on top, the
``model_configs`` layer of the first serving backend (config order) that
defines the resolved id (``Snapshot.model_entry``). When that id exists only
in ``model_configs``, the file entry it resolves to is the base underneath.

Backend aliases: an exact alias in an enabled backend's ``model_configs`` is
listed as a row of its own while alias dispatch would route it
(``aliases.dispatch_target`` returns its canonical id), with the canonical
row's backends and metadata and ``alias_of`` set. Metadata-file aliases are
never listed.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from attrs import frozen

from switchyard.actors.routing.aliases import dispatch_target
from switchyard.actors.routing.candidates import Discovered, listed_models, serving
from switchyard.config.metadata import CatalogueEntry, Source, with_backend_layer
from switchyard.config.names import Catalogue, Entry, Resolution, Stage, resolve
from switchyard.config.schema import BackendConfig, Snapshot


@frozen
class ListedModel:
    """One row of the model list.

    ``entry`` is the merged metadata (None when nothing resolved);
    ``backend_layer`` names the backend whose ``model_configs`` layer is in it;
    ``alias_of`` is the canonical id of a listed backend alias.
    """

    id: str
    backends: tuple[str, ...]
    resolution: Resolution | None = None
    entry: CatalogueEntry | None = None
    backend_layer: str | None = None
    alias_of: str | None = None


def catalogue_for(snapshot: Snapshot, backends: Sequence[BackendConfig]) -> Catalogue:
    """``backends``' model_configs entries (in that order), then the metadata-file entries."""
    entries: list[Entry] = []
    for b in backends:
        for model_id in b.model_metadata:
            if "*" in model_id:       # an id with '*' is not a catalogue id (names.Entry refuses it)
                continue
            entries.append(Entry(model_id, b.model_aliases.get(model_id, ())))
    entries += [Entry(e.id, e.aliases) for e in snapshot.models.entries.values()]
    return Catalogue(tuple(entries))


def describe(model_id: str, backends: Sequence[str], snapshot: Snapshot,
             catalogue: Catalogue | None = None) -> ListedModel:
    """One listed id served by ``backends`` (names), with what resolution finds for it."""
    configs = [b for name in backends if (b := snapshot.backend(name)) is not None]
    if catalogue is None:
        catalogue = catalogue_for(snapshot, configs)
    found = resolve(model_id, catalogue)
    if found is None:
        return ListedModel(model_id, tuple(backends))
    layer = next((b for b in configs if found.entry_id in b.model_metadata), None)
    entry = _merged(snapshot, found.entry_id, layer)
    if entry is None:   # cannot happen: the id came from the files or from `layer`; stay safe
        return ListedModel(model_id, tuple(backends))
    return ListedModel(model_id, tuple(backends), found, entry, layer.name if layer is not None else None)


def _merged(snapshot: Snapshot, entry_id: str, layer: BackendConfig | None) -> CatalogueEntry | None:
    """``entry_id``'s metadata with ``layer``'s model_configs on top.

    A backend-only id (no file entry of that id, e.g. ``unsloth/Qwen3.6-35B-A3B-GGUF``)
    takes as its base the file entry that id resolves to, so a ``model_configs`` entry that
    only overrides ``max_output`` keeps the files' display name and pricing.
    """
    if layer is None or snapshot.models.get(entry_id) is not None:
        return snapshot.model_entry(entry_id, layer.name if layer is not None else None)
    files = Catalogue(tuple(Entry(e.id, e.aliases) for e in snapshot.models.entries.values()))
    base = resolve(entry_id, files)
    if base is None:
        return snapshot.model_entry(entry_id, layer.name)
    source = Source(f"backends[{snapshot.backends.index(layer)}].model_configs",
                    f"{snapshot.source} (backend {layer.name})")
    return with_backend_layer(snapshot.models.get(base.entry_id), entry_id, layer.model_metadata[entry_id], source)


def list_models(snapshot: Snapshot, discovered: Discovered) -> tuple[ListedModel, ...]:
    """Every listed model with its metadata, sorted by id."""
    listed = listed_models(snapshot.backends, discovered)
    # Models served by the same backends share one catalogue; most lists have few such sets.
    catalogues: dict[tuple[str, ...], Catalogue] = {}
    out: list[ListedModel] = []
    for model_id, names in listed.items():
        key = tuple(names)
        catalogue = catalogues.get(key)
        if catalogue is None:
            configs = [b for n in key if (b := snapshot.backend(n)) is not None]
            catalogue = catalogues[key] = catalogue_for(snapshot, configs)
        out.append(describe(model_id, key, snapshot, catalogue))
    out += backend_aliases(snapshot, discovered, {m.id: m for m in out})
    return tuple(sorted(out, key=lambda m: m.id))


def backend_aliases(snapshot: Snapshot, discovered: Discovered,
                    listed: Mapping[str, ListedModel]) -> list[ListedModel]:
    """Rows for the enabled backends' ``model_configs`` aliases that dispatch to their canonical id now."""
    out: dict[str, ListedModel] = {}
    for b in snapshot.backends:
        if not b.enabled:
            continue
        for canonical, aliases in b.model_aliases.items():
            for alias in aliases:
                if "*" in alias or alias in listed or alias in out:
                    continue
                if dispatch_target(alias, snapshot, discovered) != canonical:
                    continue
                base = listed.get(canonical)
                if base is None:   # servable (a discovery-off glob) but not itself listed
                    names = [s.name for s in serving(snapshot.backends, canonical, discovered)]
                    if not names:
                        continue
                    base = describe(canonical, names, snapshot)
                resolution = Resolution(canonical, Stage.EXACT_ALIAS, alias, (alias,))
                out[alias] = ListedModel(alias, base.backends, resolution, base.entry, base.backend_layer,
                                         alias_of=canonical)
    return list(out.values())


def find(listing: Sequence[ListedModel], model_id: str) -> ListedModel | None:
    """The listed model whose id is exactly ``model_id`` (case-sensitive, as OpenAI's retrieve)."""
    for m in listing:
        if m.id == model_id:
            return m
    return None
