"""The recall benchmark's conversion and scoring, on a tiny hand-made LoCoMo-format file."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import locomo  # noqa: E402
import recall  # noqa: E402

TINY = [
    {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {
                    "speaker": "Ana",
                    "dia_id": "D1:1",
                    "text": "Hi Ben! I adopted a greyhound named Pixel last weekend.",
                },
                {
                    "speaker": "Ben",
                    "dia_id": "D1:2",
                    "text": "Congrats! I started learning the cello in March.",
                },
                {
                    "speaker": "Ana",
                    "dia_id": "D1:3",
                    "text": "Pixel loves the beach near Porto.",
                    "img_url": ["https://example.org/dog.jpg"],
                    "blip_caption": "a dog running on a beach",
                },
                {
                    "speaker": "Ben",
                    "dia_id": "D1:4",
                    "text": "My cello teacher is called Marta and she lives in Lisbon.",
                },
            ],
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": [
                {"speaker": "Ana", "dia_id": "D2:1", "text": "I signed up for a pottery class on Tuesdays."},
                {"speaker": "Ben", "dia_id": "D2:2", "text": "I played my first cello recital yesterday."},
                {"speaker": "Ana", "dia_id": "D2:3", "text": "The pottery studio is above the old bakery."},
                {"speaker": "Ben", "dia_id": "D2:4", "text": "Marta said the recital went really well."},
            ],
            "session_3_date_time": "9:00 am on 1 July, 2023",  # a date without turns: no transcript
        },
        "qa": [
            {
                "question": "What kind of dog did Ana adopt?",
                "answer": "a greyhound",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "When did Ben play his first cello recital?",
                "answer": "26 June 2023",
                "evidence": ["D2:2"],
                "category": 2,
            },
            {
                "question": "Who is Ben's cello teacher and what did she say about the recital?",
                "answer": "Marta",
                "evidence": ["D1:4; D2:4"],
                "category": 1,
            },
            {
                "question": "What does Ben's dog like?",
                "adversarial_answer": "the beach",
                "evidence": ["D1:3"],
                "category": 5,
            },
        ],
    }
]


@pytest.fixture
def tiny_file(tmp_path) -> Path:
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps(TINY))
    return path


@pytest.fixture
def corpus(tmp_path, tiny_file) -> locomo.Corpus:
    return locomo.convert(locomo.load(tiny_file), tmp_path / "transcripts")


def line_of(path: str, number: int) -> dict:
    return json.loads(Path(path).read_text().splitlines()[number - 1])


def test_each_session_becomes_one_transcript_with_dia_ids_mapped_to_lines(corpus, tmp_path):
    assert len(corpus.files) == 2
    session_1 = corpus.turns[("tiny-1", "D1:1")].file
    assert {corpus.turns[("tiny-1", f"D1:{i}")].file for i in range(1, 5)} == {session_1}
    assert corpus.turns[("tiny-1", "D2:3")].file != session_1
    assert [corpus.turns[("tiny-1", f"D2:{i}")].line for i in range(1, 5)] == [1, 2, 3, 4]
    assert Path(session_1).parent.name == "-locomo-tiny-1"  # Claude Code's folder for cwd /locomo/tiny-1
    assert corpus.projects == {"tiny-1": "/locomo/tiny-1"}
    record = line_of(session_1, 4)
    assert (
        record["message"]["content"][0]["text"] == "My cello teacher is called Marta and she lives in Lisbon."
    )
    assert record["type"] == "assistant" and record["cwd"] == "/locomo/tiny-1"
    assert record["sessionId"] == Path(session_1).stem
    assert line_of(session_1, 1)["message"] == {
        "role": "user",
        "content": "Hi Ben! I adopted a greyhound named Pixel last weekend.",
    }


def test_captions_are_appended_to_the_turn_text(corpus):
    turn = corpus.turns[("tiny-1", "D1:3")]
    expected = "Pixel loves the beach near Porto. [shared an image: a dog running on a beach]"
    assert turn.text == expected
    assert line_of(turn.file, 3)["message"]["content"] == expected


def test_other_layouts_write_the_same_turns_as_another_converter_might(tiny_file, tmp_path, corpus):
    samples = locomo.load(tiny_file)
    whole = locomo.convert(samples, tmp_path / "one-file", layout="one-file")
    assert len(whole.files) == 1  # every session of the conversation in one transcript
    first_session = sum(1 for t in corpus.turns.values() if t.file == corpus.turns[("tiny-1", "D1:1")].file)
    for dia, turn in corpus.turns.items():
        moved = whole.turns[dia]
        assert (moved.text, moved.role, moved.timestamp) == (turn.text, turn.role, turn.timestamp)
        assert moved.line == turn.line + (first_session if dia[1].startswith("D2:") else 0)
        assert line_of(moved.file, moved.line)["timestamp"].startswith(turn.timestamp[:19])
    assert {json.loads(x)["sessionId"] for x in Path(whole.files[0]).read_text().splitlines()} == {
        Path(whole.files[0]).stem
    }
    bare = locomo.convert(samples, tmp_path / "bare", layout="no-captions")
    assert bare.turns[("tiny-1", "D1:3")].text == "Pixel loves the beach near Porto."
    assert (
        line_of(bare.turns[("tiny-1", "D1:3")].file, 3)["message"]["content"]
        == "Pixel loves the beach near Porto."
    )
    flat = locomo.convert(samples, tmp_path / "flat", names=True, layout="one-side")
    assert {t.role for t in flat.turns.values()} == {"user"}
    assert flat.turns[("tiny-1", "D1:4")].text.startswith("Ben: My cello teacher")
    thought = locomo.convert(samples, tmp_path / "thinking", layout="thinking")
    reply = thought.turns[("tiny-1", "D1:4")]
    assert (
        reply.role == "assistant"
        and line_of(reply.file, reply.line)["message"]["content"][0]["type"] == "text"
    )
    before = line_of(reply.file, reply.line - 1)
    assert before["message"]["content"][0]["type"] == "thinking"
    assert before["message"]["id"] == line_of(reply.file, reply.line)["message"]["id"]
    with pytest.raises(ValueError, match="unknown layout"):
        locomo.convert(samples, tmp_path / "x", layout="sideways")


def test_timestamps_come_from_the_session_date_one_minute_per_turn(corpus):
    s1, s2 = corpus.turns[("tiny-1", "D1:1")].file, corpus.turns[("tiny-1", "D2:1")].file
    assert [line_of(s1, i)["timestamp"] for i in (1, 4)] == [
        "2023-05-08T13:56:00.000Z",
        "2023-05-08T13:59:00.000Z",
    ]
    assert line_of(s2, 2)["timestamp"] == "2023-06-27T10:38:00.000Z"


def test_session_dates_parse_including_midnight_and_noon():
    assert locomo.parse_session_time("12:09 am on 13 September, 2023") == datetime(
        2023, 9, 13, 0, 9, tzinfo=timezone.utc
    )
    assert locomo.parse_session_time("12:30 pm on 1 Jan, 2024") == datetime(
        2024, 1, 1, 12, 30, tzinfo=timezone.utc
    )
    assert locomo.parse_session_time("sometime in spring") is None


def test_evidence_ids_survive_malformed_strings():
    assert locomo.evidence_ids(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert locomo.evidence_ids(["D1:3 D1:5", "D1:3"]) == ["D1:3", "D1:5"]
    assert locomo.evidence_ids([]) == []


def test_questions_keep_categories_1_to_4_and_leave_out_category_5(tiny_file, corpus):
    qs, left_out = locomo.questions(locomo.load(tiny_file), corpus)
    assert [q.category for q in qs] == [4, 2, 1]
    assert qs[2].evidence == ("D1:4", "D2:4")
    assert left_out == {"other_category": 1, "no_evidence": 0}


def test_scoring_of_hand_made_results(tiny_file, corpus):
    qs, _ = locomo.questions(locomo.load(tiny_file), corpus)
    evidence = locomo.evidence_locations(qs[2], corpus)  # D1:4 and D2:4
    s1, s2 = corpus.turns[("tiny-1", "D1:1")].file, corpus.turns[("tiny-1", "D2:1")].file
    results = [
        {"kind": "idea", "source_file": s2, "source_line": 1},  # a turn that is not evidence
        {"kind": "idea", "source_file": s1, "source_line": 4},  # D1:4
        {"kind": "span", "source_file": s2, "start_line": 3, "end_line": 4},  # covers D2:4
        {"kind": "idea", "source_file": s2, "source_line": 4},  # D2:4 again: no extra credit
    ]
    scores = locomo.score_question(results, evidence, [1, 2, 3])
    assert scores == {
        "recall@1": 0.0,
        "hit@1": 0.0,
        "recall@2": 0.5,
        "hit@2": 1.0,
        "recall@3": 1.0,
        "hit@3": 1.0,
        "mrr": 0.5,
    }
    ideas_only = locomo.score_question(results, evidence, [3, 4], ideas_only=True)
    assert ideas_only == {"recall@3": 0.5, "hit@3": 1.0, "recall@4": 1.0, "hit@4": 1.0, "mrr": 0.5}
    # Line 4 of a file that is not the evidence's, and a span of the wrong file, point to nothing.
    misses = [
        {"kind": "idea", "source_file": s1 + ".other", "source_line": 4},
        {"kind": "span", "source_file": s1, "start_line": 1, "end_line": 3},
    ]
    assert locomo.score_question(misses, evidence, [2]) == {"recall@2": 0.0, "hit@2": 0.0, "mrr": 0.0}


def test_aggregate_averages_per_category_and_overall():
    rows = [
        (4, {"recall@1": 1.0, "mrr": 1.0}),
        (4, {"recall@1": 0.0, "mrr": 0.5}),
        (2, {"recall@1": 0.5, "mrr": 0.25}),
    ]
    out = locomo.aggregate(rows)
    assert out["single-hop"] == {"recall@1": 0.5, "mrr": 0.75, "n": 2}
    assert out["temporal"] == {"recall@1": 0.5, "mrr": 0.25, "n": 1}
    assert out["overall"] == {"recall@1": 0.5, "mrr": pytest.approx(1.75 / 3), "n": 3}


def test_bm25_baseline_ranks_raw_turns_within_one_conversation(tmp_path, corpus):
    other = [dict(TINY[0], sample_id="tiny-2")]
    locomo.convert(other, tmp_path / "transcripts", corpus=corpus)
    index = locomo.TurnIndex(corpus)
    try:
        top = index.search("tiny-1", "Where does Marta, the cello teacher, live?", 2)
        assert all(r["source_file"].split("/")[-2] == "-locomo-tiny-1" for r in top)
        teacher = corpus.turns[("tiny-1", "D1:4")]
        assert (top[0]["source_file"], top[0]["source_line"]) == (teacher.file, teacher.line)
        assert index.search("tiny-1", "the of and", 5) == []  # stopwords only: nothing to match
        everywhere = index.search(None, "Where does Marta, the cello teacher, live?", 20)
        assert {r["source_file"].split("/")[-2] for r in everywhere} == {"-locomo-tiny-1", "-locomo-tiny-2"}
    finally:
        index.close()


def test_variant_copies_change_every_sentence_but_keep_their_shape():
    vary = locomo.variant(2, ["harbour", "violin", "meadow"])
    text = "I played my first cello recital yesterday. Marta said it went well! Thanks!"
    copy = vary(text)
    sentences = [s for s in copy.split(". ") if s]
    assert copy != text and vary(text) == copy  # deterministic
    assert sentences[0] != "I played my first cello recital yesterday"
    assert "Marta said it went well!" not in copy
    assert copy.count(" ") == text.count(" ")


def _recall_tool(tiny_file, save, sets: str, *more: str) -> subprocess.CompletedProcess:
    """bench/recall.py on the tiny file at recall@1 and @5, its figures saved to `save`."""
    argv = [sys.executable, str(REPO / "bench" / "recall.py"), "--sets", sets, "--data", str(tiny_file)]
    proc = subprocess.run(
        [*argv, "-k", "1,5", *more, "--save", str(save)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_a_paired_interval_holds_the_mean_difference_and_narrows_with_more_questions():
    assert recall.paired_interval([0.25] * 12) == [0.25, 0.25]  # every question moved alike
    few = [1.0, 0.0, 0.0, 0.5, -0.5, 0.0, 1.0, 0.0]
    lo, hi = recall.paired_interval(few)
    assert lo < sum(few) / len(few) < hi and lo < 0.0  # eight questions cannot tell +0.25 from 0
    many_lo, many_hi = recall.paired_interval(few * 20)
    assert lo < many_lo < many_hi < hi and many_lo > 0.0
    assert recall.paired_interval(few) == [lo, hi]  # a fixed seed: the same report twice


def test_recall_tool_runs_end_to_end_on_the_tiny_file(tiny_file, tmp_path):
    save = tmp_path / "figures.json"
    proc = _recall_tool(tiny_file, save, "locomo-roles,locomo-names")
    for heading in (
        "## locomo-roles / confirm",
        "## locomo-names / all",
        "| total-recall",
        "| ideas only",
        "| BM25 raw turns",
        "| total-recall, keywords",
        "confirm, asked as keywords: recall@5",
        "confirm: 95% interval of each delta over BM25",
        "# summary",
    ):
        assert heading in proc.stdout
    reports = {r["set"]: r for r in json.loads(save.read_text())}
    for name in ("locomo-roles", "locomo-names"):
        report = reports[name]
        assert report["questions"] == 3 and report["index"]["turns"] == 8
        figures = report["figures"]["confirm"]  # the tiny conversation is not in the tune split
        bm25 = figures["BM25 raw turns"]["overall"]
        assert bm25["n"] == 3 and 0.0 <= bm25["recall@5"] <= 1.0
        ours = figures["total-recall"]["overall"]
        assert ours["n"] == 3 and report["index"]["ideas"] > 0
        typed = figures["total-recall, keywords"]["overall"]
        assert typed["n"] == 3 and 0.0 <= typed["recall@5"] <= 1.0
        lo, hi = report["intervals"]["confirm"]["recall@5"]
        assert lo <= ours["recall@5"] - bm25["recall@5"] <= hi


def test_recall_tool_asks_over_every_project_when_told(tiny_file, tmp_path):
    save = tmp_path / "figures.json"
    proc = _recall_tool(tiny_file, save, "locomo-roles", "--all-projects")
    assert "# locomo-roles (every project)" in proc.stdout
    (report,) = json.loads(save.read_text())
    assert report["everywhere"] is True and report["questions"] == 3
    assert report["figures"]["confirm"]["total-recall"]["overall"]["n"] == 3


def test_recall_tool_indexes_another_layout_when_told(tiny_file, tmp_path):
    save = tmp_path / "figures.json"
    proc = _recall_tool(tiny_file, save, "locomo-roles", "--layout", "one-file")
    assert "# locomo-roles (layout: one-file)" in proc.stdout
    (report,) = json.loads(save.read_text())
    assert report["layout"] == "one-file" and report["index"]["transcripts"] == 1
    assert report["index"]["turns"] == 8 and report["questions"] == 3
    assert report["figures"]["confirm"]["total-recall"]["overall"]["n"] == 3


def test_recall_tool_scores_unseen_chats_and_sessions_given_as_folders(tiny_file, tmp_path):
    """Data nobody tuned on goes through the same run: BEAM chats in the benchmark's own layout
    (--beam) and real transcripts with questions in the sessions set's format (--sessions-qa,
    --fixtures); every such question counts as confirm."""
    chat = tmp_path / "chats" / "100K" / "7"
    (chat / "probing_questions").mkdir(parents=True)
    (chat / "chat.json").write_text(json.dumps(BEAM_CHAT))
    (chat / "probing_questions" / "probing_questions.json").write_text(json.dumps(BEAM_QUESTIONS))
    fixtures = tmp_path / "sessions"
    fixtures.mkdir()
    when = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
    said = [
        ("user", "The nightly export job dies with a lock timeout on the orders table"),
        (
            "assistant",
            "Run the export from the read replica instead; the primary holds the lock during vacuum",
        ),
    ]
    (fixtures / "mine.jsonl").write_text(
        "".join(
            json.dumps(locomo.record(role, text, session="s-1", cwd="/work/shop", when=when, key=f"k{n}"))
            + "\n"
            for n, (role, text) in enumerate(said)
        )
    )
    questions = tmp_path / "mine_qa.json"
    item = {"file": "mine.jsonl", "question": "Where should the nightly export read from?", "evidence": [2]}
    questions.write_text(json.dumps([{**item, "fingerprints": {"2": said[1][1][:50]}, "kind": "solution"}]))
    save = tmp_path / "figures.json"
    more = ("--beam", str(tmp_path / "chats"), "--sessions-qa", str(questions), "--fixtures", str(fixtures))
    _recall_tool(tiny_file, save, "beam,sessions", *more)
    reports = {r["set"]: r for r in json.loads(save.read_text())}
    assert reports["beam"]["questions"] == 2 and reports["beam"]["index"]["turns"] == 6
    assert reports["sessions"]["questions"] == 1
    for report in reports.values():
        assert set(report["figures"]) >= {"confirm"} and "tune" not in report["figures"]
        assert report["figures"]["confirm"]["total-recall"]["overall"]["n"] == report["questions"]
    assert reports["sessions"]["figures"]["confirm"]["total-recall"]["overall"]["recall@5"] == 1.0
    checker = [sys.executable, str(REPO / "bench" / "sessions_qa_check.py"), "--fixtures", str(fixtures)]
    proc = subprocess.run([*checker, "--questions", str(questions)], capture_output=True, text=True)
    assert proc.returncode == 0 and "1 questions, 1 evidence lines checked" in proc.stdout
    assert "confirm: 1" in proc.stdout  # no split named: confirm, as the recall tool counts it
    questions.write_text(
        json.dumps([{**item, "fingerprints": {"2": "Run the export from the primary"}, "kind": "?"}])
    )
    proc = subprocess.run([*checker, "--questions", str(questions)], capture_output=True, text=True)
    assert proc.returncode == 1 and "line 2: 'Run the export from the primary'" in proc.stdout
    assert "bad kind or split" in proc.stdout


def test_names_rendering_writes_speaker_names_into_the_turns(tiny_file, tmp_path):
    corpus = locomo.convert(locomo.load(tiny_file), tmp_path / "names", names=True)
    turn = corpus.turns[("tiny-1", "D1:4")]
    assert turn.text == "Ben: My cello teacher is called Marta and she lives in Lisbon."
    assert line_of(turn.file, 4)["message"]["content"][0]["text"] == turn.text


BEAM_CHAT = [
    {
        "batch_number": 1,
        "time_anchor": "March-1-2024",
        "turns": [
            [
                {"role": "user", "id": 0, "content": "I want to build a budget tracker in Flask ->-> 1,1"},
                {"role": "assistant", "id": 1, "content": "Start with an app factory and SQLite."},
            ],
            [
                {"role": "user", "id": 2, "content": "My first sprint ends on March 29 ->-> 1,2"},
                {"role": "assistant", "id": 3, "content": "Then plan login first."},
            ],
        ],
    },
    {
        "batch_number": 2,
        "turns": [
            [
                {"role": "user", "id": 4, "content": "Sprint two adds charts."},
                {"role": "assistant", "id": 5, "content": "Use Chart.js."},
            ]
        ],
    },
]
BEAM_QUESTIONS = {
    "information_extraction": [{"question": "When does my first sprint end?", "source_chat_ids": [2]}],
    "knowledge_update": [
        {
            "question": "What library for charts?",
            "source_chat_ids": {"original_info": [4], "updated_info": [5]},
        }
    ],
    "abstention": [{"question": "What is my cat called?", "source_chat_ids": []}],
}


def _beam_chat(tmp_path):
    """The hand-made BEAM chat in a folder of its own, loaded and converted: (samples, corpus)."""
    import beam

    folder = tmp_path / "beam" / "100K_9"
    folder.mkdir(parents=True)
    (folder / "chat.json").write_text(json.dumps(BEAM_CHAT))
    (folder / "probing_questions.json").write_text(json.dumps(BEAM_QUESTIONS))
    samples = [beam.load(f) for f in beam.folders(tmp_path / "beam")]
    return samples, beam.convert(samples, tmp_path / "transcripts")


def test_beam_chats_become_one_transcript_per_batch_with_message_ids_mapped(tmp_path):
    import beam

    samples, corpus = _beam_chat(tmp_path)
    assert len(corpus.files) == 2 and corpus.projects == {"100K_9": "/beam/100K_9"}
    sprint = corpus.turns[("100K_9", "M2")]
    assert sprint.line == 3 and sprint.text == "My first sprint ends on March 29"  # marker stripped
    assert line_of(sprint.file, 3)["message"]["content"] == "My first sprint ends on March 29"
    assert corpus.turns[("100K_9", "M5")].line == 2 and corpus.turns[("100K_9", "M5")].file != sprint.file
    first = line_of(corpus.turns[("100K_9", "M0")].file, 1)["timestamp"]
    second = line_of(corpus.turns[("100K_9", "M4")].file, 1)["timestamp"]
    assert (datetime.fromisoformat(second[:19]) - datetime.fromisoformat(first[:19])).days == 7
    qs, left = beam.questions(samples, corpus)
    assert [(q.category, q.evidence) for q in qs] == [
        ("information_extraction", ("M2",)),
        ("knowledge_update", ("M4", "M5")),
    ]
    assert left == {"other_category": 1, "no_evidence": 0}


def test_a_beam_chat_in_one_file_keeps_its_message_ids_and_times(tmp_path):
    import beam

    samples, corpus = _beam_chat(tmp_path)
    whole = beam.convert(samples, tmp_path / "one-file", layout="one-file")
    assert len(whole.files) == 1
    first_batch = sum(1 for t in corpus.turns.values() if t.file == corpus.turns[("100K_9", "M0")].file)
    for key, turn in corpus.turns.items():
        moved = whole.turns[key]
        offset = 0 if turn.file == corpus.turns[("100K_9", "M0")].file else first_batch
        assert (moved.line, moved.text, moved.timestamp) == (turn.line + offset, turn.text, turn.timestamp)
        assert line_of(moved.file, moved.line)["timestamp"].startswith(turn.timestamp[:19])
    assert [q.evidence for q in beam.questions(samples, whole)[0]] == [("M2",), ("M4", "M5")]


def test_beam_chats_in_the_published_layout_and_a_10m_chat_read_as_the_dev_copy(tmp_path, capsys):
    """The benchmark publishes chats as chats/<size>/<n>/ with the questions in probing_questions/,
    and a 10M chat groups its batches under "plan-N": both read as the dev copy's folders do, and a
    chat.json of a layout the reader does not know is an error, not a set of unanswerable questions."""
    import beam

    root = tmp_path / "chats"
    small, huge = root / "100K" / "9", root / "10M" / "9"
    plans = {"plan-2": BEAM_CHAT[1:], "plan-1": BEAM_CHAT[:1]}  # read in plan order, not key order
    for folder, chat in ((small, BEAM_CHAT), (huge, [plans])):
        (folder / "probing_questions").mkdir(parents=True)
        (folder / "chat.json").write_text(json.dumps(chat))
        (folder / "probing_questions" / "probing_questions.json").write_text(json.dumps(BEAM_QUESTIONS))
    samples = [beam.load(f) for f in beam.folders(root)]
    assert [s["sample_id"] for s in samples] == ["100K_9", "10M_9"]  # one number, two sizes: apart
    corpus = beam.convert(samples, tmp_path / "transcripts")
    for sid in ("100K_9", "10M_9"):
        assert corpus.turns[(sid, "M2")].text == "My first sprint ends on March 29"
        assert (
            corpus.turns[(sid, "M4")].line == 1
            and corpus.turns[(sid, "M4")].file != corpus.turns[(sid, "M2")].file
        )
    qs, _ = beam.questions(samples, corpus)
    assert [(q.sample_id, q.evidence) for q in qs] == [
        ("100K_9", ("M2",)),
        ("100K_9", ("M4", "M5")),
        ("10M_9", ("M2",)),
        ("10M_9", ("M4", "M5")),
    ]
    assert "repeat" not in capsys.readouterr().err
    (huge / "chat.json").write_text(json.dumps([{"plan-1": BEAM_CHAT, "plan-2": BEAM_CHAT[:1]}]))
    beam.convert([beam.load(huge)], tmp_path / "twice")  # a plan numbering its messages from 0 again
    assert "BEAM chat 10M_9: 4 message ids repeat" in capsys.readouterr().err
    (huge / "chat.json").write_text(json.dumps([{"sessions": BEAM_CHAT}]))
    with pytest.raises(ValueError, match="BEAM chat 10M_9: no messages"):
        beam.convert([beam.load(huge)], tmp_path / "again")
    (huge / "probing_questions" / "probing_questions.json").unlink()
    with pytest.raises(FileNotFoundError, match="no questions file"):
        beam.load(huge)


def test_our_beam_questions_map_to_message_lines_and_a_stale_fingerprint_is_an_error(tmp_path):
    import beam

    samples, corpus = _beam_chat(tmp_path)
    items = [
        {
            "chat": "100K_9",
            "question": "When is my first sprint over?",
            "evidence": [2],
            "fingerprints": {"2": "My first sprint ends on March 29"},  # the marker is not the text
            "kind": "fact",
            "phrasing": "plain",
        },
        {
            "chat": "100K_9",
            "question": "Which graphing library did you point me to?",
            "evidence": [5],
            "fingerprints": {"5": "Use Chart.js."},
            "kind": "solution",
            "phrasing": "paraphrase",
        },
        {"chat": "100K_7", "question": "?", "evidence": [1], "fingerprints": {"1": "x"}, "kind": "fact"},
    ]
    qs, left = beam.labelled_questions(items, samples, corpus)
    assert [(q.sample_id, q.category, q.evidence) for q in qs] == [
        ("100K_9", "fact", ("M2",)),
        ("100K_9", "paraphrase", ("M5",)),
    ]
    assert left == {"other_category": 0, "no_evidence": 1}  # its chat is not here
    assert corpus.turns[("100K_9", "M5")].text == "Use Chart.js."
    items[1]["fingerprints"]["5"] = "Use D3."
    with pytest.raises(ValueError, match="item 1: 100K_9 message 5 starts 'Use Chart.js.'"):
        beam.labelled_questions(items, samples, corpus)


def test_intents_bench_scores_per_message_and_skips_without_the_shared_data(tmp_path, capsys):
    import intents

    rows = intents.load_labels("all")
    assert len(rows) >= 300 and {r["split"] for r in rows} == {"tune", "confirm"}
    assert all(len(r["fingerprint"]) <= 40 for r in rows)
    gold = [
        {"source": "s", "id": 1, "intents": ["decision"]},
        {"source": "s", "id": 2, "intents": []},
        {"source": "s", "id": 3, "intents": ["todo", "question"]},
    ]
    result = intents.score(
        gold, {("s", 1): {"decision", "context"}, ("s", 2): {"todo"}, ("s", 3): {"question"}}
    )
    assert result["per_intent"]["decision"] == {"precision": 1.0, "recall": 1.0, "gold": 1, "predicted": 1}
    assert result["per_intent"]["todo"] == {"precision": 0.0, "recall": 0.0, "gold": 1, "predicted": 1}
    assert result["filler_given_an_intent"] == 1
    assert intents.run("confirm", "offline", tmp_path / "absent") is None
    assert "skipped" in capsys.readouterr().err


def test_a_recall_report_says_what_single_lines_found_when_topic_ranges_added_to_it():
    """A topic result counts for every evidence line of its range; when that moved recall@k, the
    split's line also gives the figure by single lines (the `ideas only` variant)."""

    def figures(ours: float, alone: float) -> dict:
        cell = {"n": 2, "recall@1": 0.5, "recall@10": ours, "hit@10": 1.0, "mrr": 0.5}
        return {
            "total-recall": {"overall": cell, "fact": cell},
            "ideas only": {"overall": {**cell, "recall@10": alone}},
            "BM25 raw turns": {"overall": cell, "fact": cell},
        }

    report = {
        "set": "sessions",
        "ks": [1, 10],
        "questions": 2,
        "left_out": {},
        "index": {},
        "spans": {},
        "figures": {"tune": figures(0.9, 0.9), "confirm": figures(1.0, 0.5)},
    }
    text = recall.render(report)
    tune = next(line for line in text.splitlines() if line.startswith("tune:"))
    confirm = next(line for line in text.splitlines() if line.startswith("confirm:"))
    assert "single lines" not in tune
    assert confirm.endswith("recall@10 by single lines (no topic ranges) 0.500")


def test_a_question_asked_as_keywords_keeps_only_its_matched_terms():
    """The keyword variant is what a user types: no pronoun, no question frame; a question with no
    term left is asked as it was."""
    q = locomo.Question("s", "What kind of art did I say Caroline makes?", 1, ("D1:1",))
    typed = recall.as_keywords(q)
    assert typed.text == "art say caroline makes"
    assert (typed.sample_id, typed.category, typed.evidence) == (q.sample_id, q.category, q.evidence)
    assert recall.as_keywords(locomo.Question("s", "What did I do?", 1, ())).text == "What did I do?"


@pytest.mark.slow
def test_recall_tool_measures_the_postgresql_store_when_asked(tiny_file, tmp_path):
    """`--store postgres`: the set's memories go to a fresh database of a throw-away PostgreSQL
    server (the pgserver wheel), and the figures come from searching it."""
    if importlib.util.find_spec("pgserver") is None:
        if os.environ.get("TOTAL_RECALL_REQUIRE_POSTGRES"):
            raise AssertionError("pgserver is not installed")
        pytest.skip("pgserver is not installed (pip install '.[test]')")
    save = tmp_path / "figures.json"
    proc = _recall_tool(tiny_file, save, "locomo-roles", "--store", "postgres")
    assert "# locomo-roles (PostgreSQL store)" in proc.stdout
    (report,) = json.loads(save.read_text())
    assert report["store"] == "postgres" and report["questions"] == 3
    assert report["index"]["ideas"] > 0  # counted in the PostgreSQL store: memory.db holds none
    ours = report["figures"]["confirm"]["total-recall"]["overall"]
    assert ours["n"] == 3 and ours["hit@5"] > 0


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_recall_lab_repeats_the_recall_tools_figures_and_measures_a_changed_constant(
    tiny_file, tmp_path, kind
):
    """bench/recall_lab.py indexes once and asks in one process: its figures must be the recall
    tool's on the same data and store, and a search constant it is told to change must change the
    ranking. On PostgreSQL the set's server is stopped between calls and started again."""
    if kind == "postgres" and not os.environ.get("TOTAL_RECALL_REQUIRE_POSTGRES"):
        pytest.importorskip("pgserver")
    save = tmp_path / "figures.json"
    _recall_tool(tiny_file, save, "locomo-roles", "--store", kind)
    (report,) = json.loads(save.read_text())
    tool = report["figures"]["confirm"]
    lab = [sys.executable, str(REPO / "bench" / "recall_lab.py")]
    where = [
        "--sets",
        "locomo-roles",
        "--dir",
        str(tmp_path / "lab"),
        "--data",
        str(tiny_file),
        "--store",
        kind,
    ]
    proc = subprocess.run([*lab, "index", *where], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]

    def ask(*more: str) -> dict:
        argv = [*lab, "ask", *where, "-k", "1,5", "--keywords", "--json", *more]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.splitlines()[-1])["locomo-roles"]["confirm"]

    figures = ask()
    for figure in ("recall@5", "recall@1", "mrr"):
        assert figures[figure] == tool["total-recall"]["overall"][figure]
        assert figures[f"bm25 {figure}"] == tool["BM25 raw turns"]["overall"][figure]
        assert figures[f"kw {figure}"] == tool["total-recall, keywords"]["overall"][figure]
    assert figures["recall@5"] > 0
    # No candidate from any strategy finds nothing; BM25's baseline is what was saved at indexing.
    changed = ask("--set", "search.POOL=0", "--set", "search.WEIGHTS[chunk_bm25]=1.5")
    assert changed["recall@5"] == changed["mrr"] == 0.0
    assert changed["bm25 recall@5"] == figures["bm25 recall@5"]


def test_the_sessions_sets_paraphrase_and_blind_batches_are_rows_of_their_own(tmp_path):
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    line = {"type": "user", "cwd": "/p/mine", "message": {"role": "user", "content": "ship the export"}}
    (fixtures / "mine.jsonl").write_text(json.dumps(line) + "\n")
    item = {"file": "mine.jsonl", "evidence": [1], "fingerprints": {"1": "ship the export"}, "kind": "fact"}
    phrasings = [("asked plainly", None), ("asked around it", "paraphrase"), ("asked blind", "blind")]
    items = [{**item, "question": q} | ({"phrasing": p} if p else {}) for q, p in phrasings]
    questions = tmp_path / "qa.json"
    questions.write_text(json.dumps(items))
    _corpus, qs, left = recall.sessions_set(tmp_path / "root", questions, fixtures)
    assert [q.category for q in qs] == ["fact", "paraphrase", "blind"]
    assert left == {"other_category": 0, "no_evidence": 0}


def test_the_shipped_sessions_set_holds_its_three_batches():
    items = json.loads((REPO / "bench" / "sessions_qa.json").read_text(encoding="utf-8"))
    batches = [i.get("phrasing", "first") for i in items]
    assert {b: batches.count(b) for b in set(batches)} == {
        "first": 60,
        "what did we decide": 9,
        "paraphrase": 30,
        "blind": 30,
    }
    blind = [i for i in items if i.get("phrasing") == "blind"]
    assert sum(i["split"] == "tune" for i in blind) == sum(i["split"] == "confirm" for i in blind) == 15
