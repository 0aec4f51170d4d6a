"""The `store` fixture (issue 19): behavioural tests run on both memory stores, and the helpers
read the store in use, not always the local file."""

from __future__ import annotations

from helpers import cli, cli_json, db_rows, local_rows, write_transcript


def test_the_store_fixture_puts_memories_in_the_store_it_names(tmp_path, store):
    path = write_transcript(
        tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / "s1.jsonl",
        [("user", "We decided to ship the shop on Fridays.")],
        cwd="/home/dev/projects/shop",
    )
    cli("backfill", str(path), "--wait")
    in_store = db_rows("SELECT content FROM ideas")
    assert in_store == [("We decided to ship the shop on Fridays.",)]
    in_file = local_rows("SELECT content FROM ideas")
    assert in_file == (in_store if store == "sqlite" else [])  # PostgreSQL: the file holds no memory
    assert local_rows("SELECT state FROM work_queue") == [("done",)]  # the queue is always the file's


def test_a_second_backfill_finds_the_transcript_already_indexed_in_the_store(tmp_path, store):
    """Where the offsets are (index_state lives with the memories): a PostgreSQL setup once looked in
    the local file, found nothing and queued every transcript again."""
    path = write_transcript(
        tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / "s1.jsonl",
        [("user", "We decided to ship the shop on Fridays.")],
        cwd="/home/dev/projects/shop",
    )
    first = cli_json("backfill", str(path), "--wait")
    assert (first["queued"], first["already_indexed"], first["indexed"]) == (1, 0, 1)
    again = cli_json("backfill", str(path), "--wait")
    assert (again["queued"], again["already_indexed"]) == (0, 1)
    assert local_rows("SELECT count(*) FROM work_queue") == [(1,)]


def test_stats_counts_the_memories_of_the_store_in_use(tmp_path, store):
    """`stats` once counted the local file's memories: zero of everything on PostgreSQL."""
    path = write_transcript(
        tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / "s1.jsonl",
        [("user", "We decided to ship the shop on Fridays."), ("user", "TODO: write the release notes.")],
        cwd="/home/dev/projects/shop",
    )
    cli("backfill", str(path), "--wait")
    stats = cli_json("stats")
    ideas = db_rows("SELECT intent, count(*) FROM ideas GROUP BY intent ORDER BY intent")
    assert stats["ideas"] == sum(n for _, n in ideas) >= 2
    assert {i: n for i, n in stats["ideas_by_intent"].items() if n} == dict(ideas)
    assert stats["open"] == {"questions": 0, "todos": 1, "problems": 0}
    assert (stats["transcripts_indexed"], stats["sessions"], stats["projects"]) == (1, 1, 1)
    assert stats["messages"] == db_rows("SELECT count(*) FROM messages")[0][0] == 2
    assert stats["spans"] == db_rows("SELECT count(*) FROM spans")[0][0] > 0
    assert (stats["queue"]["done"], stats["transcripts_pending"]) == (1, 0)
    assert stats["without_vectors"] == {"ideas": 0, "spans": 0} and stats["vector_search"] is True


def test_the_sqlite_forms_the_storage_code_writes_answer_alike_on_both_stores(tmp_path, store):
    """pg.translate's rewrites, checked by running them: empty IN lists and two-argument max/min
    around a subquery (forget once failed on both on PostgreSQL)."""
    from helpers import db_write

    cli("init")  # the schema, on either store
    db_write(
        ("INSERT INTO files (path) VALUES ('/t.jsonl')", ()),
        *(
            (
                "INSERT INTO ideas (content, content_hash, intent, confidence, file_id, "
                "source_line, project, "
                "created_at, updated_at) VALUES (?, ?, 'decision', 0.8, (SELECT id FROM files), ?, "
                "'p', 0, 0)",
                (f"idea {n}", f"h{n}", n),
            )
            for n in (1, 2, 3)
        ),
    )
    assert db_rows("SELECT count(*) FROM ideas WHERE id IN ()") == [(0,)]
    assert db_rows("SELECT count(*) FROM ideas WHERE content NOT IN ( )") == [(3,)]
    assert db_rows("SELECT max(1, (SELECT count(*) FROM ideas WHERE source_line > ?))", (1,)) == [(2,)]
    assert db_rows(
        "SELECT min(max(source_line, 2), (SELECT max(source_line) FROM ideas)) AS m FROM ideas ORDER BY m"
    ) == [
        (2,),
        (2,),
        (3,),
    ]


def test_records_a_hand_edit_moved_carry_their_memories_on_both_stores(tmp_path, store):
    """A transcript edited by hand (its first line removed) is read again; the records still in it
    keep their memories, moved to their new lines, none stored twice, a forgotten one still forgotten
    (store.move_lines runs the same statements on both stores)."""
    path = write_transcript(
        tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / "s1.jsonl",
        [
            ("user", "We decided to ship the shop on Fridays."),
            ("user", "We decided the invoices go out on Mondays."),
            ("user", "We decided the codename stays bluewhale."),
            ("user", "TODO: write the release notes."),
        ],
        cwd="/home/dev/projects/shop",
    )
    cli("backfill", str(path), "--wait")
    secret = db_rows("SELECT id FROM ideas WHERE content LIKE '%bluewhale%'")[0][0]
    cli("forget", str(secret))
    path.write_text("".join(path.read_text(encoding="utf-8").splitlines(keepends=True)[1:]), encoding="utf-8")
    cli("backfill", str(path), "--wait")
    ideas = db_rows(
        "SELECT source_line, content FROM ideas WHERE content NOT LIKE '%Fridays%' ORDER BY source_line"
    )
    assert ideas == [(1, "We decided the invoices go out on Mondays."), (3, "TODO: write the release notes.")]
    said = db_rows("SELECT source_line, content FROM messages WHERE content != '' ORDER BY source_line")
    assert said == [(1, "We decided the invoices go out on Mondays."), (3, "TODO: write the release notes.")]
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%bluewhale%'") == [(0,)]
    assert db_rows("SELECT source_line FROM tombstones WHERE kind = 'line'") == [(2,)]
    assert db_rows("SELECT source_line FROM chunks ORDER BY source_line") == [(1,), (3,)]


def test_two_memories_that_differ_by_a_value_named_a_secret_later_become_one_on_both_stores(tmp_path, store):
    """Said bare, "Tulip-Gate-8842" and "Kestrel-Moon-5521" made two memories that differ by them
    alone; named secrets in a later read, both are hidden where they were stored, and the two, now the
    same words, are one memory (a unique key on PostgreSQL would have failed the read) (I216)."""
    path = write_transcript(
        tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / "s1.jsonl",
        [
            ("user", "We decided the staging box logs in with Tulip-Gate-8842 from now on."),
            ("user", "We decided the staging box logs in with Kestrel-Moon-5521 from now on."),
        ],
        cwd="/home/dev/projects/shop",
    )
    cli("backfill", str(path), "--wait")
    assert db_rows("SELECT count(*) FROM ideas WHERE content LIKE '%staging box%'") == [(2,)]
    write_transcript(
        path,
        [("user", "DB_PASSWORD=Tulip-Gate-8842 and REDIS_PASSWORD=Kestrel-Moon-5521 are set.")],
        cwd="/home/dev/projects/shop",
        append=True,
    )
    cli("backfill", str(path), "--wait")
    rows = db_rows("SELECT content FROM ideas WHERE content LIKE '%staging box%'")
    assert rows == [("We decided the staging box logs in with [REDACTED:recurring_secret] from now on.",)]
    for value in ("Tulip-Gate-8842", "Kestrel-Moon-5521"):
        assert db_rows("SELECT count(*) FROM messages WHERE content LIKE ?", (f"%{value}%",)) == [(0,)]
