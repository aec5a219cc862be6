"""Tool calls to the MCP servers behind the gateway: who may make them, and what each leaves behind."""
