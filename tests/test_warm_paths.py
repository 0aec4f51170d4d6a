"""The paths a user waits on: `total-recall search` against a running daemon, and its socket pool.

Real processes throughout: the CLI and the daemon are subprocesses of the test's home; the hook
records a new transcript while the daemon serves searches.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import cli, cli_json, daemon_process, env, hook, wait_for, write_transcript
from total_recall import config, search, server

PROJECT = "/home/dev/projects/warm"
TALK = [
    ("user", "We chose Meilisearch for the product catalogue search because Elasticsearch is too heavy."),
    ("assistant", "The nightly reindex job times out after 30 minutes on the catalogue."),
    ("assistant", "Fixed by streaming the catalogue export in pages of 5000 rows instead of one query."),
]

# Runs the CLI's search in this interpreter, then reports what it imported beyond the start-up set.
PROBE = """
import json, sys
before = set(sys.modules)
from total_recall.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
new = sorted(set(sys.modules) - before)
sys.stderr.write("\\nMODULES " + json.dumps(new) + "\\n")
raise SystemExit(code)
"""


def transcript(tmp_path: Path, session: str, turns=TALK) -> Path:
    folder = tmp_path / "claude" / "projects" / "-home-dev-projects-warm"
    return write_transcript(folder / f"{session}.jsonl", turns, cwd=PROJECT)


def probe_search(*args: str) -> tuple[list[dict], list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "search", *args, "--json"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stderr.rsplit("MODULES ", 1)[1])
    return json.loads(proc.stdout), modules


def not_stdlib(modules: list[str]) -> list[str]:
    ours = {"total_recall.cli", "total_recall.locations", "total_recall.errors", "total_recall.client"}
    return [
        m
        for m in modules
        if m.split(".")[0] not in sys.stdlib_module_names and m not in ours and m != "total_recall"
    ]


def test_the_warm_search_path_imports_only_the_standard_library(tmp_path):
    cli("backfill", str(transcript(tmp_path, "warm")), "--wait")
    with daemon_process(tmp_path / "daemon.log", serving=True) as proc:
        warm, modules = probe_search("Meilisearch catalogue", "--all-projects")
        assert warm and "Meilisearch" in warm[0]["content"]
        assert not_stdlib(modules) == [], "the warm path imported more than the standard library"
        # Not even the settings: their dataclasses import inspect and ast, a third of a start-up.
        assert not {"total_recall.config", "dataclasses", "inspect", "typing"} & set(modules)
        assert not {"structlog", "asyncio", "numpy", "total_recall.search", "total_recall.server"} & set(
            modules
        )
        # Nor argparse (the skill's command line is read by cli.plain_search), nor what its stock
        # help formatter imports for the terminal's width (cli._formatter).
        assert not {"argparse", "gettext", "shutil", "lzma", "bz2"} & set(modules)
    assert proc.returncode == 0
    # No daemon: the same command searches in-process (and loads what that needs), same results.
    cold, modules = probe_search("Meilisearch catalogue", "--all-projects")
    assert [r["id"] for r in cold] == [r["id"] for r in warm]
    assert "total_recall.search" in modules


def test_the_socket_pool_serves_concurrent_searches_and_sees_new_writes(tmp_path):
    cli("backfill", str(transcript(tmp_path, "first")), "--wait")
    socket_path = config.paths().socket
    with daemon_process(tmp_path / "daemon.log", serving=True) as proc:
        request = server.request("catalogue reindex", k=5, project=None, all_projects=True, hyde=False)
        answers: list[dict | None] = []

        def ask() -> None:
            answers.append(server.ask(socket_path, request))

        threads = [threading.Thread(target=ask) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert len(answers) == 12 and all(a and a["results"] for a in answers)
        assert len({json.dumps(a["results"], sort_keys=True) for a in answers}) == 1  # all alike
        opened = server.ask(socket_path, {"op": "ping"})["connections"]
        assert 1 <= opened <= server.POOL_SIZE

        # A memory the daemon writes after the pool's connections opened is found through them.
        later = transcript(tmp_path, "later", [("user", "We replaced Meilisearch with Typesense last week.")])
        payload = {"session_id": "later", "transcript_path": str(later), "cwd": PROJECT}
        assert hook({**payload, "hook_event_name": "SessionEnd"}).returncode == 0
        found = wait_for(
            lambda: [
                r for r in cli_json("search", "Typesense", "--all-projects") if "Typesense" in r["content"]
            ],
            timeout=60,
            interval=0.3,
        )
        assert found
        assert server.ask(socket_path, {"op": "ping"})["connections"] <= server.POOL_SIZE
    assert proc.returncode == 0
    assert "socket_request_failed" not in (tmp_path / "daemon.log").read_text()


def test_a_search_on_two_connections_runs_each_job_once_and_keeps_the_spare_until_its_job_ends(tmp_path):
    cli("backfill", str(transcript(tmp_path, "first")), "--wait")
    settings = config.load()
    pool = server.ConnectionPool(lambda: server._open(config.paths().db, settings), 2)
    log: list[tuple] = []
    made_by: list[tuple[int, int]] = []

    def make() -> bytes:
        before = [entry for entry in log if entry[2] == threading.get_ident()]
        time.sleep(0.2)  # an embedding: the other thread meanwhile takes the full-text jobs
        made_by.append((threading.get_ident(), len(before)))
        return b"vector"

    vector = search.Once(make)

    def job(name: str, uses_vector: bool):
        def run(ctx) -> list[tuple[int, float]]:
            ready = vector.made
            if uses_vector:
                assert vector() == b"vector"
            log.append((name, id(ctx.db), threading.get_ident(), ready))
            time.sleep(0.01)
            return [(len(name), 1.0)]

        return run

    names = ["idea_vec", "span_vec", "chunk_vec", "idea_bm25", "span_bm25", "chunk_bm25", "entity"]
    jobs = {n: ("idea", job(n, n in search.VECTOR_JOBS)) for n in names}
    with ThreadPoolExecutor(2) as executor, pool.connection() as first:
        ctx = search.SearchContext(db=first, spare=pool.spare, executor=executor)
        out = search._run_jobs(ctx, jobs, [vector])
        assert list(out) == names  # fused in the jobs' order, whoever ran them
        assert out["chunk_vec"] == ("idea", [(9, 1.0)])
        assert sorted(entry[0] for entry in log) == sorted(names)  # each job once
        assert made_by == [(threading.get_ident(), 0)]  # this thread embedded, once, before any job
        assert len({entry[1] for entry in log}) == 2  # both connections searched
        # the other thread took full-text jobs while this one embedded
        assert [entry for entry in log if entry[0] not in search.VECTOR_JOBS and not entry[3]]

        # A job that fails on this thread: the spare connection stays lent until the other
        # thread's job has ended, then the error reaches the caller.
        started, finished = threading.Event(), threading.Event()

        def slow(ctx) -> list:
            started.set()
            time.sleep(0.2)
            finished.set()
            return []

        def fails(ctx) -> list:
            assert started.wait(30)  # fail while the other thread's job runs
            raise RuntimeError("the KNN failed")

        vector = search.Once(make)
        with pytest.raises(RuntimeError, match="the KNN failed"):
            search._run_jobs(ctx, {"chunk_vec": ("chunk", fails), "idea_bm25": ("idea", slow)}, [vector])
        assert finished.is_set()
    pool.close()
