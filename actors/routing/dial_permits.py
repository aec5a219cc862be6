"""How long a fallback dial holds its permit (``fallback_policy.max_concurrent_dials_per_backend``).

A permit bounds the dial, so it is given back once the backend's response
headers arrive. The specification makes one exception: a non-streaming hop
to a Unix-socket backend or to a Bedrock runtime backend has no handshake
boundary in its transport, so it keeps its permit until the whole answer is
read.
"""

from __future__ import annotations

from switchyard.config.schema import BackendConfig, BackendType
from switchyard.config.unix_socket import is_unix


def permit_spans_answer(backend: BackendConfig, stream: bool) -> bool:
    """Whether a fallback dial to ``backend`` keeps its permit past the headers, to the end of the answer."""
    return not stream and (is_unix(backend.url) or backend.type is BackendType.BEDROCK)
