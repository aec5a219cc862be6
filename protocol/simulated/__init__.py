"""In-process simulated backends (an OpenAI-compatible server and a native Anthropic one) for the demo and
the tests: httpx transports, so a call runs unchanged under Trio's MockClock with no sockets; and the
``simulated`` web-search provider (``search.py``), which answers with no transport at all."""
