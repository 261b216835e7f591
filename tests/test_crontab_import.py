"""Reading a crontab for ``schedule import-crontab`` (awty/crontab_import.py), on a realistic
crontab (tests/data/crontab.sample): comments, variables, shorthands, ranges, steps, names, and
the lines that cannot be carried over, each with its reason."""

from pathlib import Path

import pytest

from awty.crontab_import import Entry, name_for, read_crontab

SAMPLE = (Path(__file__).parent / "data" / "crontab.sample").read_text()
ENV = {"MAILTO": "ops@example.com", "PATH": "/usr/local/bin:/usr/bin:/bin"}


def bash(command):
    import shlex

    return f"exec /bin/bash -c {shlex.quote(command)}"


def test_the_sample_becomes_these_schedules():
    entries, _ = read_crontab(SAMPLE)
    assert [(e.line, e.name, e.cron, e.zone) for e in entries] == [
        (10, "backup-db", "30 2 * * *", "Europe/Berlin"),
        (11, "find", "45 2 * * *", "Europe/Berlin"),
        (12, "manage-clearsessions", "*/15 * * * *", "Europe/Berlin"),
        (13, "curl-hc-ping-com", "0 9-17/2 * * mon-fri", "Europe/Berlin"),
        (14, "rotate-uploads", "0 0 * * *", "Europe/Berlin"),
        (15, "artisan-queue-prune-failed", "0 0 * * 0", "Europe/Berlin"),
        (16, "rotate-keys", "0 0 1 jan,jul *", "Europe/Berlin"),
        (19, "report", "55 23 * * *", "Europe/Berlin"),
        (25, "curl-hc-ping-com-2", "0 12 * * *", "UTC"),
        (26, "curl-hc-ping-com-3", "0 13 * * *", "UTC"),
    ]
    assert all(e.env == ENV for e in entries)
    by_line = {e.line: e for e in entries}
    # SHELL=/bin/bash is kept by running bash from sh; \% is cron's plain percent sign
    assert by_line[10].command == bash(
        "/usr/local/bin/backup-db.sh --full > /var/log/backup.log 2>&1")
    assert by_line[19].command == bash('/usr/local/bin/report --date "$(date +%F)"')


def test_the_lines_it_cannot_carry_are_named_with_their_reason():
    _, refused = read_crontab(SAMPLE)
    assert [(r.line, r.reason.split(":")[0]) for r in refused] == [
        (20, "a % in the command"),
        (21, "@reboot runs at boot, not on a schedule"),
        (22, "six time fields (a seconds field)"),
        (23, "cron"),
        (27, "awty's own line (it stays in cron)"),
    ]
    assert refused[3].reason == ("cron: day of week field 'mond' in '0 9 * * mond': 'mond' is "
                                 "not a day of week (sun, mon, tue, wed, thu, fri, sat or 0-7)")
    assert refused[0].text == '5 4 * * sun  echo "weekly" | mail -s "cron %s" ops@example.com'


def test_every_line_is_a_schedule_a_refusal_or_not_an_entry():
    entries, refused = read_crontab(SAMPLE)
    lines = SAMPLE.splitlines()
    seen = {e.line for e in entries} | {r.line for r in refused}
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if n not in seen:
            assert not s or s.startswith("#") or "=" in s.split()[0], (n, line)


def test_variables_apply_to_the_lines_after_them_only():
    text = ("0 1 * * * first\nA=1\n0 2 * * * second\nA = 'two words'\nB=\"x\"\n"
            "0 3 * * * third\n")
    entries, refused = read_crontab(text)
    assert refused == []
    assert [(e.name, e.env) for e in entries] == [
        ("first", {}), ("second", {"A": "1"}), ("third", {"A": "two words", "B": "x"})]
    assert [e.command for e in entries] == ["first", "second", "third"]  # SHELL unset: sh


def test_cron_tz_and_shell_are_not_environment():
    entries, refused = read_crontab("CRON_TZ=America/New_York\nSHELL=/bin/sh\n0 9 * * * a\n"
                                    "CRON_TZ=Nowhere/Land\n0 9 * * * b\nCRON_TZ=\n0 9 * * * c\n")
    assert [(e.zone, e.env, e.command) for e in entries] == [
        ("America/New_York", {}, "a"), ("America/New_York", {}, "b"), (None, {}, "c")]
    assert [(r.line, r.reason) for r in refused] == [
        (4, "CRON_TZ: unknown time zone 'Nowhere/Land'; the lines after it keep the zone before")]


def test_names_are_unique_stable_and_avoid_existing_ones():
    text = "@hourly /opt/sync.sh\n@daily /opt/sync.sh\n@weekly /opt/sync.sh --full\n"
    first, _ = read_crontab(text)
    assert [e.name for e in first] == ["sync", "sync-2", "sync-3"]
    again, _ = read_crontab(text)
    assert again == first
    taken, _ = read_crontab(text, taken={"sync", "sync-3"})
    assert [e.name for e in taken] == ["sync-2", "sync-4", "sync-5"]


@pytest.mark.parametrize("line, reason", [
    ("@reboot /usr/bin/warm", "@reboot runs at boot"),
    ("@every 5m /usr/bin/x", "cron: unknown shorthand '@every'"),
    ("0 * * * * * /usr/bin/x", "six time fields"),
    ("*/10 0 * * * * /usr/bin/x", "six time fields"),
    ("0 9 * * * date +%s", "a % in the command"),
    ("0 9 * * *", "not a crontab entry"),
    ("0 9 * *", "not a crontab entry"),
    ("61 9 * * * x", "cron: minute field '61'"),
    ("0 9 * * 5#2 x", "cron: day of week field '5#2'"),
    ("@daily", "no command"),
])
def test_refusals(line, reason):
    entries, refused = read_crontab(line + "\n")
    assert entries == [] and len(refused) == 1
    assert refused[0].reason.startswith(reason), refused[0].reason


def test_a_command_that_looks_like_a_sixth_field_only_when_it_is_one():
    entries, refused = read_crontab("0 9 * * * 7z a /b/backup.7z /srv\n0 9 * * * 2>&1 x\n")
    assert refused == [] and [e.command for e in entries] == [
        "7z a /b/backup.7z /srv", "2>&1 x"]


def test_entries_are_records():
    entries, _ = read_crontab("@hourly /opt/x\n")
    assert entries == [Entry(1, "x", "0 * * * *", "/opt/x", None, {})]


@pytest.mark.parametrize("command, name", [
    ("/usr/local/bin/backup-db.sh --full > /dev/null 2>&1", "backup-db"),
    ("cd /srv/app && ./manage.py clearsessions", "manage-clearsessions"),
    ("python3 /srv/app/manage.py clearsessions", "manage-clearsessions"),
    ("php /var/www/artisan schedule:run >> /dev/null 2>&1", "artisan-schedule-run"),
    ("curl -fsS -m 10 --retry 5 -o /dev/null https://hc-ping.com/2f9c", "curl-hc-ping-com"),
    ("flock -n /tmp/x.lock /usr/bin/rsync -a /a /b", "rsync"),
    ("nice -n 19 ionice -c3 /usr/bin/find /tmp -mtime +7 -delete", "find"),
    ("PATH=/x:$PATH timeout 5m /opt/sync.py", "sync"),
    ("python3 -m myapp.tasks cleanup", "myapp-tasks-cleanup"),
    ("/bin/bash -lc 'source ~/.env && run-me'", "run-me"),
    ("sleep 30; /usr/bin/backup", "backup"),
    ("pg_dump mydb|gzip>/b/db.gz", "pg-dump-mydb"),
    ("'unterminated", "unterminated"),
    (">/dev/null", "job"),
])
def test_names_from_commands(command, name):
    assert name_for(command) == name
