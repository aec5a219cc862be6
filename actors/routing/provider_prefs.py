"""What a client asked of routing in its ``provider`` object, as a value (parsed by ``actors/provider_prefs.py``)."""

from __future__ import annotations

from attrs import frozen


@frozen
class MaxPrice:
    """Ceilings in USD per million tokens; None: no ceiling on that side."""

    prompt: float | None = None
    completion: float | None = None

    @property
    def empty(self) -> bool:
        return self.prompt is None and self.completion is None


@frozen
class ProviderPrefs:
    """What the client asked of routing. Names are backend names, compared exactly.

    ``only`` is None when absent; an empty list is an allowlist of nothing
    (every candidate is filtered out), never "no restriction".
    """

    order: tuple[str, ...] = ()
    only: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    sort: str | None = None
    max_price: MaxPrice | None = None

    @property
    def filters(self) -> bool:
        """True when a hard filter (only / ignore / max_price) is stated."""
        return self.only is not None or bool(self.ignore) or (self.max_price is not None
                                                               and not self.max_price.empty)

    @property
    def ranks(self) -> bool:
        """True when a soft rank (order / sort) is stated."""
        return bool(self.order) or self.sort is not None

    @property
    def empty(self) -> bool:
        """Nothing that changes routing: such a request may coalesce like one without the object."""
        return not self.filters and not self.ranks


NO_PREFERENCES = ProviderPrefs()
