"""What an add puts in the slot tree: one envelope a job (``<id>.json``), or, for the jobs one
batch gives a slot, ``<first-id>.batch.jsonl`` holding their envelopes one a line. The envelope
format and the batch files' layout and limits are here; ``SlotTree.write_many`` writes them.
``.incoming/`` is where adds before batch files staged a big batch's envelopes: doctor clears
what such an add left."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

from ..ids import is_id
from ..model import Job
from ..slots import iso, slot_id

TYPE_CHECKING = False  # `typing` costs each start ~3 ms (awty add imports this); mypy reads True
if TYPE_CHECKING:
    from typing import Any

ENVELOPE_VERSION = 1
MAX_ENVELOPE_BYTES = 64 * 1024
# A batch puts the envelopes of the jobs it adds to one slot in one file: creating a file cost
# 16-75 µs of kernel time here (mostly the inode), more than the rest of a job's add.
BATCH_SUFFIX = ".batch.jsonl"
BATCH_MIN = 2  # jobs of one batch in one slot that get a batch file (one alone: <id>.json)
BATCH_MAX = 10_000  # envelopes in one batch file (a bigger share of a slot: several files)
BATCH_BYTES = 16 * 1024 * 1024  # and bytes: big payloads make smaller files
MAX_BATCH_BYTES = 64 * 1024 * 1024  # a batch file larger is refused (awty writes none)
LINE_HEAD = b'{"v":%d,"id":"' % ENVELOPE_VERSION  # how each line awty writes begins

_QUOTE = json.encoder.encode_basestring_ascii  # json.dumps of a str, without dumps' checks


def _q(text: str | None) -> str:
    return "null" if text is None else _QUOTE(text)


def envelope_bytes(job: Job, isos: dict[datetime, str] | None = None) -> bytes:
    """What the slot tree holds for a job: enough to see (and re-import) it by hand. Built as
    text around the stored payload JSON, which is embedded as-is (no re-parse per job).
    ``isos``: instants already spelled, shared by a batch (its jobs share a few times)."""
    if isos is None:
        first, slot = iso(job.first_check_at), iso(job.next_check_at)
    else:
        first = isos.get(job.first_check_at) or isos.setdefault(job.first_check_at,
                                                                  iso(job.first_check_at))
        slot = isos.get(job.next_check_at) or isos.setdefault(job.next_check_at,
                                                                iso(job.next_check_at))
    head = (f'{{"v":{ENVELOPE_VERSION},"id":"{job.id}","kind":"{job.kind}",'
            f'"target":{_q(job.target)},"entity":{_q(job.entity_name)},'
            f'"key":{_q(job.entity_key)},"first_check_at":"{first}",'
            f'"next_check_at":"{slot}","check_count":{job.check_count},')
    if job.headers:
        head += f'"headers":{json.dumps(job.headers)},'
    return (head + f'"payload":{job.payload_json}}}').encode()


def batch_name_id(name: str) -> str | None:
    """The id a batch file is named by (its first job's), or None for any other name."""
    if name.endswith(BATCH_SUFFIX):
        stem = name[:-len(BATCH_SUFFIX)]
        return stem if is_id(stem) else None
    return None


def known_name(name: str, here: set[str] | dict[str, Any]) -> bool:
    """An envelope (single or batch) named by an id in ``here``."""
    if name.endswith(".json"):
        return name[:-5] in here
    return name.endswith(BATCH_SUFFIX) and name[:-len(BATCH_SUFFIX)] in here


def batch_files(jobs: list[Job],
                isos: dict[datetime, str]) -> Iterator[tuple[str, bytes, int]]:
    """These jobs' envelopes (all of one slot), one a line, as files of at most ``BATCH_MAX``
    lines and ``BATCH_BYTES``, each named ``<first-id>.batch.jsonl`` (the smallest of its ids:
    names sort by time). A file goes once none of its jobs is pending in the slot
    (``SlotTree.settle_batches``, the reconciler, or with the slot's directory when it is
    retired). Yields (name, content, jobs in it)."""
    lines: list[bytes] = []
    ids: list[str] = []
    size = 0
    for j in jobs:
        line = envelope_bytes(j, isos)
        if lines and (len(lines) >= BATCH_MAX or size + len(line) > BATCH_BYTES):
            yield f"{min(ids)}{BATCH_SUFFIX}", b"\n".join(lines) + b"\n", len(ids)
            lines, ids, size = [], [], 0
        lines.append(line)
        ids.append(j.id)
        size += len(line) + 1
    yield f"{min(ids)}{BATCH_SUFFIX}", b"\n".join(lines) + b"\n", len(ids)


def staged(jobs: Iterable[Job]) -> Iterator[tuple[str, str, bytes, int]]:
    """The files of jobs added together, as (slot id, name, content, jobs in it): a slot given
    ``BATCH_MIN`` of them or more gets batch files, a slot given one its ``<id>.json``."""
    isos: dict[datetime, str] = {}
    by_slot: dict[datetime, list[Job]] = {}
    for job in jobs:
        got = by_slot.get(job.next_check_at)
        if got is None:
            by_slot[job.next_check_at] = [job]
        else:
            got.append(job)
    for slot, group in by_slot.items():
        sid = slot_id(slot)
        if len(group) < BATCH_MIN:
            for job in group:
                yield sid, f"{job.id}.json", envelope_bytes(job, isos), 1
        else:
            for name, data, n in batch_files(group, isos):
                yield sid, name, data, n


def incoming_dirs(incoming: Path) -> list[Path]:
    """What adds before batch files left in ``.incoming/`` (for doctor)."""
    try:
        return sorted(incoming.iterdir())
    except FileNotFoundError:
        return []
