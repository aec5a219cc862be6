"""Files and batches: the OpenAI Files and Batch APIs, relayed to OpenAI and Azure or run by the gateway."""
