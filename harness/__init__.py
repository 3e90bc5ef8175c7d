"""The ``memstrata`` CLI, its resident query process and the HTTP harness (proxy, status,
metrics, dashboard, MCP mount)."""
