"""Prometheus metrics of one harness app, in its own registry.

A per-app :class:`CollectorRegistry` (not the process-global one) lets tests
and benchmarks run several apps in one process.  Labels carry no secrets:
the project label is the project folder's name, statuses are HTTP codes.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import disable_created_metrics

# The *_created series double the output and nothing here reads them.
disable_created_metrics()

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, project: str):
        self.project = project
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.tokens_sent = Counter("memstrata_tokens_sent", "Prompt tokens forwarded to providers (2xx answers)",
                                   ["project"], registry=r)
        self.tokens_saved = Counter("memstrata_tokens_saved", "Prompt tokens removed by compression (2xx answers)",
                                    ["project"], registry=r)
        self.provider_tokens = Counter("memstrata_provider_tokens",
                                       "Tokens the provider reported billing (2xx answers), by kind: input (full "
                                       "rate), output, cache_read, cache_write", ["project", "kind"], registry=r)
        self.compactions = Counter("memstrata_compactions",
                                   "Requests whose forwarded prefix the proxy changed (compaction steps)",
                                   ["project"], registry=r)
        self.invalidated_tokens = Counter("memstrata_prefix_invalidated_tokens",
                                          "Tokens of already-forwarded content whose forwarded form changed",
                                          ["project"], registry=r)
        # What /status, the dashboard and `memstrata savings` call the dollars saved: the counterfactual bill
        # minus the provider's (the estimate where a row has no counterfactual).  It falls when the proxy
        # costs more than it saves (a compaction's cache writes), which no counter may do: a gauge.
        self.dollars_saved = Gauge("memstrata_dollars_saved",
                                   "USD saved since this serve started: what the provider would have billed for "
                                   "the unmodified prompts minus what it billed (dollar_saved; can fall)",
                                   ["project"], registry=r)
        self.dollars_saved_gross = Counter("memstrata_dollars_saved_gross",
                                           "USD of the tokens compression removed before cache-miss costs "
                                           "(dollar_saved_gross, the estimate's part; cache-aware rates)",
                                           ["project"], registry=r)
        self.cache_miss_dollars = Counter("memstrata_cache_miss_dollars",
                                          "USD the proxy's prefix changes cost in lost provider cache hits",
                                          ["project"], registry=r)
        self.prompt_bill = Counter("memstrata_prompt_bill_dollars",
                                   "USD of prompt tokens, by bill: direct (what the provider would have billed "
                                   "for the unmodified requests, under its caching rules) and proxied (what it "
                                   "billed for the forwarded ones)", ["project", "bill"], registry=r)
        self.requests = Counter("memstrata_requests", "Proxied model requests by the status returned to the client",
                                ["status"], registry=r)
        self.upstream_errors = Counter("memstrata_upstream_errors",
                                       "Upstream failures: HTTP error statuses, timeouts, refused or dropped connections",
                                       ["kind"], registry=r)
        self.ledger_dropped = Counter("memstrata_ledger_dropped",
                                      "Ledger hand-offs dropped because the writer was behind (a slow or stuck "
                                      "disk), by kind: counting, completion, row", ["kind"], registry=r)
        self.request_seconds = Histogram("memstrata_request_duration_seconds",
                                         "Proxied model request time, arrival to last byte", ["endpoint"],
                                         buckets=_LATENCY_BUCKETS, registry=r)
        self.ttfb_seconds = Histogram("memstrata_time_to_first_byte_seconds",
                                      "Proxied model request time, arrival to the first response byte", ["endpoint"],
                                      buckets=_LATENCY_BUCKETS, registry=r)
        self.compression_seconds = Histogram("memstrata_compression_duration_seconds",
                                             "Time spent finding and replacing code context", buckets=_LATENCY_BUCKETS,
                                             registry=r)
        # Make the documented series visible from the first scrape.
        for series in (self.tokens_sent, self.tokens_saved, self.compactions, self.invalidated_tokens,
                       self.dollars_saved, self.dollars_saved_gross, self.cache_miss_dollars):
            series.labels(project=project)
        for kind in ("input", "output", "cache_read", "cache_write"):
            self.provider_tokens.labels(project=project, kind=kind)
        for bill in ("direct", "proxied"):
            self.prompt_bill.labels(project=project, bill=bill)
        for kind in ("counting", "completion", "row"):
            self.ledger_dropped.labels(kind=kind)

    def render(self) -> bytes:
        return generate_latest(self.registry)
