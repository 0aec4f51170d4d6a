"""The test helper runs `total-recall` in-process by default (the fast suite's main saving); these
pin that an in-process call answers exactly what the real command-line process answers."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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


# Tokens of a `search` command line: the options cli.plain_search reads, values, words, and what it
# leaves to argparse (help, abbreviations, --opt=value, unknown options, words starting with "-").
SEARCH_TOKENS = st.one_of(
    st.sampled_from(
        ["--json", "--all-projects", "--hyde", "-k", "--project", "--session", "--current-session"]
    ),
    st.sampled_from(["12", "0", "007", "-3", "+4", "1_0", "x", "atlas", "/home/dev/atlas", "", "-", "--"]),
    st.sampled_from(["--help", "-h", "--proj", "--project=atlas", "-k5", "--queries", "--jso", "-x"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(SEARCH_TOKENS, max_size=8))
@example(["--json", "-k", "12", "--current-session", "abc-123", "where did we leave off"])
@example(["what", "did", "we", "decide", "--json", "-k", "12"])
@example(["a", "--json", "b"])
def test_the_plain_search_reading_is_argparses_for_every_command_line_it_takes(tokens):
    """The warm search skips argparse (I58); whatever argv it reads, argparse reads the same way."""
    from total_recall import cli as cli_module

    argv = ["search", *tokens]
    plain = cli_module.plain_search(argv)
    if plain is None:
        return
    try:
        parsed = cli_module.build_parser(only="search").parse_args(argv)
    except SystemExit as exc:
        raise AssertionError(f"argparse refused {argv} ({exc})") from None
    assert vars(plain) == vars(parsed)


def test_the_skills_search_command_line_is_read_without_argparse():
    from total_recall import cli as cli_module

    argv = ["search", "--json", "-k", "12", "--current-session", "s-1", "where did we leave off"]
    assert vars(cli_module.plain_search(argv)) == {
        **vars(cli_module.build_parser(only="search").parse_args(argv)),
        "query": ["where did we leave off"],
    }
    assert cli_module.plain_search(["search", "--help"]) is None
    assert cli_module.plain_search(["topics", "--json"]) is None


@pytest.mark.parametrize(
    "args", [("stats",), ("search", "caddy"), ("topics",), ("recent",), ("digest",), ("export",)]
)
def test_a_read_only_command_on_a_home_with_no_database_says_how_to_set_it_up(args, isolated_home):
    """A mistyped TOTAL_RECALL_HOME made a new, empty home whose zero counts read as lost memory: a
    command that only reads memory says there is no database and how to set one up, and creates
    nothing."""
    out = cli(*args, check=False)
    assert out.returncode != 0 and "no memory database at" in out.stderr and "total-recall up" in out.stderr
    assert not (isolated_home / "memory.db").exists()
