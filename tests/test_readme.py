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
