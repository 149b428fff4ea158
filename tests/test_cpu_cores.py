"""Which cores a CPU engine computes on: the process's affinity mask, the user's environment
first (pipeline/llm/cpu_cores.py). The engine's own binding is checked on the real vLLM
engine in tests/test_llm_backends.py."""

import logging
import os
import subprocess
import sys

import pytest

from pipeline.core.config import load_config
from pipeline.llm import cpu_cores
from pipeline.llm.cpu_cores import BIND, core_list, split_cores, usable_cores, vllm_cpu_env


def test_core_lists_in_vllms_syntax():
    assert core_list([0, 1, 2, 5]) == "0-2,5"
    assert core_list([7, 3]) == "3,7"
    assert core_list([4]) == "4"
    assert split_cores(list(range(8)), 2) == "0-3|4-7"
    assert split_cores([0, 1, 2], 2) == "0|1"  # the odd core stays unbound
    with pytest.raises(ValueError, match="3 workers"):
        split_cores([0, 1], 3)


def test_every_usable_core_is_bound_unless_the_user_says_otherwise(caplog, monkeypatch):
    monkeypatch.setattr(cpu_cores, "_logged", set())  # as in a fresh process
    cores = usable_cores()
    with caplog.at_level(logging.INFO, logger="pipeline.llm.cpu_cores"):
        env: dict[str, str] = {}
        want = {BIND: core_list(cores), "OMP_NUM_THREADS": str(len(cores))}
        assert vllm_cpu_env(None, 1, env) == want
        assert env == want
        assert f"bound to cores {core_list(cores)}" in caplog.text
        # the user's environment wins, over the profile too
        env = {BIND: "auto", "OMP_NUM_THREADS": "1"}
        assert vllm_cpu_env("0", 1, env) == {}
        assert env == {BIND: "auto", "OMP_NUM_THREADS": "1"}
        # the profile's choice: vLLM's own binding, or a list of its own
        env = {}
        vllm_cpu_env("auto", 1, env)
        assert BIND not in env
        env = {}
        vllm_cpu_env("0", 1, env)
        assert env[BIND] == "0"
    # logged once per process, however many engines start
    n = caplog.text.count("bound to cores")
    with caplog.at_level(logging.INFO, logger="pipeline.llm.cpu_cores"):
        vllm_cpu_env(None, 1, {})
    assert caplog.text.count("bound to cores") == n


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores")
def test_a_narrowed_affinity_mask_narrows_the_binding():
    """`taskset -c N` (or a container's cpuset) is what the process may use, not cpu_count."""
    one = min(os.sched_getaffinity(0))
    code = (
        "import os, json; from pipeline.llm.cpu_cores import vllm_cpu_env;"
        f"os.sched_setaffinity(0, {{{one}}}); env = {{}};"
        "print(json.dumps(vllm_cpu_env(None, 1, env)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f'{{"{BIND}": "{one}", "OMP_NUM_THREADS": "1"}}'


def test_transformers_threads_follow_omp_num_threads_or_every_core(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert cpu_cores.torch_threads() == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert cpu_cores.torch_threads() == len(usable_cores())


def test_the_binding_setting_is_checked_and_left_out_of_the_hash():
    base = load_config(None, [])
    bound = load_config(None, ["llm.cpu_threads_bind=0-3|4-7"])
    assert bound.llm.cpu_threads_bind == "0-3|4-7"
    assert bound.config_hash() == base.config_hash()  # the same records on any cores
    with pytest.raises(ValueError, match="cpu_threads_bind"):
        load_config(None, ["llm.cpu_threads_bind=all cores"])
