"""KV-cache-aware routing: what each engine's KV cache holds, fed by its events or the gateway's own record."""
