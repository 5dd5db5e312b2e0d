"""The control loop: at each tick, align the streams, run the watchdog, pick the action (human
takeover, else policy), limit and publish it, and hand the step to the recorder.

Step k holds the observation aligned at tick k and the action published at tick k; its reward,
success and done are filled at tick k+1 (or at the episode end), when the robot's success
signal for that action can have arrived. Input callbacks (core/topics.py) only set fields or queue commands;
all state changes happen on the loop thread.
"""

from __future__ import annotations

import logging
import queue
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from robot_bridge.core.limits import ActionLimiter, ActionScale
from robot_bridge.core.policy_source import PolicySource
from robot_bridge.core.recorder import Recorder
from robot_bridge.core.state import EpisodeStateMachine, Event, State
from robot_bridge.core.streams import StreamInput, TopicCounters
from robot_bridge.core.topics import TopicInputs
from robot_bridge.profile import RobotProfile

if TYPE_CHECKING:
    from robot_bridge.core.search_source import SearchSource

log = logging.getLogger(__name__)
RESEND_RESET_NS = 1_000_000_000


@dataclass
class Outputs:
    action: Callable[[np.ndarray], None]
    robot_command: Callable[[dict], None]
    status: Callable[[dict], None]


class Controller(TopicInputs):
    def __init__(self, profile: RobotProfile, inputs: dict[str, StreamInput], out: Outputs,
                 recorder: Recorder, policy: PolicySource, search: SearchSource | None = None):
        self.p, self.inputs, self.out, self.recorder, self.policy = profile, inputs, out, recorder, policy
        self.search = search  # Best-of-N in the world model (episode.search), None when off
        self.sm = EpisodeStateMachine()
        self.limiter = ActionLimiter(profile.action)  # in arm units
        self.scale = ActionScale(profile.action)  # the policy's [-1, 1] <-> the arm's [low, high]
        self._policy_hold = self.scale.to_policy(self.limiter.hold)  # what holds, in the policy's units
        self._action_msg = profile.action_mapping()  # intervention messages -> action vectors
        self.counters = {t: TopicCounters() for t in ("command", "estop", "intervention", "robot_event", "success")}
        self._commands: queue.Queue = queue.Queue()
        self.estop = False
        self._intervention: tuple[np.ndarray, int] | None = None
        self._success: tuple[bool, int] = (False, 0)
        self._reset_done: tuple[int, int] | None = None  # (reset_id, stamp_ns)
        self._reset_id = 0
        self._reset_t0 = self._reset_sent = 0
        self._home_since: int | None = None  # when the arm came within tolerance of home
        self._home_err = float("inf")
        self.fault: str | None = None
        self._fresh_since: int | None = None  # faulted: since when every required stream is fresh again
        self._budget_logged = False
        self._lag_wait_since: int | None = None  # waiting for the learner (max_policy_lag_steps) since
        self._next_learner_look, self._learner_steps = 0, None  # the newest policy's real_steps, once a second
        self.lag_waits, self.lag_wait_s = 0, 0.0  # episodes that waited for it, and the seconds they waited
        self.recoveries = 0  # faults ended by fresh streams (auto_start), not by the operator
        self.last_outcome: str | None = None
        self.refused: deque[str] = deque(maxlen=5)
        self.periods_ms: deque[float] = deque(maxlen=2000)
        self.overruns = 0
        self._next_status = 0
        self._next_policy_look = 0
        self._ep_start = 0
        self.steps = 0
        self._pending: dict | None = None
        self._pending_recv = 0
        self._ages: dict[str, list[float]] = {}
        self._specs = profile.obs_specs()
        self._required_keys = {s.key for s in profile.streams if s.required}
        self.status_extra: Callable[[], dict] | None = None  # e.g. the transport's QoS events

    # -- the loop --------------------------------------------------------------------------------
    def run(self, stop, on_tick: Callable[[], None] | None = None) -> None:
        period = 1.0 / self.p.control_rate_hz
        deadline = last = time.monotonic()
        while not stop.is_set():
            start = time.monotonic()
            self.periods_ms.append((start - last) * 1e3)
            last = start
            self.tick(time.time_ns())
            if on_tick is not None:
                on_tick()
            deadline += period
            delay = deadline - time.monotonic()
            if delay < 0:
                self.overruns += 1
                deadline = time.monotonic()
            else:
                time.sleep(delay)

    def tick(self, now: int) -> None:
        while not self._commands.empty():
            self._command(self._commands.get_nowait(), now)
        if self.estop and self.sm.state != State.FAULTED:
            self._fault("estop", now)
        if (
            self.p.episode.auto_start
            and self.sm.can(Event.START)
            and (self.sm.state != State.FAULTED or self._recovered(now))
            and not self._stale(now)
            and self._have_policy(now)
            and not self._budget_spent()
            and self._learner_caught_up(now)
        ):
            self._command({"cmd": "start"}, now)
        state = self.sm.state
        if state == State.RESETTING:
            self._tick_resetting(now)
        elif self.sm.active:
            self._tick_active(now)
        elif state == State.FAULTED:
            self.out.action(self.limiter.hold)
        if now >= self._next_status:
            self._next_status = now + int(1e9 / self.p.status_rate_hz)
            self.out.status(self.status(now))

    def _recovered(self, now: int) -> bool:
        """Unattended only: a fault other than the e-stop is over once every required stream has been
        fresh for `episode.fault_recover_s` (a sensor that stalled and came back). The e-stop, even
        released, always waits for the operator."""
        wait_s = self.p.episode.fault_recover_s
        if wait_s is None or self.estop or self.fault == "estop" or self._stale(now):
            self._fresh_since = None
            return False
        if self._fresh_since is None:
            self._fresh_since = now
        if now - self._fresh_since < wait_s * 1e9:
            return False
        log.warning("recovering from the fault (%s): every stream fresh for %.1f s", self.fault, wait_s)
        self._fresh_since = None
        self.recoveries += 1
        return True

    def _budget_spent(self) -> bool:
        """Unattended episodes stop once the group holds `episode.auto_start_steps` committed steps
        (the run's real-step budget: real robot time is the scarce thing). Until the recorder has
        settled the last episode the count is not known, so the next start waits for it."""
        limit = self.p.episode.auto_start_steps
        if limit is None:
            return False
        if not self.recorder.settled:
            return True
        spent = self.recorder.group_steps >= limit
        if spent and not self._budget_logged:
            self._budget_logged = True
            log.info("step budget reached: %d committed steps in %s (auto_start_steps %d); no new episodes start "
                     "on their own", self.recorder.group_steps, self.p.episode.group, limit)
        return spent

    def policy_lag(self) -> int | None:
        """Committed steps of the group beyond those the loaded policy was trained on (None: not known)."""
        trained = self.policy.trained_steps
        return None if trained is None else max(0, self.recorder.group_steps - trained)

    def _learner_caught_up(self, now: int) -> bool:
        """`episode.max_policy_lag_steps`: an unattended episode starts only once the learner has learnt
        from all but that many of the committed steps (its newest published policy says how many it had,
        looked up at most once a second); until then the arm waits at its reset pose."""
        limit = self.p.episode.max_policy_lag_steps
        if limit is None:
            return True
        if not self.recorder.settled:
            return False  # the last episode's steps are not counted yet
        if now >= self._next_learner_look:
            self._next_learner_look = now + 1_000_000_000
            self._learner_steps = self.policy.learner_steps()
        trained = self._learner_steps
        lag = None if trained is None else self.recorder.group_steps - trained
        if lag is None or lag <= limit:
            if self._lag_wait_since is not None:
                self.lag_wait_s += (now - self._lag_wait_since) / 1e9
                self._lag_wait_since = None
            return True
        if self._lag_wait_since is None:
            self._lag_wait_since = now
            self.lag_waits += 1
            log.info("waiting for the learner: %d committed steps not yet learnt from by the newest policy "
                     "(max_policy_lag_steps %d)", lag, limit)
        return False

    def _have_policy(self, now: int) -> bool:
        """Unattended episodes wait for the first exported policy (looked for once a second):
        an episode of held actions teaches the learner nothing."""
        if self.policy.actor is not None:
            return True
        if now >= self._next_policy_look:
            self._next_policy_look = now + 1_000_000_000
            self.policy.refresh()
        return self.policy.actor is not None

    # -- commands and transitions ----------------------------------------------------------------
    def _command(self, cmd: dict, now: int) -> None:
        name = cmd["cmd"]
        if name == "start":
            stale = self._stale(now)
            if self.sm.state == State.FAULTED and (self.estop or stale):
                return self._refuse(f"start refused: {'e-stop engaged' if self.estop else 'stale ' + ','.join(stale)}")
            if not self.sm.can(Event.START):
                return self._refuse(f"start refused while {self.sm.state.value}")
            self.policy.refresh()  # the only place a new policy can come in
            self.policy.explore_scale = self.p.episode.explore_scale_at(self.recorder.group_steps)
            if self.search is not None:  # and a new world model; the search's step time is measured here
                self.search.refresh(self.policy.actor)
            self.sm.fire(Event.START)
            self.fault = None
            self._request_reset(now)
        elif name in ("stop", "success", "failure"):
            if self.sm.active:
                self._finish(name, Event.END, now)
            elif self.sm.state == State.RESETTING and name == "stop":
                self.sm.fire(Event.END)
            else:
                self._refuse(f"{name} refused while {self.sm.state.value}")
        elif name == "rerecord":
            if not self.sm.active:
                return self._refuse(f"rerecord refused while {self.sm.state.value}")
            self._pending = None
            self.recorder.end(False, {})
            if self.search is not None:
                self.search.end()
            self.last_outcome = "rerecorded"
            self.sm.fire(Event.RERECORD)
            self._request_reset(now)
        elif name == "clear_fault":
            if self.sm.state != State.FAULTED or self.estop:
                return self._refuse("clear_fault refused: " + ("e-stop engaged" if self.estop else "not faulted"))
            self.sm.fire(Event.CLEAR)
            self.fault = None

    def _refuse(self, why: str) -> None:
        log.warning(why)
        self.refused.append(why)

    def _request_reset(self, now: int) -> None:
        self._reset_id += 1
        self._reset_t0 = now
        self._home_since, self._home_err = None, float("inf")
        if self.p.reset.strategy == "handshake":
            self._send_reset(now)

    def _send_reset(self, now: int) -> None:
        self._reset_sent = now
        self.out.robot_command({"cmd": "reset", "reset_id": self._reset_id, "episode": self.recorder.next_episode_id})

    def _fault(self, reason: str, now: int) -> None:
        log.error("fault: %s", reason)
        if self.sm.active:
            self._finish("faulted", Event.FAULT, now)
        else:
            self.sm.fire(Event.FAULT)
        self.fault = reason
        self.out.action(self.limiter.hold)

    def _tick_resetting(self, now: int) -> None:
        if now - self._reset_t0 > self.p.episode.reset_timeout_s * 1e9:
            return self._fault(self._reset_cause(now), now)
        strategy = self.p.reset.strategy
        if strategy == "handshake":
            done = self._reset_done
            if done is None or done[0] != self._reset_id:
                if now - self._reset_sent > RESEND_RESET_NS:  # the robot may not have matched us yet
                    self._send_reset(now)
                return
            fresh_after = done[1]
        elif strategy == "home":
            if not self._tick_home(now):
                return
            fresh_after = self._home_since
        else:  # operator: the scene is reset; begin once every required stream is fresh
            if self._stale(now):
                return
            fresh_after = 0
        for key, inp in self.inputs.items():  # wait for data from after the reset
            s = inp.buffer.latest()
            if self._required(key) and (s is None or s.stamp_ns < fresh_after):
                return
        self.sm.fire(Event.RESET_DONE)
        self._ep_start, self.steps, self._pending = now, 0, None
        self._ages = {k: [] for k in self.inputs}
        # a takeover from before the reset is over; one received since (a person driving a
        # demonstration from its first step) counts, within intervention_timeout_ms as always
        if self._intervention is not None and self._intervention[1] < self._reset_t0:
            self._intervention = None
        self.limiter.reset()
        self.recorder.begin()
        if self.search is not None:
            self.search.begin()
        self._tick_active(now)

    def _tick_home(self, now: int) -> bool:
        """One step of the `home` reset; True once the arm has been within tolerance for settle_s."""
        home = self.p.reset.home
        inp = self.inputs.get(home.key)
        s = inp.buffer.latest() if inp is not None else None
        if s is None or now - s.stamp_ns > self.p.staleness_ms * 1e6:
            self.out.action(self.limiter.hold)
            return False
        n = len(home.pose)
        idx = home.indices or list(range(n))
        aidx = home.action_indices or list(range(n))
        err = np.asarray(home.pose, np.float32) - np.asarray(s.value, np.float32)[idx]
        self._home_err = float(np.abs(err).max())
        if self._home_err <= home.tolerance:
            if self._home_since is None:
                self._home_since = now
            self.out.action(self.limiter(self.limiter.hold))
            return now - self._home_since >= home.settle_s * 1e9
        self._home_since = None
        a = np.array(self.limiter.hold, np.float32)
        a[aidx] = home.gain * err if home.mode == "delta" else np.asarray(home.pose, np.float32)
        self.out.action(self.limiter(a))
        return False

    # -- fault causes --------------------------------------------------------------------------------
    def _stream_cause(self, key: str, now: int) -> str:
        """Why a required stream has no usable recent sample, in words."""
        inp = self.inputs[key]
        topic = self.p.topic_of(key)
        what = "frame" if key.startswith("image_") else "message"
        s, rej = inp.buffer.latest(), inp.last_reject
        if rej is not None and (s is None or rej[1] > s.recv_ns):
            return f"no valid {what} on {topic}: {rej[0]}"
        if inp.counters.received == 0:
            extra = self.status_extra() if self.status_extra is not None else {}
            ev = extra.get("qos_events", {}).get(topic, {})
            if ev.get("incompatible_qos"):
                return f"no {what} on {topic}: QoS mismatch (the publisher's QoS does not match the profile's)"
            return f"no {what} on {topic} (is the driver publishing it? check topic name and QoS)"
        age = (now - s.stamp_ns) / 1e6 if s is not None else float("inf")
        return f"{topic} silent for {age:.0f} ms (stamp age; the profile allows {self.p.staleness_ms:.0f} ms)"

    def _reset_cause(self, now: int) -> str:
        """The fault when a reset did not finish in time: a stream's cause first, else the strategy's."""
        stale = self._stale(now)
        if stale:
            return self._stream_cause(stale[0], now)
        limit = self.p.episode.reset_timeout_s
        strategy = self.p.reset.strategy
        if strategy == "handshake":
            return (f"reset_timeout: no reset_done for reset {self._reset_id} on {self.p.control.robot_event} "
                    f"within {limit:g} s (the robot must answer {self.p.control.robot_command})")
        if strategy == "home":
            home = self.p.reset.home
            return (f"home_timeout: {home.key} still {self._home_err:.3g} from home (tolerance {home.tolerance:g}) "
                    f"after {limit:g} s")
        return f"reset_timeout: streams not fresh within {limit:g} s"

    # -- one step of an episode -------------------------------------------------------------------
    def _required(self, key: str) -> bool:
        return key in self._required_keys

    def _stale(self, now: int) -> list[str]:
        limit = self.p.staleness_ms * 1e6
        out = []
        for key, inp in self.inputs.items():
            s = inp.buffer.latest()
            if self._required(key) and (s is None or now - s.stamp_ns > limit):
                out.append(key)
        return out

    def _observe(self, now: int) -> tuple[dict[str, np.ndarray], int]:
        obs, newest = {}, 0
        for key, inp in self.inputs.items():
            s = inp.buffer.at(now)
            if s is None:  # only optional streams get here (required ones fault first)
                spec = self._specs[key]
                obs[key] = np.zeros(spec.shape, spec.np_dtype)
                continue
            obs[key] = s.value
            newest = max(newest, s.recv_ns)
            self._ages[key].append((now - s.stamp_ns) / 1e6)
        return obs, newest or now

    def _tick_active(self, now: int) -> None:
        success = self._success[0] and self._success[1] > self._ep_start
        if self._pending is not None:
            self._pending["success"], self._pending["reward"] = success, float(success)
        stale = self._stale(now)
        if stale:
            return self._fault("stale:" + ",".join(stale) + ": " + self._stream_cause(stale[0], now), now)
        if success and self.p.episode.end_on_success:
            return self._finish("success", Event.END, now)
        if self.steps >= self.p.episode.max_steps:
            return self._finish("max_steps", Event.END, now)
        obs, newest = self._observe(now)
        iv = self._intervention
        human = iv is not None and now - iv[1] < self.p.episode.intervention_timeout_ms * 1e6
        if human and self.sm.state == State.RUNNING:
            self.sm.fire(Event.INTERVENE)
        elif not human and self.sm.state == State.INTERVENED:
            self.sm.fire(Event.RELEASE)
        # the policy (and the search) act in [-1, 1], the human in arm units; the limits apply in arm
        # units, to what is sent; the store keeps the normalised action (what the learner trains on)
        if human:
            sent = self.limiter(iv[0])
            action = self.scale.to_policy(sent)
        else:
            if self.search is not None and self.search.active:
                raw = self.search.act(obs)
            else:
                raw = self.policy.act(obs, self._policy_hold)
            arm = self.scale.to_arm(raw)
            sent = self.limiter(arm)
            # unchanged by the limits: the policy's own action, bit for bit; else the normalised one sent
            same = np.array_equal(sent, arm)
            action = np.asarray(raw, np.float32).reshape(-1) if same else self.scale.to_policy(sent)
        self.out.action(sent)
        if self.search is not None:  # the imagined futures start from what was sent
            self.search.record(obs, action)
        self._flush_pending()
        self._pending = {**obs, "action": action, "reward": 0.0, "done": False, "intervention": human, "success": False}
        self._pending_recv = newest
        self.steps += 1

    def _flush_pending(self) -> None:
        if self._pending is not None:
            self.recorder.step(self._pending, self._pending_recv)
            self._pending = None

    def _finish(self, outcome: str, event: Event, now: int) -> None:
        if self._pending is not None:
            if outcome == "success":
                self._pending.update(success=True, reward=1.0, done=True)
            self._flush_pending()
        keep = outcome != "faulted" or self.p.episode.keep_faulted
        meta = {
            "domain": self.p.episode.domain,
            "policy_version": self.policy.version,
            "terminated": outcome == "success",
            "extra": {
                "outcome": outcome,
                "complete": outcome != "faulted",
                "profile": self.p.name,
                "control_rate_hz": self.p.control_rate_hz,
                "t0_ns": self._ep_start,
                "reset_id": self._reset_id,
                "age_ms": {k: _summary(v) for k, v in self._ages.items()},
            },
        }
        if self.search is not None:
            meta["extra"]["search"] = self.search.end()
        if outcome in ("success", "failure"):
            meta["success"] = outcome == "success"
        elif outcome == "max_steps" and self.p.episode.max_steps_failure:
            meta["success"] = False
        if self.steps:
            self.recorder.end(keep, meta)
        else:
            self.recorder.end(False, meta)
        self.last_outcome = outcome
        self.sm.fire(event)
        self.out.action(self.limiter.hold)

    def abandon(self, now: int) -> None:
        """End the open episode without keeping it (`demos record` on quit: an attempt cut short is
        no demonstration)."""
        if not self.sm.active:
            return
        self._pending = None
        self.recorder.end(False, {})
        if self.search is not None:
            self.search.end()
        self.last_outcome = "abandoned"
        self.sm.fire(Event.END)
        self.out.action(self.limiter.hold)

    # -- status ------------------------------------------------------------------------------------
    def _jitter_ms(self) -> np.ndarray:
        periods = np.asarray(list(self.periods_ms), float)  # list(): one atomic copy (the loop appends)
        nominal = 1e3 / self.p.control_rate_hz
        return np.abs(periods[1:] - nominal) if periods.size > 1 else np.zeros(1)

    def robot_figures(self, now: int) -> dict:
        """What the dashboard's robot panel shows: safe to call from another thread."""
        recent = list(self.periods_ms)[-50:]
        newest = [s.recv_ns for k, inp in self.inputs.items() if self._required(k) and (s := inp.buffer.latest())]
        stale = self._stale(now)
        return {
            # the stalest required stream's newest sample: what the next action is computed from
            "obs_age_s": round((now - min(newest)) / 1e9, 3) if newest else None,
            "control_hz": round(1e3 / float(np.mean(recent[1:])), 2) if len(recent) > 2 else None,
            "jitter_p99_ms": round(float(np.percentile(self._jitter_ms(), 99)), 3),
            "policy_version": self.policy.version,
            "policy_lag_steps": self.policy_lag(),
            "learner_wait_s": round(self.lag_wait_s, 1),
            "fault": self.fault,
            "stale_causes": {k: self._stream_cause(k, now) for k in stale},
        }

    def status(self, now: int) -> dict:
        jitter = self._jitter_ms()
        rs = self.recorder.stats
        extra = self.status_extra() if self.status_extra is not None else {}
        return extra | {
            "stamp_ns": now,
            "state": self.sm.state.value,
            "fault": self.fault,
            "recoveries": self.recoveries,
            "reset": self.p.reset.strategy,
            "estop": self.estop,
            "step": self.steps,
            "last_outcome": self.last_outcome,
            "policy_version": self.policy.version,
            "policy_error": self.policy.error,
            "policy_lag_steps": self.policy_lag(),
            "explore_scale": self.policy.explore_scale if self.p.episode.explore else None,
            "learner_waits": {"episodes": self.lag_waits, "seconds": round(self.lag_wait_s, 1),
                              "waiting": self._lag_wait_since is not None},
            "episodes": {"committed": rs.committed, "discarded": rs.discarded, "spoiled": rs.spoiled,
                         "overruns": rs.overruns, "last": rs.last_episode},
            "recorder_backlog": self.recorder.backlog,
            "stale": (stale := self._stale(now)),
            "stale_causes": {k: self._stream_cause(k, now) for k in stale},
            "topics": {inp.key: inp.counters.as_dict() for inp in self.inputs.values()}
            | {k: c.as_dict() for k, c in self.counters.items()},
            "actions": {"clipped": self.limiter.clipped, "non_finite": self.limiter.non_finite},
            "loop": {"jitter_p99_ms": round(float(np.percentile(jitter, 99)), 3), "overruns": self.overruns},
            "search": self.search.status() if self.search is not None else None,
            "refused": list(self.refused),
        }


def _summary(ages: list[float]) -> dict:
    if not ages:
        return {}
    a = np.asarray(ages)
    return {
        "p50": round(float(np.median(a)), 2),
        "p99": round(float(np.percentile(a, 99)), 2),
        "max": round(float(a.max()), 2),
    }
