"""The response cache (``response_cache``): key, store, stored form, and its stage in the pipeline."""
