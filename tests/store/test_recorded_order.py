"""``rules.in_recorded_order``: a job's executions, some kept on its history rows
(``rules.folds``), read back in the order they were recorded, whatever times they carry."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from awty.model import Answer, Execution
from awty.store import rules

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)

# one life of a job: the answers of its executions in turn (retry: the same check again;
# recheck: the next check), then how it ended: "folded" (its last execution kept on the
# history row), "event" (an execution row), "cancel" (a history row, no execution), or
# "pending" (the last life only: no history row yet)
steps = st.lists(st.sampled_from(["retry", "recheck"]), max_size=4)
lives = st.lists(st.tuples(steps, st.sampled_from(["folded", "event", "cancel"])), max_size=4)


def _x(check: int, attempt: int, n: int) -> Execution:
    # the same time for each: a fixed clock (the order may not come from the times)
    return Execution("J", T0, "202611221000", check, attempt, Answer.RETRY, 503, float(n), None,
                     None, "h", 1)


@settings(max_examples=300, deadline=None)
@given(lives=lives, pending=steps)
def test_executions_come_back_as_recorded(lives, pending) -> None:
    recorded: list[Execution] = []
    events: list[Execution] = []
    ends: list[tuple[int, int, Execution | None]] = []
    for steps_, how in [*lives, (pending, "pending")]:
        checks = attempts = 0  # the job's counters: re-armed by retry, a life starts at 0
        for step in steps_:
            x = _x(checks + 1, attempts + 1, len(recorded))
            recorded.append(x)
            events.append(x)
            checks, attempts = (checks, attempts + 1) if step == "retry" else (checks + 1, 0)
        if how in ("folded", "event"):  # a last execution ended it
            x = _x(checks + 1, attempts + 1, len(recorded))
            recorded.append(x)
            if how == "event":
                events.append(x)
            ends.append((checks + 1, attempts + 1, x if how == "folded" else None))
        elif how == "cancel":
            ends.append((checks, attempts, None))
    assert rules.in_recorded_order(events, ends) == recorded
