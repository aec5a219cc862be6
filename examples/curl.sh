#!/usr/bin/env sh
# A tour of Switchyard's HTTP API with curl, against the demo gateway.
# Start it first:  switchyard serve
# Point elsewhere: SWITCHYARD=http://127.0.0.1:9000 sh examples/curl.sh
set -eu
BASE="${SWITCHYARD:-http://localhost:8080}"

echo "== liveness: 200 as long as the process answers"
curl -sS "$BASE/health"; echo

echo "== readiness: 200 when at least one public backend can take traffic, else 503"
curl -sS "$BASE/ready"; echo

echo "== models the gateway can route"
curl -sS "$BASE/v1/models"; echo

echo "== a buffered chat completion"
curl -sS "$BASE/v1/chat/completions" \
  -H 'content-type: application/json' \
  -d '{"model": "demo", "messages": [{"role": "user", "content": "Say hello."}]}'
echo

echo "== a streaming chat completion (server-sent events, ends with data: [DONE])"
curl -sS -N "$BASE/v1/chat/completions" \
  -H 'content-type: application/json' \
  -d '{"model": "demo", "stream": true, "messages": [{"role": "user", "content": "Say hello."}]}'

echo "== an error: unknown model -> 404 model_not_found"
curl -sS -w ' (HTTP %{http_code})\n' "$BASE/v1/chat/completions" \
  -H 'content-type: application/json' \
  -d '{"model": "no-such-model", "messages": [{"role": "user", "content": "Hi"}]}'
