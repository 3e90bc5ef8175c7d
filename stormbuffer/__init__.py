"""Stormbuffer-compatible agent memory on MemStrata's store (``sbuf``, ``stormbuffer-mcp``).

Canonical Markdown records are the only source of truth; the SQLite
projection (:mod:`memstrata.stormbuffer.index_db`) is rebuilt from them
and synced before every read.  Modules: :mod:`.records` (model, validation),
:mod:`.codec` (the Markdown format), :mod:`.stores` (locations, ``init``),
:mod:`.locks` (locking; atomic writes are ``storage/files.py``'s),
:mod:`.schema` (the projection's migration chain), :mod:`.chunking`,
:mod:`.projection` (sync), :mod:`.index_faults` (a damaged index file versus an unusable
one), :mod:`.watch` (the inotify change feed),
:mod:`.maintenance` (``sbuf watch``, ``sbuf gc``), :mod:`.retrieval` (ranking, budget),
:mod:`.repository` (lifecycle), :mod:`.invoke` (the version-1 protocol),
:mod:`.core` (views and operations), :mod:`.cli` (``sbuf``), :mod:`.editor`
(editor-based commands), :mod:`.mcp` (the MCP adapter), :mod:`.mcp_handshake` (what is
read before ``initialize``) and :mod:`.mcp_main`
(``stormbuffer-mcp``).
See docs/stormbuffer.md.
"""

import logging

# The protocol must leave stderr empty: nothing logs unless the host configures logging.
logging.getLogger(__name__).addHandler(logging.NullHandler())
