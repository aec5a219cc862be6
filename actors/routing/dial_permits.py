"""How long a fallback dial holds its permit (``fallback_policy.max_concurrent_dials_per_backend``).

A permit bounds the dial, so it is given back once the backend's response
headers arrive. The specification makes one exception: a non-streaming hop
to a Unix-socket backend or to a kind whose transport has no handshake
boundary (``Kind.dial_spans_answer``: Bedrock's runtime) keeps its permit
until the whole answer is read.
"""

from __future__ import annotations

from switchyard.config.kinds import kind_of
from switchyard.config.schema import BackendConfig
from switchyard.config.unix_socket import is_unix


def permit_spans_answer(backend: BackendConfig, stream: bool) -> bool:
    """Whether a fallback dial to ``backend`` keeps its permit past the headers, to the end of the answer."""
    return not stream and (is_unix(backend.url) or kind_of(backend).dial_spans_answer)
