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
