"""Every CLI command has help text and appears in the README; every setting is documented."""

from __future__ import annotations

import argparse

from conftest import REPO
from total_recall import cli, config


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_has_help_and_is_in_the_readme():
    readme = (REPO / "README.md").read_text()
    commands = _subcommands()
    assert set(commands) == set(cli.COMMANDS)
    for name, sub in commands.items():
        assert sub.description and len(sub.description) > 10, name
        assert f"total-recall {name}" in readme, f"README does not mention `total-recall {name}`"


def test_every_setting_is_documented_in_the_readme():
    readme = (REPO / "README.md").read_text()
    for section, keys in config.DEFAULTS.items():
        for key in keys:
            assert config.env_name(section, key) in readme, config.env_name(section, key)
    for name in (
        "TOTAL_RECALL_HOME",
        "CLAUDE_CONFIG_DIR",
        "OPENAI_API_KEY",
        "OPENAI_TOKEN_TOTAL_RECALL_EMBEDDINGS",
    ):
        assert name in readme
