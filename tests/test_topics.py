"""Topics: names are phrases of the conversation, summaries are statements, idle gaps split."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from conftest import use_copy_of
from helpers import cli, db_rows, write_transcript

WORDS = re.compile(r"[\w.+#/-]+")


def _words(text: str) -> list[str]:
    return [w.lower().strip(".") for w in WORDS.findall(text)]


def _occurs(name: str, text: str) -> bool:
    """The name's words stand next to each other, in order, somewhere in the text."""
    name_words, words = _words(name), _words(text)
    return any(words[i : i + len(name_words)] == name_words for i in range(len(words) - len(name_words) + 1))


def test_fixture_topic_names_are_phrases_of_their_span_and_summaries_carry_no_scores(
    indexed_fixture_transcripts, isolated_home
):
    use_copy_of(indexed_fixture_transcripts[0], isolated_home)  # backfilled once per run (conftest)
    spans = db_rows("SELECT name, summary, source_file, start_line, end_line FROM spans WHERE depth > 0")
    assert spans
    for name, summary, source, start, end in spans:
        said = " ".join(
            r[0]
            for r in db_rows(
                "SELECT content FROM messages WHERE file_id = (SELECT id FROM files WHERE path = "
                "?) AND source_line BETWEEN ? AND ?",
                (source, start, end),
            )
        )
        assert _occurs(name, said), (name, source)
        assert "span at" not in name.lower()
        assert not re.search(r"similarity|\b\d\.\d\d\b.*between|score", summary, re.I), summary


def test_a_two_hour_pause_inside_a_session_starts_a_new_topic(tmp_path, store):
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / "s1.jsonl"
    start = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
    write_transcript(
        path,
        [
            ("user", "The Redis session cache expires entries after ten minutes."),
            ("assistant", "The Redis session cache uses a ten minute expiry on every key."),
            ("user", "We decided to keep the Redis session cache for logged-in users."),
        ],
        cwd="/home/dev/projects/shop",
        start=start,
    )
    write_transcript(
        path,
        [
            ("user", "The Redis session cache also stores the shopping basket."),
            ("assistant", "Then the Redis session cache must survive restarts."),
        ],
        cwd="/home/dev/projects/shop",
        start=start + timedelta(hours=2),
        append=True,
    )
    cli("backfill", str(path), "--wait")
    topics = db_rows("SELECT start_line, closed FROM spans WHERE depth = 1 ORDER BY start_line")
    assert [t[0] for t in topics] == [1, 4], topics
    assert topics[0][1] == 1
    later = db_rows(
        "SELECT s.start_line FROM ideas i JOIN spans s ON s.id = i.span_id WHERE i.source_line = 4"
    )
    assert later == [(4,)]
