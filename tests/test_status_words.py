"""Status words are spelt in two places only: the final statuses (hydragnn_ensemble/result.py's
TrialStatus) and the pending ones (hpo/status.py's PendingStatus). Every other module uses the enums,
so a status cannot be misspelt or forgotten in one mapping (a grep test, like test_layering)."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

from hpo.status import ALL_STATUSES, PendingStatus
from hydragnn_ensemble.result import TrialStatus

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("graph_builders", "hydragnn_ensemble", "hpo", "scheduler", "ensemble")
ENUM_MODULES = {ROOT / "hydragnn_ensemble" / "result.py", ROOT / "hpo" / "status.py"}
WORDS = {s.value for s in ALL_STATUSES}


def status_literals(path: Path) -> list[tuple[int, str]]:
    """``(line, word)`` of every string literal in ``path`` that is exactly a status word."""
    out = []
    for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if token.type != tokenize.STRING:
            continue
        try:
            value = ast.literal_eval(token.string)
        except (ValueError, SyntaxError):
            continue  # an f-string
        if isinstance(value, str) and value in WORDS:
            out.append((token.start[0], value))
    return out


def test_status_words_only_in_the_two_enums_modules() -> None:
    found = {str(p.relative_to(ROOT)): status_literals(p)
             for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py")) if p not in ENUM_MODULES}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_enums_are_the_words_the_readme_documents() -> None:
    assert [s.value for s in TrialStatus] == ["completed", "diverged", "timeout", "stopped", "failed"]
    assert [s.value for s in PendingStatus] == ["running", "interrupted", "retrying", "moved", "suggested"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("<!-- statuses -->"):readme.index("<!-- /statuses -->")]
    rows = [line.split("|")[1].strip().strip("`") for line in table.splitlines() if line.startswith("| `")]
    assert rows == [s.value for s in ALL_STATUSES]
