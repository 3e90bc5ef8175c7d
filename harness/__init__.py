"""The ``memstrata`` CLI and the HTTP harness (proxy, status, metrics, MCP mount)."""
