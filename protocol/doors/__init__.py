"""The ingresses clients come in through: OpenAI's (chat, completions, embeddings, models), Anthropic's
Messages, the Responses API and realtime websockets. Each reads and checks its wire shape, hands the
call pipeline a Call, and answers in its own shape (errors included)."""
