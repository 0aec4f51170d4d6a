"""OS service files and the calls to systemctl/launchctl (faked as executables on PATH)."""

from __future__ import annotations

import configparser
import plistlib
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from total_recall import service
from total_recall.errors import ConfigError

ODD_HOME = Path('/srv/odd home/100% $HOME "quoted"')


@pytest.fixture
def user_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


def fake_tools(tmp_path: Path, monkeypatch, exit_code: int = 0, names=("systemctl", "launchctl")) -> Path:
    """Executables that log their arguments; PATH holds nothing else, so the real ones never run."""
    bin_dir, calls = tmp_path / "fakebin", tmp_path / "calls.log"
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        tool = bin_dir / name
        tool.write_text(
            f'#!/bin/sh\necho "{name} $*" >> "{calls}"\necho "{name} says no" >&2\nexit {exit_code}\n'
        )
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    return calls


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def parse_unit(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(text)
    return parser


def test_unit_text_has_the_service_settings():
    unit = parse_unit(service.unit_text("/opt/py/bin/python3", Path("/home/u/.claude-plugin-total-recall")))
    assert unit["Service"]["ExecStart"] == '"/opt/py/bin/python3" -m total_recall daemon'
    assert unit["Service"]["Restart"] == "on-failure"
    assert unit["Service"]["RestartSec"] == "5"
    assert unit["Service"]["Environment"] == '"TOTAL_RECALL_HOME=/home/u/.claude-plugin-total-recall"'
    assert unit["Service"]["UMask"] == "0077"
    assert unit["Install"]["WantedBy"] == "default.target"


def test_unit_text_escapes_specifiers_and_quotes():
    unit = parse_unit(service.unit_text("/opt/my py/bin/python$1", ODD_HOME))
    assert unit["Service"]["ExecStart"] == '"/opt/my py/bin/python$$1" -m total_recall daemon'
    assert unit["Service"]["Environment"] == '"TOTAL_RECALL_HOME=/srv/odd home/100%% $HOME \\"quoted\\""'


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_unit_passes_systemd_analyze_verify(tmp_path):
    unit = tmp_path / "total-recall.service"
    unit.write_text(service.unit_text(sys.executable, ODD_HOME), encoding="utf-8")
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    output = done.stdout + done.stderr
    if done.returncode != 0 and "Failed to initialize manager" in output:
        pytest.skip(f"systemd-analyze cannot run here: {output.strip()}")
    assert done.returncode == 0, output
    assert str(unit) not in output, output  # any warning about our file names it


def test_plist_round_trips():
    data = plistlib.loads(service.plist_bytes("/opt/py/bin/python3", ODD_HOME))
    assert data["Label"] == "com.total-recall.daemon"
    assert data["ProgramArguments"] == ["/opt/py/bin/python3", "-m", "total_recall", "daemon"]
    assert data["RunAtLoad"] is True
    assert data["KeepAlive"] == {"SuccessfulExit": False}
    assert data["EnvironmentVariables"] == {"TOTAL_RECALL_HOME": str(ODD_HOME)}
    assert data["StandardOutPath"] == data["StandardErrorPath"] == str(ODD_HOME / "daemon.log")
    assert data["Umask"] == 63


def test_install_service_writes_unit_under_home_and_enables_it(
    user_home, tmp_path, monkeypatch, isolated_home
):
    log = fake_tools(tmp_path, monkeypatch)
    report = service.install_service(system="linux")
    unit = user_home / ".config" / "systemd" / "user" / "total-recall.service"
    assert report.path == unit and report.written and report.active
    parsed = parse_unit(unit.read_text(encoding="utf-8"))
    assert parsed["Service"]["ExecStart"].startswith(f'"{sys.executable}"')
    assert str(isolated_home) in parsed["Service"]["Environment"]
    assert calls(log) == [
        "systemctl --user daemon-reload",
        "systemctl --user enable --now total-recall.service",
    ]
    assert stat.S_IMODE(isolated_home.stat().st_mode) == 0o700  # home exists for the daemon's log


def test_install_service_honours_xdg_config_home(user_home, tmp_path, monkeypatch):
    fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    report = service.install_service(system="linux")
    assert report.path == tmp_path / "xdg" / "systemd" / "user" / "total-recall.service"


@pytest.mark.parametrize("situation", ["missing", "failing"])
def test_install_service_without_working_systemctl_still_writes_the_unit(
    user_home, tmp_path, monkeypatch, situation
):
    if situation == "missing":
        empty = tmp_path / "empty-bin"
        empty.mkdir()
        monkeypatch.setenv("PATH", str(empty))
    else:
        fake_tools(tmp_path, monkeypatch, exit_code=1)
    report = service.install_service(system="linux")
    assert report.path.is_file() and not report.active
    assert "total-recall daemon" in report.message
    if situation == "failing":
        assert "systemctl says no" in report.message


def test_install_service_on_macos_writes_and_loads_the_agent(user_home, tmp_path, monkeypatch):
    log = fake_tools(tmp_path, monkeypatch)
    report = service.install_service(system="darwin")
    agent = user_home / "Library" / "LaunchAgents" / "com.total-recall.daemon.plist"
    assert report.path == agent and report.active
    assert plistlib.loads(agent.read_bytes())["ProgramArguments"][0] == sys.executable
    assert calls(log)[-1] == f"launchctl load -w {agent}"


def test_reinstall_with_same_settings_rewrites_nothing(user_home, tmp_path, monkeypatch):
    fake_tools(tmp_path, monkeypatch)
    assert service.install_service(system="linux").written
    assert not service.install_service(system="linux").written


def test_uninstall_service_disables_and_removes(user_home, tmp_path, monkeypatch):
    log = fake_tools(tmp_path, monkeypatch)
    path = service.install_service(system="linux").path
    report = service.uninstall_service(system="linux")
    assert not path.exists() and report.written
    assert "systemctl --user disable --now total-recall.service" in calls(log)
    assert not service.uninstall_service(system="linux").written


def test_service_status_reports_file_and_manager_answer(user_home, tmp_path, monkeypatch):
    fake_tools(tmp_path, monkeypatch, exit_code=3)
    status = service.service_status(system="linux")
    assert status["installed"] is False and status["active"] is False
    service.install_service(system="linux")
    assert service.service_status(system="linux")["installed"] is True
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert service.service_status(system="linux")["active"] is None


def test_unsupported_platform_says_how_to_run_by_hand(user_home):
    with pytest.raises(ConfigError, match="total-recall daemon"):
        service.install_service(system="win32")
