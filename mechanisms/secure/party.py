"""Sans-I/O parties and an in-memory driver.

A party is a state machine that consumes messages and emits messages; it never touches a socket, so the
same code runs under :func:`run_local` (tests, benchmarks) and under a network transport. Its states are
written as a generator (a *program*) that reads like the protocol description: ``yield message`` queues a
message to send, ``incoming = yield from expect(Kind)`` waits for the peer, ``return value`` ends the run
with this party's output. Sub-protocols compose with ``yield from`` (Type 1 = Conversion 3 + Conversion 5
(+ Protocol 2) + Conversion 4), which explicit state enums would make hard to follow.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from mechanisms.errors import SecureProtocolError
from mechanisms.random_source import RandomSource
from mechanisms.secure.messages import Message, decode_message

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")
M = TypeVar("M", bound=Message)


class _Receive:
    """Yielded by a program to wait for the peer's next message."""


RECEIVE = _Receive()
Program = Generator[Message | _Receive, Message | None, T]
Role = Literal["alice", "bob"]
_FLIGHT_DIRECTIONS: tuple[tuple[Role, Role], ...] = (("bob", "alice"), ("alice", "bob"))  # (receiver, sender)


def expect(kind: type[M]) -> Generator[_Receive, Message | None, M]:
    """Wait for the next message and require it to be a ``kind`` (anything else aborts the run)."""
    message = yield RECEIVE
    if not isinstance(message, kind):
        received = type(message).__name__ if message is not None else "nothing"
        raise SecureProtocolError(f"expected {kind.__name__}, received {received}")
    return message


def shuffled(values: list[int], rng: RandomSource) -> tuple[int, ...]:
    """Fisher–Yates with the injected source (``secrets.SystemRandom`` in production)."""
    items = list(values)
    for index in range(len(items) - 1, 0, -1):
        other = rng.randrange(index + 1)
        items[index], items[other] = items[other], items[index]
    return tuple(items)


class Party(ABC, Generic[T]):
    """One side of a two-party protocol: :meth:`start` once, then :meth:`receive` each incoming message.

    Both return the messages to send, in order (possibly none). When :attr:`done`, :attr:`output` holds
    this party's result. A :class:`SecureProtocolError` ends the run for good.
    """

    def __init__(self) -> None:
        self._program: Program[T] | None = None
        self._finished = False
        self._failed = False
        self._output: T | None = None

    @abstractmethod
    def _run(self) -> Program[T]:
        """The protocol, as a program (module docstring)."""

    @property
    def done(self) -> bool:
        return self._finished

    @property
    def output(self) -> T:
        """This party's output; only defined once the run has finished."""
        if not self._finished:
            raise SecureProtocolError(f"{type(self).__name__} has not finished its run")
        return self._output  # type: ignore[return-value]  # set together with _finished

    def start(self) -> tuple[Message, ...]:
        """Begin the run; returns the first messages to send (none if the peer speaks first)."""
        if self._program is not None:
            raise SecureProtocolError(f"{type(self).__name__} was already started")
        self._program = self._run()
        return self._advance(None)

    def receive(self, message: Message) -> tuple[Message, ...]:
        """Consume the peer's next message; returns the messages to send in reply."""
        if self._program is None:
            raise SecureProtocolError(f"{type(self).__name__} received a message before start()")
        if self._failed:
            raise SecureProtocolError(f"{type(self).__name__} aborted earlier and cannot continue")
        if self._finished:
            raise SecureProtocolError(
                f"{type(self).__name__} received {type(message).__name__} after finishing"
            )
        return self._advance(message)

    def _advance(self, incoming: Message | None) -> tuple[Message, ...]:
        assert self._program is not None
        outgoing: list[Message] = []
        try:
            item = self._program.send(incoming)
            while isinstance(item, Message):
                outgoing.append(item)
                item = self._program.send(None)
        except StopIteration as stop:
            self._finished = True
            self._output = stop.value
        except Exception:
            self._failed = True
            raise
        return tuple(outgoing)


@dataclass(frozen=True)
class LocalRun(Generic[A, B]):
    """The outcome of :func:`run_local`: both outputs and what crossed the (simulated) wire."""

    alice_output: A
    bob_output: B
    transcript: tuple[tuple[Role, Message], ...]
    """Every message as received, tagged with its sender, in delivery order."""
    flights: int
    """Maximal runs of messages in one direction (the paper's "communication rounds")."""
    bytes_to_bob: int
    bytes_to_alice: int

    def ciphertexts_from(self, sender: Role) -> int:
        return sum(message.ciphertext_count for role, message in self.transcript if role == sender)

    @property
    def ciphertexts(self) -> int:
        """Total ciphertexts exchanged: 2ℓ + 6 for the optimized Type 1 protocol."""
        return self.ciphertexts_from("alice") + self.ciphertexts_from("bob")


def run_local(alice: Party[A], bob: Party[B]) -> LocalRun[A, B]:
    """Run both parties in this thread, passing every message through its byte encoding.

    Flights alternate: all queued messages go to one side, then its replies go back. Raises
    :class:`SecureProtocolError` if the exchange stops before both parties have finished.
    """
    queues: dict[Role, deque[Message]] = {"bob": deque(alice.start()), "alice": deque(bob.start())}
    parties: dict[Role, Party[A] | Party[B]] = {"alice": alice, "bob": bob}
    transcript: list[tuple[Role, Message]] = []
    sizes: dict[Role, int] = {"alice": 0, "bob": 0}
    flights = 0
    while queues["bob"] or queues["alice"]:
        for receiver, sender in _FLIGHT_DIRECTIONS:
            if not queues[receiver]:
                continue
            flights += 1
            batch = list(queues[receiver])
            queues[receiver].clear()
            for message in batch:
                data = message.to_bytes()
                sizes[receiver] += len(data)
                delivered = decode_message(data)
                transcript.append((sender, delivered))
                queues[sender].extend(parties[receiver].receive(delivered))
    if not (alice.done and bob.done):
        raise SecureProtocolError("the exchange stopped before both parties finished")
    return LocalRun(
        alice_output=alice.output,
        bob_output=bob.output,
        transcript=tuple(transcript),
        flights=flights,
        bytes_to_bob=sizes["bob"],
        bytes_to_alice=sizes["alice"],
    )
