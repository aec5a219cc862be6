"""Talk to Switchyard with the official `openai` Python SDK.

Start the demo gateway first (`switchyard serve`), then run:

    pip install openai
    python examples/openai-sdk.py

Set SWITCHYARD_URL to point somewhere else than http://localhost:8080/v1,
and SWITCHYARD_MODEL to ask for another model than `demo`.
"""

import os

import openai

base_url = os.environ.get("SWITCHYARD_URL", "http://localhost:8080/v1")
model = os.environ.get("SWITCHYARD_MODEL", "demo")

# Switchyard does not check the client's API key; the SDK insists on one.
client = openai.OpenAI(base_url=base_url, api_key="unused")

# Which models can the gateway route?
print("models:", [m.id for m in client.models.list().data])

# Buffered: one JSON answer once the backend is done.
reply = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Say hello."}],
)
print("buffered:", reply.choices[0].message.content)

# Streaming: server-sent events, relayed chunk by chunk as the backend sends them.
print("streaming: ", end="", flush=True)
stream = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Say hello, slowly."}],
    stream=True,
)
for chunk in stream:
    if chunk.choices and chunk.choices[0].delta.content:
        print(chunk.choices[0].delta.content, end="", flush=True)
print()

# Errors come back in the OpenAI envelope, so the SDK raises its usual exceptions.
try:
    client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "Hi"}])
except openai.NotFoundError as err:
    print("error:", err.status_code, err.body["code"] if isinstance(err.body, dict) else err.body)
