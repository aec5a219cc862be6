"""Every backend type is one kind (config/kinds/), and every fact a kind declares has its behaviour
registered in the layer that acts on it: a kind that leaves a capability undeclared, or declares one
nothing implements, fails here (docs/architecture.md: "Adding a backend kind")."""

from __future__ import annotations

import attrs
import pytest

from switchyard.actors.discovery import READERS
from switchyard.actors.wire import ENDPOINTS as WIRE_ENDPOINTS
from switchyard.config.endpoints import Endpoint
from switchyard.config.kinds import KEYS, KINDS
from switchyard.config.kinds.base import (
    Api,
    Auth,
    EnginePage,
    InProcess,
    Key,
    Kind,
    ListShape,
    ModelList,
    Narrowing,
    Prefill,
    StreamUsage,
)
from switchyard.config.params import PARAMS
from switchyard.config.schema import BackendConfig, BackendType
from switchyard.protocol.wires.native import NATIVE
from switchyard.protocol.wires.upstream import SIMULATORS

KIND_LIST = list(KINDS.values())
STRATEGIES = {"json_schema", "tool_use", "json_object", "prompt_only"}


def test_every_backend_type_is_registered_as_its_own_kind():
    assert set(KINDS) == set(BackendType)
    assert all(kind.type is t for t, kind in KINDS.items())


def test_a_kind_cannot_leave_a_capability_undeclared():
    """No fact has a default: a kind module that omits one fails at import."""
    assert all(f.default is attrs.NOTHING for f in attrs.fields(Kind))
    with pytest.raises(TypeError, match="missing"):
        Kind(type=BackendType.GENERIC)   # type: ignore[call-arg]


@pytest.mark.parametrize("kind", KIND_LIST, ids=lambda k: k.type.value)
def test_each_declared_fact_is_a_value_the_layers_know(kind: Kind):
    assert kind.default_url is None or kind.default_url.startswith(("http://", "https://"))
    assert isinstance(kind.url_required, bool)
    assert callable(kind.url_rule) and isinstance(kind.unix_socket, bool) and isinstance(kind.auth, Auth)
    assert kind.health_path.startswith("/") and isinstance(kind.passive_health, bool)
    assert kind.model_list is None or isinstance(kind.model_list, ModelList)
    assert isinstance(kind.engine_page, EnginePage) and isinstance(kind.api, Api)
    assert kind.endpoints <= set(Endpoint) and {Endpoint.CHAT, Endpoint.RESPONSES} <= kind.endpoints
    assert isinstance(kind.responses_api, bool) and isinstance(kind.stream_usage, StreamUsage)
    assert kind.carries <= set(PARAMS)
    assert kind.narrowing is None or isinstance(kind.narrowing, Narrowing)
    assert isinstance(kind.prefill, Prefill) and kind.structured_output in STRATEGIES
    assert kind.request_id_header is None or kind.request_id_header.islower()
    assert isinstance(kind.dial_spans_answer, bool) and isinstance(kind.in_process, InProcess)
    assert all(isinstance(k, Key) for k in kind.keys) and callable(kind.settle)


@pytest.mark.parametrize("kind", KIND_LIST, ids=lambda k: k.type.value)
def test_each_kind_is_consistent_with_itself(kind: Kind):
    # compaction is the Responses API's alone; only a kind whose streams are asked takes stream_usage
    assert (Endpoint.COMPACT in kind.endpoints) == kind.responses_api
    assert kind.owns("stream_usage") == (kind.stream_usage is StreamUsage.OPTION)
    # passive health means no route to ask: none for its model list either
    assert not (kind.passive_health and kind.model_list is not None)
    if kind.narrowing is not None:
        assert kind.owns(kind.narrowing.key)


def test_every_kind_key_is_a_backend_field_declared_the_same_way_by_every_owner():
    fields = {f.name for f in attrs.fields(BackendConfig)}
    assert {k.name for k in KEYS} <= fields
    for key in KEYS:
        assert {next(k for k in kind.keys if k.name == key.name) for kind in KIND_LIST if kind.owns(key.name)} == {key}


def test_every_wire_api_has_its_wire():
    """protocol/wires/native.py: a wire API with no wire would leave its kinds unspoken to."""
    assert set(NATIVE) == set(Api)


def test_every_model_list_shape_has_its_reader():
    """actors/discovery.py: READERS."""
    assert set(READERS) == set(ListShape)


def test_every_kind_run_in_process_has_a_simulator_for_its_wire_api():
    """protocol/wires/upstream.py: SIMULATORS."""
    assert {k.api for k in KIND_LIST if k.in_process is not InProcess.NEVER} <= set(SIMULATORS)


def test_every_endpoint_a_kind_may_speak_has_a_wire():
    """actors/wire.py: ENDPOINTS (the realtime websocket is a door of its own)."""
    assert set(Endpoint) - {Endpoint.REALTIME} == set(WIRE_ENDPOINTS)
