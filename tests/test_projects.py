"""Project identity has one owner (total_recall.projects); the stdlib hook's copy agrees with it."""

from __future__ import annotations

import importlib.util
import os
import unicodedata

import pytest

from total_recall import config, projects
from total_recall.errors import TotalRecallError

HARD_PATHS = [
    "/home/u/client-a",
    "/home/u/client_a",
    "/home/u/client.a",
    "/home/u/client a",
    "/home/u/caf\u00e9",
    unicodedata.normalize("NFD", "/home/u/caf\u00e9"),
    "/home/u/\u65e5\u672c\u8a9e",
    "/home/u/x y/",
    "/home/u/x y//",
    "/home/u//x y",
    "/home/u/./x y",
    "/home/u/w/../x y",
    "/",
    "",
    "C:\\work\\repo",
    "/home/a b/c.d_e",
    "/tmp/\u00fcn\u00ef/x",
    "/x/" + "y" * 300,
    "/home/u/emoji-\U0001f600",
    "/home/u/bad-\udcff-surrogate",
]


def hook_module():
    spec = importlib.util.spec_from_file_location(
        "session_start_hook", config.resource_dir("hooks") / "session_start.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", HARD_PATHS, ids=repr)
def test_the_hook_computes_the_same_digest_key(path):
    """Replaces test_memory.py::test_digest_key_matches_the_hook (same paths, and harder ones)."""
    assert hook_module().digest_key(path) == projects.digest_key(path)


def test_folder_collisions_never_share_a_digest():
    keys = {
        projects.digest_key(p)
        for p in ("/home/u/client-a", "/home/u/client_a", "/home/u/client.a", "/home/u/client a")
    }
    assert len(keys) == 4
    assert len({projects.claude_folder(p) for p in ("/home/u/client-a", "/home/u/client_a")}) == 1


def test_one_project_whatever_its_spelling():
    nfc = "/home/u/caf\u00e9"
    assert projects.digest_key(unicodedata.normalize("NFD", nfc)) == projects.digest_key(nfc)
    assert projects.digest_key("/home/u/x y/") == projects.digest_key("/home/u/x y")
    assert projects.digest_key("/home/u/./w/../x y") == projects.digest_key("/home/u/x y")


def test_transcript_folder_is_claude_codes_rule(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert projects.transcript_folder("/home/u/my_app.v2") == "-home-u-my-app-v2"
    assert projects.transcript_folder("caf\u00e9") == projects.claude_folder(
        os.path.join(str(tmp_path), "caf\u00e9")
    )
    assert projects.transcript_folder("x").endswith("-x")


def test_short_names_and_resolution():
    known = ["/home/u/Atlas", "/home/u/atlas/sub", "/srv/other", ""]
    assert projects.short_name("/home/u/Atlas") == "atlas"
    assert projects.short_name("") == ""
    assert projects.resolve(known, "ATLAS", False, None) == ["/home/u/Atlas"]
    assert projects.resolve(known, "/srv/other/", False, None) == ["/srv/other"]
    assert projects.resolve(known, None, False, "/home/u/atlas/sub/deep") == ["/home/u/atlas/sub"]
    assert projects.resolve(known, None, False, "/home/u/Atlas2") is None  # a prefix is not inside
    assert projects.resolve(known, None, True, "/srv/other") is None
    with pytest.raises(TotalRecallError, match="no indexed project matches"):
        projects.resolve(known, "missing", False, None)
