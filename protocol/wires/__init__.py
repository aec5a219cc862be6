"""The way out to backends: the shared upstream client and its pooled transport (the actors'
``ports.Upstream``), the mapping of transport failures into the error taxonomy, and one module per
backend kind that speaks something other than OpenAI's wire (Anthropic Messages, the Responses bridge)."""
