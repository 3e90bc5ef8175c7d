"""The ``strata`` command: a Strata-compatible MCP server on MemStrata's store."""
