"""The web-search providers' clients (the actors' ``SearchApi``, ``actors/search/hits.py``): SearXNG's JSON
API, Brave Search and Tavily, over the gateway's shared HTTP client; the ``simulated`` provider answers from
``protocol/simulated/search.py``."""
