"""The gateway's side of the MCP servers behind it: one client session per server per worker."""
