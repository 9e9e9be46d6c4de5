"""MCP servers the operator allows (`--mcp-config`), and the server's client for them."""
