"""Two GRPO steps of TRL's own trainer on an export, with the export's reward.py, on CPU.

The proof that "export, then train" is one step with TRL: `GRPOTrainer` (trl 1.16.0) reads the
export's `hf/` train split as it is (chat `prompt` plus the columns the reward reads), the
embedded Gemma-3-270M (base; its tokenizer is given a chat template, it has none) samples
completions, and `reward.curriculum_reward`, loaded by path from the export, scores them.
Prints per step the mean reward TRL logged, the share of completions with an <answer> tag and
the step's wall time:
    .venv/bin/python benchmarks/bench_trl_grpo.py [--export OUT] [--steps 2] [--new-tokens 32]
Without --export it exports the hand-made catalog of tests/test_export_reward.py (5 records:
2 with KG waypoints) to a temporary folder first. No hub access: HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CHAT_TEMPLATE = (
    "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def demo_export(base: Path) -> Path:
    from pipeline.catalog.export import export_curriculum
    from tests.test_export_reward import make_catalog

    catalog = make_catalog(base / "catalog.duckdb")
    return export_curriculum(catalog, base / "export", formats=["hf"], validation_fraction=0.0).out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", type=Path, help="an export with hf/ (default: a demo one)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()

    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from pipeline.core.config import load_config
    from pipeline.core.model_refs import resolve_llm

    tmp = Path(tempfile.mkdtemp(prefix="bench_trl_"))
    out = args.export or demo_export(tmp)
    spec = importlib.util.spec_from_file_location("export_reward", out / "reward.py")
    reward = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward)
    train = datasets.load_from_disk(str(out / "hf"))["train"]

    llm = load_config(None, []).llm
    path = resolve_llm(llm.model, llm.cache_dir)
    tok = AutoTokenizer.from_pretrained(path)
    tok.chat_template = tok.chat_template or CHAT_TEMPLATE
    model = AutoModelForCausalLM.from_pretrained(path)

    seen: list[list[str]] = []

    def curriculum_reward(prompts, completions, **columns):
        seen.append([c[0]["content"] if isinstance(c, list) else c for c in completions])
        return reward.curriculum_reward(prompts, completions, **columns)

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.t0, self.seconds = time.perf_counter(), []

        def on_step_end(self, *_a, **_k):
            now = time.perf_counter()
            self.seconds.append(now - self.t0)
            self.t0 = now

    cfg = GRPOConfig(
        output_dir=str(tmp / "grpo"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=args.new_tokens,
        max_steps=args.steps,
        learning_rate=1e-6,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=0,
    )
    timer = StepTimer()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[curriculum_reward],
        args=cfg,
        train_dataset=train,
        processing_class=tok,
        callbacks=[timer],
    )
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    logs = [h for h in trainer.state.log_history if "reward" in h]
    print(f"export {out} ({len(train)} train rows), reward.py: curriculum_reward")
    for i, h in enumerate(logs):
        texts = seen[i] if i < len(seen) else []
        tagged = sum("<answer>" in t for t in texts)
        print(
            f"step {i + 1}: reward mean {h['reward']:.3f} (std {h.get('reward_std', 0):.3f}), "
            f"{tagged}/{len(texts)} completions with <answer>, "
            f"{timer.seconds[i] if i < len(timer.seconds) else float('nan'):.1f} s"
        )
    print(f"{len(logs)} GRPO steps in {wall:.1f} s (train() wall time, CPU)")


if __name__ == "__main__":
    main()
