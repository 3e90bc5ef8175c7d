"""Kura: a keyword-RAG server (daemon, CLI, HTTP API, MCP) on MemStrata's store.

Compatible with the Kura tool's home layout, commands and API (see
docs/kura.md).  Modules: :mod:`.registry` (home folder, db.json, config),
:mod:`.schema` and :mod:`.store` (a database file: its migration chain, its
reads and writes), :mod:`.chunking` (which files, cut how),
:mod:`.indexing` (folder -> chunks in the store), :mod:`.library` (the open
databases), :mod:`.search` (validation and result shapes), :mod:`.mcp`
(the MCP server), :mod:`.api` (HTTP app), :mod:`.daemon` (lifecycle), :mod:`.cli`.
"""
