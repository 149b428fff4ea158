"""The vLLM engine and the transformers backend agree on the embedded model.

Its own module, not in tests/test_llm_backends.py, for the suite's memory: the engine's worker
runs its modules in name order, so the transformers model loads there only after that module's
`vllm serve` has stopped, not while both vLLM engines are up (the peak of the run).
"""

import pytest

from pipeline.llm.base import SamplingParams
from tests.test_llm_backends import PROMPTS

pytestmark = pytest.mark.slow

# Measured with this model on this CPU (float32 on both engines, different kernels):
# teacher-forced log-probs differ by at most ~0.02 nats per scored text.
SCORE_TOL = 0.05


def test_vllm_and_transformers_agree_within_measured_tolerance(vllm_llm, llm):
    prompts = [*PROMPTS, PROMPTS[0], "Evidence: Vienna lies on the Danube.\nQuestion:"]
    conts = [" Paris", " William Shakespeare", " the Danube", "\nQuestion: Is it?", " Which"]
    a, b = vllm_llm.score(prompts, conts), llm.score(prompts, conts)
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < SCORE_TOL, (a, b)
    p = SamplingParams(n=1, temperature=0.0, max_tokens=8, stop=("\n",))
    assert vllm_llm.generate(PROMPTS, p) == llm.generate(PROMPTS, p)  # greedy, short answers
