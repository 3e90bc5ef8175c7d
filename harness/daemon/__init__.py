"""The resident query process: one daemon per project, reached over a Unix socket.

A one-shot ``memstrata query`` pays interpreter start-up, imports, the graph
snapshot and the tokenizer before answering; a daemon that keeps them loaded
answers the same question in a fraction of that.  Public face:

- :mod:`.client`: :func:`~.client.ask` (run a command in the daemon, or say
  it could not), :func:`~.client.spawn`, :func:`~.client.stop`,
  :func:`~.client.status`;
- :mod:`.server`: :class:`~.server.Daemon`, the process behind the socket;
- :mod:`.sockets`: where the socket lives and what makes it trusted;
- :mod:`.identity`: the build a daemon must share with its clients.

Nothing here knows the commands: the CLI hands the daemon its handlers.
"""
