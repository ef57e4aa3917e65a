"""infeed.metrics: the engine's figures in Prometheus' text format, served
over HTTP; Iterator.figures as numbers."""

from __future__ import annotations

import re
import urllib.request

from conftest import lm_pipeline
from processes import free_port

import infeed.metrics


def test_figures_render_as_prometheus_text_and_are_served():
    it = lm_pipeline().iter()
    for _ in range(5):
        next(it)
    figures = it.figures()
    assert figures["batches"] == 5
    assert figures["read"]["records"] > 0 and figures["batch"]["records"] >= 80
    assert figures["elapsed"] > 0 and figures["workers"] >= 1
    text = infeed.metrics.render({"train": it})
    assert "# TYPE infeed_batches_total counter" in text
    assert 'infeed_batches_total{pipeline="train"} 5' in text
    records = re.search(r'infeed_stage_records_total\{pipeline="train",stage="batch"\} (\d+)', text)
    assert records and int(records.group(1)) >= 80
    # The record thread's stage (interleave, shuffle, grouping) is "records".
    assert figures["records"]["records"] >= 80
    stage = r'infeed_stage_records_total\{pipeline="train",stage="records"\} (\d+)'
    passed = re.search(stage, text)
    assert passed and int(passed.group(1)) >= figures["records"]["records"]
    # Every sample line is `name{labels} number`.
    for line in text.splitlines():
        if not line.startswith("#"):
            assert re.fullmatch(r'[a-z_]+\{[a-z]+="[a-z]+"(,[a-z]+="[a-z]+")?\} [0-9.e+-]+', line)
    port = free_port()
    server = infeed.metrics.serve(port, it)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
            served = r.read().decode()
        assert 'infeed_batches_total{pipeline="default"} 5' in served
    finally:
        server.shutdown()
    it.close()
    assert it.figures() == {}
