"""Every command of the README's example session runs, copied from the README as it stands, and so does
its recipe example (issue: "every command in the README is copy-pasted by a test")."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from reconguard.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def _block(text: str, marker: str, lang: str) -> str:
    start = text.index(marker)
    m = re.search(rf"```{lang}\n(.*?)```", text[start:], re.S)
    return m.group(1)


@pytest.mark.slow
def test_readme_examples_run(tmp_path, monkeypatch, capsys):
    text = README.read_text(encoding="utf-8")
    commands = [line for line in _block(text, "<!-- readme-examples -->", "bash").splitlines() if line.strip()]
    recipe = _block(text, "### Recipes", "yaml")
    assert "kind: sweep" in recipe and len(commands) >= 15
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-sweep.yaml").write_text(recipe)
    for line in commands:
        argv = shlex.split(line)
        assert argv[0] == "reconguard", line
        assert main(argv[1:]) == 0, (line, capsys.readouterr().err[-2000:])
    out = capsys.readouterr().out
    assert "identified" in out and "bound" in out
    assert (tmp_path / "runs" / "my-sweep" / "report.html").is_file()


def test_readme_audit_examples_run(tmp_path):
    """README's "Audit your own model": the three examples, copied as they stand, run in a shell."""
    import os
    import subprocess
    import sys

    script = _block(README.read_text(encoding="utf-8"), "<!-- readme-audit -->", "bash")
    assert script.count("reconguard audit ") == 3
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "OMP_NUM_THREADS": "2", "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    for kind in ("encoder", "encrypted", "classifier"):
        folder = tmp_path / "runs" / f"audit-{kind}"
        assert (folder / "report.html").is_file() and (folder / "results.json").is_file(), kind
    assert "no attacker can go below" in proc.stdout and "identified" in proc.stdout and "AttAcc@1" in proc.stdout
