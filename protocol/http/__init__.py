"""HTTP plumbing every door and the admin API share: the gate every door passes (the request's identity,
admission, the count of what is in), ASGI answers and bodies, client JSON, API-key auth, trace context from
headers, the built-in model-list limits and client addresses, refusal records, log lines."""
