"""The `store` fixture (issue 19): behavioural tests run on both memory stores, and the helpers
read the store in use, not always the local file."""

from __future__ import annotations

from helpers import cli, db_rows, local_rows, write_transcript


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
