"""A batch's rows as add_many inserts them (``job_to_row`` with a batch's spelled instants,
``insert_job_rows`` leaving out the columns None in every row, multi-row VALUES) are the rows
one plain ``INSERT_JOB`` of each job's ``job_to_row`` stores: whatever fields the jobs hold,
and whichever columns are empty in all of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awty.model import Job, Kind, Status
from awty.store.sqlite_rows import INSERT_JOB, Isos, insert_job_rows, job_to_row

T = datetime(2030, 1, 1, tzinfo=UTC)
# one instant in two zones; a year iso() pads
TIMES = st.sampled_from([T, T + timedelta(minutes=15), T.astimezone(timezone(timedelta(hours=2))),
                         datetime(272, 5, 4, tzinfo=UTC)])


def maybe(s):
    return st.none() | s


@st.composite
def jobs(draw):
    n = draw(st.integers(1, 12))
    out, fps = [], []
    for i in range(n):
        own = draw(st.booleans())
        out.append(Job(
            f"01JD4X{i:020d}", draw(st.sampled_from(list(Kind))), "https://example.com/",
            draw(st.sampled_from(['{"a":1}', "null", '"x"'])),
            draw(st.sampled_from([{}, {"X-A": "1"}])), draw(maybe(st.just("order"))),
            draw(maybe(st.sampled_from(["1", "", "é"]))), draw(TIMES), draw(TIMES),
            draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(st.sampled_from(list(Status))),
            draw(maybe(st.integers(0, 5))), draw(maybe(st.sampled_from([1.5, 60.0]))),
            draw(maybe(st.sampled_from([0.1, 30.0]))), draw(maybe(st.integers(1, 5))),
            draw(maybe(st.sampled_from([7.0, 300.0]))), f"key-{i}" if own else None,
            draw(maybe(st.sampled_from(["/tmp", ""]))), draw(TIMES), draw(TIMES),
            draw(maybe(st.sampled_from(["boom", ""]))), draw(maybe(st.just("host:1:x"))),
            draw(maybe(TIMES)), draw(maybe(TIMES)),
            draw(maybe(st.sampled_from([{}, {"PATH": "/bin"}]))),
            f"sched-{i}" if draw(st.booleans()) else None, draw(maybe(TIMES)),
        ))
        fps.append(draw(st.sampled_from(["fp", None])) if own else None)
    return out, fps


def _stored(conn, insert):
    conn.execute("BEGIN")
    try:
        insert(conn)
        return conn.execute("SELECT * FROM future_job ORDER BY rowid").fetchall()
    finally:
        conn.execute("ROLLBACK")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(jobs())
def test_a_batch_is_stored_as_each_row_alone(awty, batch):
    js, fps = batch
    conn = awty.store.conn
    isos = Isos()
    batched = _stored(conn, lambda c: insert_job_rows(c, [job_to_row(j, f, isos)
                                                         for j, f in zip(js, fps)]))
    alone = _stored(conn, lambda c: c.executemany(INSERT_JOB, [job_to_row(j, f)
                                                              for j, f in zip(js, fps)]))
    assert len(batched) == len(js)
    assert batched == alone
