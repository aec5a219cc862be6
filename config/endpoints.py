"""The APIs a call can be in (``Call.endpoint``), one name each, for the doors, the wires and the kinds.

The config layer holds them because each backend kind declares the ones it
speaks (``config/kinds/``). A ``StrEnum``: a member is its value wherever it
is compared, hashed, formatted or written out (JSON, logs, metric labels),
so nothing that leaves the process spells an endpoint differently.
"""

from __future__ import annotations

import enum


class Endpoint(enum.StrEnum):
    CHAT = "chat"                                    # /v1/chat/completions (the Anthropic door's calls too)
    COMPLETIONS = "completions"                      # /v1/completions
    EMBEDDINGS = "embeddings"                        # /v1/embeddings
    RESPONSES = "responses"                          # /v1/responses
    COMPACT = "compact"                              # /v1/responses/compact
    IMAGES_GENERATIONS = "images_generations"        # /v1/images/generations
    IMAGES_EDITS = "images_edits"                    # /v1/images/edits
    IMAGES_VARIATIONS = "images_variations"          # /v1/images/variations
    RERANK = "rerank"                                # /v1/rerank and /rerank (Cohere's and Jina's shape)
    MODERATIONS = "moderations"                      # /v1/moderations
    AUDIO_TRANSCRIPTIONS = "audio_transcriptions"    # /v1/audio/transcriptions
    AUDIO_TRANSLATIONS = "audio_translations"        # /v1/audio/translations
    AUDIO_SPEECH = "audio_speech"                    # /v1/audio/speech
    REALTIME = "realtime"                            # /v1/realtime: a websocket door of its own, no wire


IMAGES = frozenset({Endpoint.IMAGES_GENERATIONS, Endpoint.IMAGES_EDITS, Endpoint.IMAGES_VARIATIONS})
# Calls that score their input and generate nothing: answered whole, no generation settings, no messages,
# no empty-reply check (protocol/doors/scoring.py, actors/scores_relay.py).
SCORING = frozenset({Endpoint.RERANK, Endpoint.MODERATIONS})
# Speech to text: a multipart upload of audio, answered as text (protocol/doors/audio.py).
TRANSCRIBING = frozenset({Endpoint.AUDIO_TRANSCRIPTIONS, Endpoint.AUDIO_TRANSLATIONS})
AUDIO = TRANSCRIBING | {Endpoint.AUDIO_SPEECH}
