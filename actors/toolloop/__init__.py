"""The gateway's tool loop: model rounds and the tools the gateway runs between them (``:online``, MCP)."""
