"""The gateway: one tool registry driving MCP, the CLI and m3_call."""
