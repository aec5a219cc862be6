"""Running the gateway: the ASGI app and its route table, the Runtime's assembly (``wiring``), metrics
exposition, worker processes and the CLI. The top of the protocol layer: nothing imports it back."""
