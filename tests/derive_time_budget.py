"""Write tests/time_budget.toml from measured runs, so the budget follows what was measured
rather than what would make a report quiet.

    .venv/bin/pytest -q -n 2 --junitxml=suite.xml                 # the suite, as make test
    .venv/bin/pytest -q -n 2 -m "not slow" --junitxml=check.xml   # the check tier, as make check
    .venv/bin/python -m tests.derive_time_budget suite.xml check.xml --note "2026-11-28, ..."

The totals are the team's budget for the pytest part of each command (`make test` within
15 minutes on a fresh clone, its `.venv` install and ruff included; `make check` within 2),
with each run's measured wall time (the XML's `testsuite` time) beside them: a run over
budget says so at its end. Each test's setup + call + teardown (its `testcase` time) gets
headroom; a test gets a line of its own only where that is past its tier's default share.
"""

from __future__ import annotations

import argparse
import math
import xml.etree.ElementTree as ET
from pathlib import Path

HEADROOM = 1.25  # x the measured seconds, then rounded up
DEFAULT = {"check": 3, "slow": 15}  # a test's share when it has no line of its own
# Seconds of pytest in `make test` (15 minutes less a fresh clone's .venv install, 1 min 3 s
# with uv's cache empty on 2 cores on 2026-11-28, and ruff) and in `make check` (2 minutes
# less ruff and the docs build, 2 s): --suite-budget / --check-budget when those change.
BUDGET = {"suite": 835, "check": 115}


def measured(xml: Path) -> tuple[float, dict[str, float]]:
    """(the run's wall seconds, {test id: seconds}) from a pytest --junitxml file."""
    suite = ET.parse(xml).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    tests = {}
    for case in suite.iter("testcase"):
        # classname "tests.test_x" or "tests.test_x.TestY": back to a pytest node id
        parts = case.get("classname", "").split(".")
        at = next(i for i, p in enumerate(parts) if p.startswith("test_"))
        path = "/".join(parts[: at + 1]) + ".py"
        nodeid = "::".join([path, *parts[at + 1 :], case.get("name", "")])
        tests[nodeid] = tests.get(nodeid, 0.0) + float(case.get("time", 0))
    return float(suite.get("time", 0)), tests


def toml_key(nodeid: str) -> str:
    """A test id as a TOML key: a literal string, which takes a parameter's quotes and
    backslashes as they are (pytest's ids escape what is not printable ASCII)."""
    if "'" in nodeid or not nodeid.isprintable():
        raise ValueError(f"a test id TOML cannot hold as a literal key: {nodeid!r}")
    return f"'{nodeid}'"


def share(seconds: float) -> int:
    return math.ceil(seconds * HEADROOM)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", type=Path, help="junit XML of the whole suite (make test's run)")
    ap.add_argument("check", type=Path, help="junit XML of -m 'not slow' (make check's run)")
    ap.add_argument("--note", required=True, help="when, where and how the runs were measured")
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("time_budget.toml"))
    ap.add_argument("--suite-budget", type=int, default=BUDGET["suite"])
    ap.add_argument("--check-budget", type=int, default=BUDGET["check"])
    args = ap.parse_args()
    suite_wall, suite = measured(args.suite)
    check_wall, check = measured(args.check)
    lines = [
        "# The suite's budget: the wall time of `make test`'s and `make check`'s pytest run (2",
        "# workers; 15 and 2 minutes for the whole commands, less the .venv install, ruff and the",
        "# docs build), and each test's share in seconds of setup + call + teardown. The end of",
        "# every pytest run states its wall time against its total and lists the tests past their",
        "# share (tests/conftest.py): a report for review, never a failure. Written by",
        "# `python -m tests.derive_time_budget` from measured runs (the measured figure in",
        f"# parentheses; a share is it x{HEADROOM}, rounded up); re-derive it from a new measured",
        "# run rather than raising a share to fit, and give the reason in the commit message.",
        f"# Measured: {args.note}",
        "",
        "[total]",
        f"suite = {args.suite_budget}  # ({suite_wall:.0f}) pytest part of make test",
        f"check = {args.check_budget}  # ({check_wall:.0f}) pytest part of make check",
        "",
        "[default]",
        f"check = {DEFAULT['check']}  # a test of the check tier (make check)",
        f"slow = {DEFAULT['slow']}  # any other test without a line below",
        "",
        "[tests]",
    ]
    rows = []
    for nodeid, secs in suite.items():
        tier = "check" if nodeid in check else "slow"
        secs = max(secs, check.get(nodeid, 0.0))  # a check test: the slower of its two runs
        if share(secs) > DEFAULT[tier]:
            rows.append((secs, nodeid))
    for secs, nodeid in sorted(rows, reverse=True):
        lines.append(f"{toml_key(nodeid)} = {share(secs)}  # ({secs:.1f})")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(
        f"{args.out}: suite {suite_wall:.0f} s of {args.suite_budget}, "
        f"check {check_wall:.0f} s of {args.check_budget}, {len(rows)} tests with a share"
    )


if __name__ == "__main__":
    main()
