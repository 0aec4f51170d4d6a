"""The test helper runs `total-recall` in-process by default (the fast suite's main saving); these
pin that an in-process call answers exactly what the real command-line process answers."""

from __future__ import annotations

import json

import pytest

from helpers import cli, write_transcript

PROJECT = "/home/dev/projects/atlas"


@pytest.fixture
def indexed(tmp_path, isolated_home):
    path = write_transcript(
        tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "s1.jsonl",
        [
            ("user", "Why does the nightly export time out?"),
            ("assistant", "We decided to stream the export in pages of 500 rows instead of one query."),
            ("user", "TODO: add a retry around the S3 upload."),
        ],
        cwd=PROJECT,
        session="s1",
    )
    cli("backfill", str(path), "--wait")
    return path


@pytest.mark.parametrize(
    "args",
    [
        ("search", "export timeout pages", "--json", "--project", PROJECT),
        ("search", "export timeout pages", "--project", PROJECT),
        ("topics", "s1", "--json"),
        ("digest", "--project", PROJECT),
        ("topics", "ffffffff"),  # an error: exit 1 and one line on stderr
        ("search",),  # a usage error from the parser: exit 2
    ],
    ids=["search-json", "search-text", "topics", "digest", "missing-session", "usage"],
)
def test_an_in_process_call_answers_as_the_process_does(indexed, args):
    inside = cli(*args, check=False)
    outside = cli(*args, check=False, process=True)
    assert (inside.returncode, inside.stdout, inside.stderr) == (
        outside.returncode,
        outside.stdout,
        outside.stderr,
    )
    if "--json" in args:
        assert json.loads(inside.stdout)  # not an empty answer compared with another one
