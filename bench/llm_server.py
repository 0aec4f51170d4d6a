"""A local OpenAI-compatible server that answers extraction calls with valid protocol JSON.

    python bench/llm_server.py --port-file PORT [--log REQUESTS.jsonl]

Wraps the test suite's fake server (tests/fake_openai.py) with a chat handler that returns one
`context` item per new message, so a backfill exercises the whole LLM path (batching, prompt
budget, validation, accounting) with no network and no model. `LLMServer` starts it as a
separate process from a benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def answer(request: dict) -> str:
    """The protocol answer for one chat request: one context item per new message."""
    prompt = str((request.get("messages") or [{}])[-1].get("content") or "")
    try:
        obj = json.loads(prompt[prompt.index("{") :])
    except ValueError:
        return "{}"  # not an extraction prompt (e.g. HyDE): an empty but valid object
    new = obj.get("new_messages") or []
    items = [
        {
            "type": "context",
            "content": str(m.get("content") or "")[:500],
            "confidence": 0.7,
            "source_line": m["line"],
            "entities": [],
            "answered": False,
        }
        for m in new
        if str(m.get("content") or "").strip()
    ]
    first = new[0]["line"] if new else None
    topic = {"name": "conversation", "summary": "benchmark conversation", "start_line": first}
    return json.dumps(
        {"topic_update": topic, "new_span": None, "items": items, "relations": [], "skip_lines": []}
    )


def serve(port_file: Path, log: Path | None) -> int:
    sys.path.insert(0, str(REPO / "tests"))
    from fake_openai import FakeOpenAI

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    with FakeOpenAI(chat=answer, log_path=log) as srv:
        tmp = port_file.with_name(port_file.name + ".tmp")
        tmp.write_text(srv.base_url)
        os.replace(tmp, port_file)
        stopping.wait()
    return 0


class LLMServer:
    """This file run as a child process; `base_url` once it listens."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.port_file = self.workdir / "llm_server.url"
        self.log = self.workdir / "llm_requests.jsonl"
        self.proc: subprocess.Popen | None = None
        self.base_url = ""

    def __enter__(self) -> LLMServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--port-file",
                str(self.port_file),
                "--log",
                str(self.log),
            ]
        )
        deadline = time.monotonic() + 30
        while not self.port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("benchmark LLM server did not start")
            time.sleep(0.05)
        self.base_url = self.port_file.read_text().strip()
        return self

    def batches(self) -> list[int]:
        """For every extraction request the server received, how many new messages it carried."""
        if not self.log.exists():
            return []
        sizes = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            request = json.loads(line).get("json") or {}
            prompt = str((request.get("messages") or [{}])[-1].get("content") or "")
            if "new_messages" in prompt:
                sizes.append(len(json.loads(prompt[prompt.index("{") :]).get("new_messages") or []))
        return sizes

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--port-file", type=Path, required=True, help="write the base URL here once listening"
    )
    parser.add_argument("--log", type=Path, help="append each request as a JSON line here")
    args = parser.parse_args(argv)
    return serve(args.port_file, args.log)


if __name__ == "__main__":
    sys.exit(main())
