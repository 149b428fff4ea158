"""The console of a long command: one line per stage and the warnings a person must act on;
what the engines print — child processes included, written straight to descriptor 2 — goes
to the log file, and `-v` brings it back. Checked on a real process, its stdout and stderr
pipes (as in CI: plain lines, no carriage return)."""

import subprocess
import sys
import textwrap

from tests.conftest import ROOT

SCRIPT = textwrap.dedent(
    """
    import logging, subprocess, sys, warnings
    from pathlib import Path
    from cli.console import run_console
    from pipeline.core import progress

    logging.basicConfig(level=logging.INFO)
    with run_console(Path(sys.argv[1]), "test", verbose=sys.argv[2:] == ["-v"]) as console:
        console.warn("resuming unfinished run r1")
        with progress.stage("index") as st:
            print("engine banner on stdout")
            subprocess.run(["sh", "-c", "echo engine core on fd 2 >&2"], check=True)
            warnings.warn("a deprecation nobody acts on")
            logging.getLogger("vllm.engine").warning("engine noise")
            st.finish("425 passages, reused")
        with progress.stage("generation", 2, "shards") as st:
            for done in (1, 2):
                st.update(done, [f"{16 * done}/32 records"])
            logging.getLogger("pipeline.llm").warning("a prompt was cut to fit: act on it")
            logging.getLogger("pipeline.llm").warning("a prompt was cut to fit: act on it")
            st.finish("32 records, 9 pass the run's gates")
    print("the summary")
    """
)
ENGINES = ("engine banner on stdout", "engine core on fd 2", "a deprecation", "engine noise")


def _run(tmp_path, *flags: str) -> tuple[str, str, str]:
    log = tmp_path / "run.log"
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(log), *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout, res.stderr, log.read_text()


def test_the_console_shows_stages_and_warnings_and_the_log_file_the_engines(tmp_path):
    out, err, log = _run(tmp_path)
    console = out + err
    assert "\r" not in console and "\x1b" not in console
    lines = err.splitlines()
    assert lines[0] == f"log: {tmp_path / 'run.log'}"
    assert "warning: resuming unfinished run r1" in lines
    assert any(ln.startswith("index: 425 passages, reused (") for ln in lines)
    assert any(ln.startswith("generation: 1/2 shards, 16/32 records") for ln in lines)
    assert any(ln.startswith("generation: 32 records, 9 pass the run's gates (") for ln in lines)
    assert lines.count("warning: a prompt was cut to fit: act on it") == 1
    assert not [e for e in ENGINES if e in console]
    assert out.strip() == "the summary"  # the command's result still reaches stdout
    assert all(e in log for e in ENGINES)
    assert "index: 425 passages, reused" in log  # the stages are in the log too


def test_verbose_shows_the_engines_on_the_console_and_keeps_them_in_the_log(tmp_path):
    out, err, log = _run(tmp_path, "-v")
    console = out + err
    assert all(e in console for e in ENGINES)
    assert all(e in log for e in ENGINES)
    assert "index: 425 passages, reused" in console
    assert "\r" not in console
