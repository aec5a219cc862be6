"""The engines' KV-cache event sources: vLLM's ZMQ publisher and the spec's SSE streams, read into the index."""
