"""``memstrata serve``: index, watch, and serve the proxy, the dashboard, /status, /metrics and /mcp."""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import ipaddress
import logging
import signal
import socket
import sys
import time
from collections.abc import Callable

from memstrata.indexer.project import ProjectError
from memstrata.storage import StoreError

from . import argtypes
from memstrata.harness.proxy.providers import DEFAULT_ANTHROPIC_BASE, DEFAULT_OPENAI_BASE, Providers, ProvidersError
from memstrata.harness.proxy.upstream import shown_url

EXIT_PORT_IN_USE = 3

log = logging.getLogger(__name__)


def _label(what: str):
    def parse(value: str) -> str:
        from memstrata.harness.proxy.labels import LabelError, check

        try:
            return check(value, what)
        except LabelError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve", help="run the compressing OpenAI/Anthropic proxy with a dashboard, /status, /metrics and /mcp",
        description="Index the project (catching up on changes), keep it fresh with the watcher, and serve "
        "http://HOST:PORT: /v1/chat/completions and /v1/responses (OpenAI), /anthropic/v1/messages "
        "(Anthropic), the dashboard page at /, /health, /status, /metrics and /mcp (SSE clients: /sse). "
        "Point tools at it with OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 or "
        "ANTHROPIC_BASE_URL=http://127.0.0.1:PORT/anthropic.")
    argtypes.add_project(p)
    p.add_argument("--port", type=argtypes.port, default=8080, help="port (default 8080)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; anything else exposes your proxy to the network; "
                        "0.0.0.0 answers to this machine's names and addresses)")
    p.add_argument("--openai-upstream", type=argtypes.http_url, default=None, metavar="URL",
                   help=f"OpenAI-compatible base URL to forward to (default: providers.json base_url of "
                   f"--openai-provider, else {DEFAULT_OPENAI_BASE}); e.g. http://127.0.0.1:11434/v1 for Ollama")
    p.add_argument("--anthropic-upstream", type=argtypes.http_url, default=None, metavar="URL",
                   help=f"Anthropic base URL to forward to (default: providers.json base_url of "
                   f"--anthropic-provider, else {DEFAULT_ANTHROPIC_BASE})")
    p.add_argument("--openai-provider", default="openai", metavar="NAME",
                   help="providers.json entry whose rates price /v1 traffic (default openai; e.g. ollama)")
    p.add_argument("--anthropic-provider", default="anthropic", metavar="NAME",
                   help="providers.json entry whose rates price /anthropic traffic (default anthropic)")
    p.add_argument("--compress", choices=("safe", "aggressive", "off"), default="safe",
                   help="safe (default): compress pastes where one file's code runs past 10,000 tokens, older tool "
                   "results (in rare steps that "
                   "keep provider prompt caches working) and latest results over 16,000 tokens (around "
                   "what the task names); aggressive: also every paste over --min-tokens, every new tool result "
                   "down to about 3,000 tokens (but a read of a file the question is probably about), and "
                   "earlier tasks' results down to what the conversation names, sooner; "
                   "off: forward every request unchanged (still counted in the ledger)")
    p.add_argument("--no-compress", dest="compress", action="store_const", const="off",
                   help="the same as --compress off")
    p.add_argument("--budget-ratio", type=argtypes.unit_ratio, default=None, metavar="R",
                   help="in a compressed block, definitions that rank for the question (beyond the ones it "
                   "names, always kept) may fill this share of the block (default 0.5 safe, 0.25 aggressive)")
    p.add_argument("--budget-cap", type=argtypes.positive_int, default=None, metavar="N",
                   help="... and at most this many tokens of it (default 6000)")
    p.add_argument("--min-tokens", type=argtypes.positive_int, default=None, metavar="N",
                   help="pasted blocks and tool results smaller than this are never cut (default 1500); a "
                   "numbered read of any size still goes without the padding before its line numbers")
    p.add_argument("--read-timeout", type=argtypes.positive, default=600.0, metavar="SECONDS",
                   help="longest wait for the upstream's next bytes (default 600)")
    p.add_argument("--connect-timeout", type=argtypes.positive, default=10.0, metavar="SECONDS",
                   help="longest wait to connect to the upstream (default 10)")
    p.add_argument("--shutdown-grace", type=argtypes.positive, default=60.0, metavar="SECONDS",
                   help="on Ctrl-C or SIGTERM, how long answers still streaming may finish (default 60); "
                   "then, or at a second Ctrl-C/SIGTERM, each ends with an error event its client "
                   "understands, and is recorded as ended by the shutdown")
    p.add_argument("--no-watch", dest="watch", action="store_false", help="do not watch files for changes")
    p.add_argument("--no-mcp", dest="mcp", action="store_false", help="do not mount the MCP transports at /mcp")
    p.add_argument("--user-label", type=_label("user"), default=None, metavar="NAME",
                   help="who the savings ledger records each request for (default $MEMSTRATA_USER, else the OS "
                   "user name); a team reads a shared ledger by it (memstrata savings --by user)")
    p.add_argument("--host-label", type=_label("host"), default=None, metavar="NAME",
                   help="the machine recorded with each request (default $MEMSTRATA_HOST, else the host name)")
    p.add_argument("--access-log", action="store_true",
                   help="print one line per request on stderr: method, path, status, duration, and the "
                   "request's tokens before -> after when it was compressed (never headers or keys)")
    p.set_defaults(func=cmd_serve)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


WILDCARDS = ("0.0.0.0", "::", "[::]")


def wildcard_hosts(host: str) -> tuple[str, ...]:
    """The Host names a wildcard bind answers to: the address itself and this machine's names and
    addresses (its host name, fully qualified name, what they resolve to, and the address it reaches
    other machines from).  A client on the network names one of them; a name no lookup here gives
    (another interface's address, a DNS alias) is refused like any foreign Host."""
    names = {host.strip("[]"), socket.gethostname(), socket.getfqdn()}
    for name in (socket.gethostname(), socket.getfqdn()):
        try:
            names.update(info[4][0] for info in socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP))
        except OSError:
            pass
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((probe, 9))  # a UDP "connect" sends nothing; it picks the outgoing address
                names.add(s.getsockname()[0])
        except OSError:
            pass
    return tuple(sorted({n.split("%", 1)[0].lower() for n in names if n and not is_loopback(n)}))


def bind(host: str, port: int) -> socket.socket:
    """Bind before indexing, so a taken port fails at once."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose listening
    # socket says TCP; without it Nagle + delayed ACK add ~40 ms to every response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    return sock


def _unknown_provider(args, providers: Providers) -> int | None:
    """A ``--openai-provider`` / ``--anthropic-provider`` name providers.json does not list (a
    typo: ``olama``): with no upstream of its own, requests would go to the default cloud
    endpoint instead of the one the name stands for, so serve stops; with ``--*-upstream``
    given, only the pricing is missing, and a warning says so."""
    import sys

    from .index import fail

    for flag, name, upstream, default in (
            ("--openai-provider", args.openai_provider, args.openai_upstream, "openai"),
            ("--anthropic-provider", args.anthropic_provider, args.anthropic_upstream, "anthropic")):
        if name == default or name in providers.providers:
            continue
        listed = ", ".join(providers.providers) or "none"
        if upstream is None:
            return fail(f"{flag} {name}: providers.json lists no provider of that name (it lists {listed}), "
                        f"so there is no upstream to forward to; check the name, or give "
                        f"{flag.replace('-provider', '-upstream')} URL")
        print(f"memstrata: warning: {flag} {name}: providers.json lists no provider of that name (it lists "
              f"{listed}); its requests are priced only by exact model names", file=sys.stderr)
    return None


def cmd_serve(args) -> int:
    from .index import ensure_indexed, fail, open_workspace

    try:
        providers = Providers.load()  # writes the defaults on first run
    except ProvidersError as exc:
        return fail(str(exc))
    if problem := _unknown_provider(args, providers):
        return problem
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return fail(f"port {args.port} on {args.host} is already in use (another memstrata serve?); "
                        f"stop it or choose another with --port", EXIT_PORT_IN_USE)
        if exc.errno == errno.EACCES:
            return fail(f"not allowed to bind port {args.port} on {args.host}; choose a port above 1023",
                        EXIT_PORT_IN_USE)
        return fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror}", EXIT_PORT_IN_USE)
    if not is_loopback(args.host):
        print(f"memstrata: warning: listening on {args.host}, not loopback; anyone who can reach it can use "
              f"your proxy", file=sys.stderr)
    started = time.time()
    try:
        store = argtypes.store_of(args)
        if store.shared:
            from memstrata.indexer.workspace import Workspace

            # A shared index is written by its checkout's index or watch; serve
            # reads it and records its savings in the store's ledger.
            ws = Workspace.open_shared(store, argtypes.project_of(args), readonly=False)
        else:
            ws = open_workspace(argtypes.project_of(args))
    except (ProjectError, StoreError) as exc:
        sock.close()
        return fail(str(exc))
    try:
        return _serve(args, ws, sock, providers, started, ensure_indexed)
    finally:
        ws.close()
        sock.close()


def background_pause(gate: list) -> Callable[[], None]:
    """The pause between steps of serve's background graph build: it gives way with ``gate[0]``
    (once there is one), then freezes what the build made so far (see mcp_server/quiet.py).  The
    full graph is millions of objects kept as long as the process follows changes; left in the
    collected generations, every full collection walked it, with the snapshot loaded at start-up:
    pauses of 50-80 ms for every request in flight on a 750k-line project, 14-26 ms frozen.
    What a request in flight holds at such a moment is frozen too, and a cycle of it that later
    becomes garbage stays: bounded, as the build runs once for each graph loaded."""

    def pause() -> None:
        if gate:
            gate[0]()
        gc.freeze()

    return pause


def _graceful_server(base: type) -> type:
    """uvicorn's Server whose stop gives answers still streaming ``grace`` seconds, then ends
    them as the proxy does (an error event, recorded as a shutdown); a second signal ends them
    at once.  uvicorn alone would cancel them at its timeout, which a client reads as a broken
    connection and the ledger as a client that left."""

    class GracefulServer(base):
        def __init__(self, config, end_answers: Callable, grace: float):
            super().__init__(config)
            self._end_answers = end_answers
            self._grace = grace
            self._loop: asyncio.AbstractEventLoop | None = None
            self._timer: asyncio.TimerHandle | None = None

        async def serve(self, sockets=None):
            self._loop = asyncio.get_running_loop()
            await super().serve(sockets=sockets)

        def handle_exit(self, sig, frame) -> None:
            loop = self._loop
            if loop is None:
                return super().handle_exit(sig, frame)
            if self.should_exit:  # a second signal: the answers end now, and the stop stays graceful
                self._captured_signals.append(sig)
                loop.call_soon_threadsafe(self._end, "a second stop signal")
                return
            super().handle_exit(sig, frame)
            loop.call_soon_threadsafe(self._arm)

        def _arm(self) -> None:
            self._timer = self._loop.call_later(self._grace, self._end, f"{self._grace:g} s grace over")

        def _end(self, reason: str) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._loop.create_task(self._end_answers(reason))

    return GracefulServer


def _serve(args, ws, sock, providers: Providers, started: float, ensure_indexed) -> int:
    import uvicorn

    from .index import fail

    # The proxy stack (httpx, starlette, prometheus) loads only when serving,
    # so every other memstrata command starts faster.
    from memstrata.harness.proxy.app import HarnessConfig, build_app
    from memstrata.harness.proxy.compress_request import CompressionSettings
    from memstrata.harness.proxy.http11 import ProxyH11Protocol
    from memstrata.harness.proxy.forward import ProxyConfig

    if not ws.detached:
        try:
            ensure_indexed(ws)
        except KeyboardInterrupt:
            return 130
    from memstrata.mcp_server.quiet import settle

    ws.graph  # load now, so updates refresh it incrementally and the first request is fast
    # What start-up built to keep (the graph, the tokenizer, the name index) goes out of the
    # garbage collector's way before the first request (see background_pause).
    settle()
    # Watching builds the full graph behind the snapshot: in short steps that give way to the
    # requests being compressed, once the proxy that compresses them exists (below).
    gate: list = []
    ws.background_pause = background_pause(gate)
    if args.watch and not ws.detached:
        ws.start_watching()
    proxy = ProxyConfig(
        openai_base=args.openai_upstream or providers.base_url(args.openai_provider) or DEFAULT_OPENAI_BASE,
        anthropic_base=args.anthropic_upstream or providers.base_url(args.anthropic_provider)
        or DEFAULT_ANTHROPIC_BASE,
        openai_provider=args.openai_provider, anthropic_provider=args.anthropic_provider,
        compress=args.compress != "off",
        compression=CompressionSettings.for_mode(args.compress, budget_ratio=args.budget_ratio,
                                                 budget_cap=args.budget_cap, min_tokens=args.min_tokens),
        connect_timeout=args.connect_timeout, read_timeout=args.read_timeout,
    )
    if is_loopback(args.host):
        extra_hosts: tuple[str, ...] = ()
    elif args.host in WILDCARDS:
        extra_hosts = wildcard_hosts(args.host)
    else:
        extra_hosts = (args.host.strip("[]").lower(),)
    port = sock.getsockname()[1]
    # A wildcard is where serve listens, not an address to send requests to: the banner gives the
    # loopback one (clients elsewhere use this machine's name or address, accepted above).
    shown = ("127.0.0.1" if args.host == "0.0.0.0" else "[::1]") if args.host in WILDCARDS else \
        f"[{args.host.strip('[]')}]" if ":" in args.host else args.host
    base = f"http://{shown}:{port}"
    from memstrata.harness.proxy.labels import LabelError, resolve

    try:
        labels = resolve(args.user_label, args.host_label)
    except LabelError as exc:  # from $MEMSTRATA_USER / $MEMSTRATA_HOST
        return fail(str(exc))
    app = build_app(ws, HarnessConfig(proxy=proxy, allowed_hosts=extra_hosts, mount_mcp=args.mcp,
                                      access_log=args.access_log, address=base, labels=labels), started=started)
    from memstrata.compressor.file_counts import start_counting

    # Whole-file token counts are worked out in the background; they give way while requests
    # are compressed (on a large project that is seconds of CPU right after start-up).
    start_counting(ws, pause=app.state.harness.proxy.wait_quiet)
    gate.append(app.state.harness.proxy.wait_quiet)
    print(f"memstrata serving {ws.root} on {base}\n"
          f"  dashboard: {base}/\n"
          f"  OpenAI:    OPENAI_BASE_URL={base}/v1  -> {shown_url(proxy.openai_base)}\n"
          f"  Anthropic: ANTHROPIC_BASE_URL={base}/anthropic  -> {shown_url(proxy.anthropic_base)}\n"
          + (f"  MCP:       {base}/mcp    " if args.mcp else "  MCP:       off (--no-mcp)    ")
          + f"status: {base}/status    metrics: {base}/metrics\n"
          f"  compression {args.compress}; Ctrl-C stops", file=sys.stderr, flush=True)
    # uvicorn's own access log stays off: --access-log is MemStrata's (harness/proxy/accesslog.py),
    # which never prints a query string and adds token counts.
    grace = args.shutdown_grace
    # uvicorn's own limit is a backstop past the grace: by then every answer has been ended.
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=grace + 10,
                            lifespan="on", http=ProxyH11Protocol)
    server = _graceful_server(uvicorn.Server)(config, app.state.harness.proxy.end_answers, grace)
    # uvicorn turns SIGINT/SIGTERM into a graceful shutdown (stop accepting,
    # finish in-flight requests, run the lifespan's shutdown: ledger drained),
    # then re-raises the signal to the handler that was installed before it.
    # Installing a no-op one lets the process close the index and exit 0.
    received: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: received.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not server.started:
        return fail("the server failed to start (see the messages above)")
    if ws.index_gone:
        # The rows went to the file this process opened, which nobody can read any more.
        print("memstrata: stopped; the ledger was not saved: the index file was deleted or replaced while "
              "serve ran", file=sys.stderr, flush=True)
    else:
        print("memstrata: stopped; ledger saved", file=sys.stderr, flush=True)
    return 0
