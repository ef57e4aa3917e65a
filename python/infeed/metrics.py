"""Prometheus metrics of running pipelines, in the text exposition format.

::

    import infeed.metrics
    it = pipeline.iter()
    server = infeed.metrics.serve(9100, {"train": it})   # GET /metrics
    ...
    server.shutdown()

:func:`render` gives the text for any scraper or push gateway. Every figure
is the engine's own (``Iterator.figures``): batches, records and bytes per
stage, busy and waiting seconds per stage, the consumer's wait, the batches
ready in the output queue, records and bytes skipped under the skip policy,
and cloud reads retried.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from infeed.pipeline import Iterator

# (name, type, help, where the value is)
_PIPELINE = [
    ("infeed_batches_total", "counter", "Batches delivered.", "batches"),
    ("infeed_consumer_wait_seconds_total", "counter", "Time next() waited.", "consumer_wait"),
    ("infeed_ready_batches", "gauge", "Batches assembled and waiting.", "ready"),
    ("infeed_workers", "gauge", "Worker threads.", "workers"),
    ("infeed_elapsed_seconds", "counter", "Time since the pipeline started.", "elapsed"),
]
_STAGE = [
    ("infeed_stage_records_total", "counter", "Records through a stage.", "records"),
    ("infeed_stage_bytes_total", "counter", "Bytes through a stage.", "bytes"),
    ("infeed_stage_busy_seconds_total", "counter", "A stage's threads working.", "busy"),
    ("infeed_stage_wait_seconds_total", "counter", "A stage's threads waiting.", "wait"),
    (
        "infeed_skipped_records_total",
        "counter",
        "Records skipped (skip policy).",
        "skipped_records",
    ),
    ("infeed_skipped_bytes_total", "counter", "Bytes skipped (skip policy).", "skipped_bytes"),
    ("infeed_retries_total", "counter", "Cloud reads retried.", "retries"),
]


def render(iterators: Iterator | Mapping[str, Iterator]) -> str:
    """The metrics of ``iterators`` (one, or several by a ``pipeline``
    label) in Prometheus' text format."""
    if isinstance(iterators, Iterator):
        iterators = {"default": iterators}
    figures = {name: it.figures() for name, it in iterators.items()}
    lines: list[str] = []
    for metric, kind, help_text, key in _PIPELINE:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
        for name, f in figures.items():
            if f:
                lines.append(f'{metric}{{pipeline="{name}"}} {f[key]}')
    for metric, kind, help_text, key in _STAGE:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
        for name, f in figures.items():
            for stage in ("read", "records", "batch"):
                if f:
                    value = f[stage][key]
                    lines.append(f'{metric}{{pipeline="{name}",stage="{stage}"}} {value}')
    return "\n".join(lines) + "\n"


def serve(
    port: int, iterators: Iterator | Mapping[str, Iterator], host: str = "127.0.0.1"
) -> ThreadingHTTPServer:
    """Serves :func:`render` at ``http://host:port/metrics`` from a daemon
    thread; ``shutdown()`` the returned server to stop."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server name)
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = render(iterators).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


__all__ = ["render", "serve"]
