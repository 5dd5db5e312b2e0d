"""The episode state machine. Every state change goes through `fire(event)`; anything not in the
table is refused (and reported), so e.g. a `stop` while idle is harmless."""

from __future__ import annotations

import enum


class State(str, enum.Enum):
    IDLE = "idle"
    RESETTING = "resetting"  # robot reset requested; waiting for its ack and fresh streams
    RUNNING = "running"
    INTERVENED = "intervened"  # a human drives; steps are flagged
    ENDED = "ended"  # last episode finished; behaves like idle
    FAULTED = "faulted"  # e-stop or stale stream; holds the arm until cleared


class Event(str, enum.Enum):
    START = "start"
    RESET_DONE = "reset_done"
    RERECORD = "rerecord"
    INTERVENE = "intervene"
    RELEASE = "release"  # intervention ended
    END = "end"  # stop, success, failure, robot done, max steps
    FAULT = "fault"  # e-stop, stale stream, reset timeout
    CLEAR = "clear"  # operator clears a fault


_ACTIVE = (State.RUNNING, State.INTERVENED)
_TABLE: dict[tuple[State, Event], State] = {
    **{(s, Event.START): State.RESETTING for s in (State.IDLE, State.ENDED, State.FAULTED)},
    (State.RESETTING, Event.RESET_DONE): State.RUNNING,
    (State.RESETTING, Event.END): State.IDLE,
    (State.RUNNING, Event.INTERVENE): State.INTERVENED,
    (State.INTERVENED, Event.RELEASE): State.RUNNING,
    **{(s, Event.RERECORD): State.RESETTING for s in _ACTIVE},
    **{(s, Event.END): State.ENDED for s in _ACTIVE},
    **{(s, Event.FAULT): State.FAULTED for s in (*_ACTIVE, State.RESETTING, State.IDLE, State.ENDED)},
    (State.FAULTED, Event.CLEAR): State.IDLE,
}


class Transition(ValueError):
    pass


class EpisodeStateMachine:
    def __init__(self) -> None:
        self.state = State.IDLE
        self.refused = 0

    @property
    def active(self) -> bool:
        return self.state in _ACTIVE

    def can(self, event: Event) -> bool:
        return (self.state, event) in _TABLE

    def fire(self, event: Event) -> State:
        nxt = _TABLE.get((self.state, event))
        if nxt is None:
            self.refused += 1
            raise Transition(f"{event.value} is not possible while {self.state.value}")
        self.state = nxt
        return nxt
