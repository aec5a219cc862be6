"""In-process simulated backends (an OpenAI-compatible server and a native Anthropic one) for the demo and
the tests: httpx transports, so a call runs unchanged under Trio's MockClock with no sockets."""
