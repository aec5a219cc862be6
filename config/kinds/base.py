"""What a backend kind is: one frozen ``Kind`` of facts, declared once per ``type`` (``config/kinds/``).

Every fact is a required field with no default, so a kind module that
leaves one out fails at import, and ``tests/unit/test_kinds.py`` checks
that every ``BackendType`` has a kind and every fact the layers above act
on has its behaviour registered there (an auth scheme, a model-list shape,
a wire API, a simulator). Code elsewhere asks the kind (``kind_of``) and
never switches on the type.

The facts are data: what a kind does with them that needs the actors or
the protocol layer (reading a model list, speaking its wire API) is looked
up by the fact's value in that layer's own registry.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Callable, Mapping

from attrs import frozen

from switchyard.config.endpoints import Endpoint
from switchyard.config.fields import has_rule, read
from switchyard.config.params import PARAMS
from switchyard.config.rules import Reader
from switchyard.config.schema import BackendConfig, BackendType

# The endpoints a kind may speak are config/endpoints.py's: the actors' wires by endpoint (actors/wire.py:
# ENDPOINTS), and the realtime websocket, a door of its own (protocol/doors/realtime.py).
# the OpenAI-compatible engines' own
TEXT = frozenset({Endpoint.CHAT, Endpoint.COMPLETIONS, Endpoint.EMBEDDINGS, Endpoint.RESPONSES})
ALL_PARAMS = frozenset(PARAMS)


class Api(str, Enum):
    """The wire API a kind is spoken to in (its wire: protocol/wires/native.py; its simulator, if any:
    protocol/wires/upstream.py)."""

    OPENAI = "openai"          # OpenAI's: the endpoint's own wire, the body as the client sent it
    MESSAGES = "messages"      # Anthropic's Messages API
    GEMINI = "gemini"          # Google's generateContent, the model in the URL
    CONVERSE = "converse"      # Amazon Bedrock's Converse, SigV4-signed, the model in the URL


class StreamUsage(str, Enum):
    """How a kind's stream comes to report the tokens it used (actors/call/attempt_body.py)."""

    OPTION = "option"      # when asked with stream_options.include_usage, as backends[].stream_usage says
    WIRE = "wire"          # its wire asks for it whenever the option is set
    REPORTED = "reported"  # always: its own stream reports usage


class ListShape(str, Enum):
    """The shape of a kind's model list (its reader: actors/discovery.py)."""

    OPENAI = "openai"      # {"data": [{"id": ...}]}
    GOOGLE = "google"      # {"models": [{"name": "models/ID"}], "nextPageToken": ...}, in pages


class EnginePage(str, Enum):
    """Whether a kind has a Prometheus engine page to poll (actors/engine_stats.py) without engine_stats_url."""

    NONE = "none"
    ALWAYS = "always"
    SIMULATED = "simulated"    # when its simulation runs an engine (simulation.engine)


class Prefill(str, Enum):
    """Whether a broken stream may continue on a kind as a trailing assistant message (actors/routing/resume.py)."""

    NONE = "none"
    AS_IS = "as_is"                                    # the trailing message is continued as sent
    CONTINUE_FINAL = "continue_final_message"          # with continue_final_message, no generation prompt


class InProcess(str, Enum):
    """When a backend of a kind is served by an in-process simulator (``simulation`` is read)."""

    NEVER = "never"
    ALWAYS = "always"
    SIMULATED_HOST = "simulated_host"   # when its url's host ends in .simulated


@frozen
class Auth:
    """How a kind's key is sent on its own routes (health, models, engine page: actors/addressing.py)."""

    header: str                 # the header the key goes in
    prefix: str = ""            # before the key ("Bearer ")
    # headers sent on every one of its routes, key or none (anthropic: anthropic-version)
    always: Callable[[BackendConfig], tuple[tuple[str, str], ...]] = lambda backend: ()

    @property
    def basic_replaces_key(self) -> bool:
        """Whether a ``user:password@`` url's ``Authorization: Basic`` would replace the key
        (protocol/wires/upstream.py), so a url with credentials and an ``api_key`` is refused."""
        return self.header == "authorization"


BEARER = Auth("authorization", "Bearer ")


@frozen
class ModelList:
    """Where a kind lists its models, and in which shape."""

    path: str
    shape: ListShape


@frozen
class Narrowing:
    """A setting of its own from which a kind's API refuses some of the parameters it carries
    (anthropic: sampling fields from an ``anthropic_version`` on)."""

    key: str                                            # the setting's field (and YAML key)
    carried: Callable[[BackendConfig], frozenset[str]]  # what a backend carries under its setting


@frozen
class Key:
    """A ``backends[]`` key only some kinds take (a field of ``BackendConfig``, read by its declared rule).

    Every kind that lists it owns it; on any other kind it is an error: "only
    applies to" ``who`` (``{owners}``: the owning types), "not" the type, then ``why``.
    """

    name: str
    who: str = "backends of type {owners}"
    why: str = ""


# backends[].stream_usage: the kinds whose streams report usage when asked (StreamUsage.OPTION) own it.
STREAM_USAGE = Key("stream_usage", who="backends spoken to in OpenAI's wire ({owners})",
                   why=": its own stream reports usage")


@frozen
class Draft:
    """One backend as ``config/load_backends.py`` read it so far, which its kind's ``settle`` completes."""

    url: str
    models: tuple[str, ...]
    api_key: str | None
    own: Mapping[str, Any]           # the kind's own keys, each as its rule read it (a key without one: raw)


def as_read(r: Reader, draft: Draft) -> Draft:
    """``settle`` for a kind whose own keys need nothing beyond their rules."""
    return draft


def any_url(url: str) -> str | None:
    """``url_rule`` for a kind that takes any http(s) url."""
    return None


def read_own(r: Reader, key: Key) -> Any:
    """A kind key's value: by the rule declared on ``BackendConfig``, else the raw value (its kind checks it)."""
    if has_rule(BackendConfig, key.name):
        return read(r, BackendConfig, key.name)
    return r.get(key.name, lambda value: value, None)


@frozen
class Kind:
    """Everything Switchyard needs to know of one backend type. No field has a default: each kind says
    every one (``tests/unit/test_kinds.py``)."""

    type: BackendType
    # --- addressing -------------------------------------------------------------------------------
    default_url: str | None          # its url when none is written ("{name}": the backend's name)
    url_required: bool               # without a default, whether a missing url is an error (else settle sets it)
    url_rule: Callable[[str], str | None]   # what is wrong with the url (None: nothing), after settle
    unix_socket: bool                # a unix:// url may name it (the OpenAI-compatible engines)
    auth: Auth
    # --- health, discovery, engine page -----------------------------------------------------------
    health_path: str                 # health_checks.path when unset
    passive_health: bool             # no route a check may ask unsigned: its calls alone judge it
    model_list: ModelList | None     # None: never asked (discovery is off, models are named)
    engine_page: EnginePage
    # --- what it speaks ---------------------------------------------------------------------------
    api: Api
    endpoints: frozenset[Endpoint]   # a call to another finds it no candidate
    responses_api: bool              # /v1/responses natively (else through the chat bridge)
    stream_usage: StreamUsage
    carries: frozenset[str]          # the request_params it takes (config/params.py: PARAMS)
    narrowing: Narrowing | None      # a setting of its own that narrows ``carries``
    prefill: Prefill
    structured_output: str           # the classifier's ``structured_output: auto`` on it
    request_id_header: str | None    # its own answer's request-id header, passed to the client
    dial_spans_answer: bool          # a fallback dial's permit is held to the end of a buffered answer
    in_process: InProcess
    # a batch line the gateway runs on it is priced with pricing.batch_discount: an engine the operator runs
    # (the discount is theirs to give); False for a provider's regular API, which bills the whole price and
    # gives its batch price only to batches relayed to its own Batch API
    batch_priced: bool
    # --- its own keys -----------------------------------------------------------------------------
    keys: tuple[Key, ...]
    settle: Callable[[Reader, Draft], Draft]   # its own checks and derived values, after its keys are read

    def carried(self, backend: BackendConfig) -> frozenset[str]:
        """The request parameters ``backend`` (of this kind) takes under its own settings."""
        return self.carries if self.narrowing is None else self.narrowing.carried(backend)

    def owns(self, key: str) -> bool:
        return any(k.name == key for k in self.keys)
