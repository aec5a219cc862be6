"""The fleet simulator's workloads, generated from a seed: who sends what, and when.

A workload is a set of sessions. A session starts at an instant (arrivals
are a Poisson process), sends its first request, and sends each next one
``think`` seconds after the previous answer ended, its messages grown by the
answer and what the turn adds. Texts are words of a fixed made-up
vocabulary (about two simulated tokens a word: the word and its space).
Same seed, same workload, in any process (``random.Random`` seeded by a
string is).

- ``multi-turn``: chats under one short system prompt, each growing turn by turn.
- ``shared-prompt``: one-question sessions under a few long system prompts (eight applications').
- ``agents``: agents of a few kinds re-sending their growing context with each tool's output.
- ``uniform``: independent one-question sessions with long random prompts, nothing shared.

Load scales with the fleet: arrivals are ``rate`` sessions per second per backend.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from attrs import frozen

Message = dict[str, Any]


@frozen
class Turn:
    add: tuple[Message, ...]   # appended to the session's messages before this turn's request
    think: float = 0.0         # seconds after the previous answer ended (the first turn: none)


@frozen
class Session:
    start: float                   # seconds from the run's start
    system: str | None
    turns: tuple[Turn, ...]


@frozen
class Workload:
    name: str
    sessions: tuple[Session, ...]

    @property
    def requests(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    syllables = ["ka", "to", "ri", "me", "sa", "lu", "po", "ne", "di", "va", "gro", "tel", "mon", "bra", "sen",
                 "qui", "dor", "fa", "li", "zu"]
    return ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(size)]


class _Text:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = vocabulary(rng)

    def __call__(self, low: int, high: int) -> str:
        return " ".join(self.rng.choice(self.words) for _ in range(self.rng.randint(low, high)))


def _sessions(rng: random.Random, requests: int, rate: float,
              make: Callable[[float], Session]) -> tuple[Session, ...]:
    """Sessions arriving ``rate`` a second until they hold ``requests`` turns (the last one cut to fit)."""
    out: list[Session] = []
    at, left = 0.0, requests
    while left > 0:
        session = make(at)
        if len(session.turns) > left:
            session = Session(session.start, session.system, session.turns[:left])
        out.append(session)
        left -= len(session.turns)
        at += rng.expovariate(rate)
    return tuple(out)


def multi_turn(rng: random.Random, requests: int, backends: int) -> tuple[Session, ...]:
    text = _Text(rng)
    system = "You are a helpful assistant. " + text(40, 40)

    def make(at: float) -> Session:
        turns = [Turn(({"role": "user", "content": text(60, 160)},),
                      think=rng.uniform(1.0, 4.0) if i else 0.0) for i in range(rng.randint(6, 12))]
        return Session(at, system, tuple(turns))
    return _sessions(rng, requests, 0.6 * backends, make)


def shared_prompt(rng: random.Random, requests: int, backends: int) -> tuple[Session, ...]:
    text = _Text(rng)
    systems = [f"Document {i}. " + text(900, 1300) for i in range(8)]

    def make(at: float) -> Session:
        return Session(at, rng.choice(systems), (Turn(({"role": "user", "content": text(8, 30)},)),))
    return _sessions(rng, requests, 5.0 * backends, make)


def agents(rng: random.Random, requests: int, backends: int) -> tuple[Session, ...]:
    text = _Text(rng)
    kinds = [f"You are agent {i}. Use the tools. " + text(250, 400) for i in range(3)]

    def make(at: float) -> Session:
        steps = [Turn(({"role": "user", "content": "Task: " + text(30, 80)},))]
        steps += [Turn(({"role": "user", "content": "Tool output: " + text(80, 400)},), think=rng.uniform(0.2, 1.5))
                  for _ in range(rng.randint(4, 12))]
        return Session(at, rng.choice(kinds), tuple(steps))
    return _sessions(rng, requests, 0.3 * backends, make)


def uniform(rng: random.Random, requests: int, backends: int) -> tuple[Session, ...]:
    text = _Text(rng)

    def make(at: float) -> Session:
        return Session(at, None, (Turn(({"role": "user", "content": text(200, 900)},)),))
    return _sessions(rng, requests, 4.0 * backends, make)


WORKLOADS: dict[str, Callable[[random.Random, int, int], tuple[Session, ...]]] = {
    "multi-turn": multi_turn, "shared-prompt": shared_prompt, "agents": agents, "uniform": uniform}


def generate(name: str, seed: int, requests: int, backends: int) -> Workload:
    """Workload ``name`` of ``requests`` requests for a fleet of ``backends``, drawn from ``seed``."""
    return Workload(name, WORKLOADS[name](random.Random(f"{name}:{seed}"), requests, backends))
