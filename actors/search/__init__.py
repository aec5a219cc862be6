"""The ``:online`` variant's web search: the tool the gateway offers, the searches it runs for the model,
what it feeds back and how the answer cites it (``loop.py`` drives the rounds; the rest is pure but the
search's own I/O, ``executor.py``, whose provider clients are below the wire, ``protocol/search/``)."""
