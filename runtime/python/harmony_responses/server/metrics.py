"""Prometheus metrics of one server process (`GET /metrics`, text exposition format).

Per worker process: with `--workers N` each worker counts its own requests, and a scrape reaches one of
them. Names and labels are the server's documented contract (README, "Metrics").
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The counters, gauges and histograms, in their own registry (one per app)."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "harmony_responses_requests",
            "HTTP requests answered, by endpoint and status",
            ["endpoint", "status"],
            registry=r,
        )
        self.active_streams = Gauge("harmony_responses_active_streams", "Streamed responses in progress", registry=r)
        self.in_flight = Gauge("harmony_responses_engine_requests_in_flight", "Engine requests running", registry=r)
        self.input_tokens = Counter("harmony_responses_input_tokens", "Prompt tokens sent to the engine", registry=r)
        self.output_tokens = Counter("harmony_responses_output_tokens", "Completion tokens received", registry=r)
        self.ttft = Histogram(
            "harmony_responses_time_to_first_token_seconds",
            "From the request's arrival to the engine's first output",
            buckets=_TTFT_BUCKETS,
            registry=r,
        )
        self.engine_errors = Counter(
            "harmony_responses_engine_errors", "Engine failures, by kind", ["kind"], registry=r
        )
        self.hosted_calls = Counter(
            "harmony_responses_hosted_calls",
            "Hosted tool calls the server ran (web_search, mcp, code_interpreter), by kind and outcome",
            ["kind", "outcome"],
            registry=r,
        )
        self.hosted_seconds = Histogram(
            "harmony_responses_hosted_call_seconds",
            "Time a hosted tool call took, by kind (its cost in wall time)",
            ["kind"],
            buckets=_TTFT_BUCKETS,
            registry=r,
        )
        self.disconnects = Counter(
            "harmony_responses_client_disconnects", "Clients that left before their response ended", registry=r
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
