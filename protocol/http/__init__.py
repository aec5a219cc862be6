"""HTTP plumbing every door and the admin API share: ASGI answers and bodies, client JSON, API-key auth,
trace context from headers, the built-in model-list limits and client addresses, log lines."""
