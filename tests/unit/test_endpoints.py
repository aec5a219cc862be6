"""config/endpoints.py: an Endpoint is its text wherever it leaves the process (JSON, logs, metric labels,
ledger records, hashed keys), and its text is what the ledger, the doors and the wires have always said."""

from __future__ import annotations

import json
import logging

from prometheus_client import CollectorRegistry, Counter, generate_latest

from switchyard.actors.ledger.entries import ENDPOINTS as RECORDED
from switchyard.actors.wire import ENDPOINTS as WIRES
from switchyard.config.endpoints import IMAGES, Endpoint

TEXTS = ["chat", "completions", "embeddings", "responses", "compact", "images_generations", "images_edits",
         "images_variations", "rerank", "moderations", "audio_transcriptions", "audio_translations", "audio_speech",
         "realtime"]


def test_the_members_are_the_endpoints_names():
    assert [e.value for e in Endpoint] == TEXTS
    assert IMAGES == {"images_generations", "images_edits", "images_variations"}


def test_a_member_compares_hashes_and_formats_as_its_text():
    e = Endpoint.IMAGES_EDITS
    assert e == "images_edits" and {"images_edits": 1}[e] == 1 and e in frozenset({"images_edits"})
    assert (str(e), f"{e}", "%s" % e, e.encode()) == ("images_edits",) * 3 + (b"images_edits",)


def test_json_logs_and_metric_labels_carry_the_text(caplog):
    assert json.dumps({"endpoint": Endpoint.EMBEDDINGS}) == '{"endpoint": "embeddings"}'
    with caplog.at_level(logging.INFO, logger="test.endpoints"):
        logging.getLogger("test.endpoints").info("a call in %s", Endpoint.RESPONSES)
    assert caplog.messages == ["a call in responses"]
    registry = CollectorRegistry()
    Counter("calls", "calls", ["endpoint"], registry=registry).labels(Endpoint.COMPACT).inc()
    assert b'calls_total{endpoint="compact"} 1.0' in generate_latest(registry)


def test_the_ledger_records_plain_text():
    assert all(type(text) is str for text in RECORDED.values())
    assert RECORDED["/v1/chat/completions"] == "chat" and RECORDED["/anthropic/v1/messages"] == "messages"
    assert all(RECORDED[wire.path] == endpoint.value for endpoint, wire in WIRES.items())
