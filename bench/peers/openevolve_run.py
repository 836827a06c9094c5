"""OpenEvolve side of bench/peers: N iterations against the loopback model.

Run with the peers' venv: openevolve_run.py N BASE_URL OUT_DIR
Full rewrites (diff_based_evolution off), 2 evaluations in flight (its
process pool of 2 workers), no cascade, no LLM feedback, no embeddings,
checkpoints only at the end; everything else as OpenEvolve 0.4.0 sets it.
"""
import os
import sys

from openevolve.api import run_evolution
from openevolve.config import Config, LLMModelConfig

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    n, url, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    cfg = Config()
    cfg.max_iterations = n
    cfg.checkpoint_interval = n + 1
    cfg.log_level = "WARNING"
    cfg.diff_based_evolution = False
    cfg.llm.models = [LLMModelConfig(name="loopback", api_base=url, api_key="loopback-test-key", weight=1.0,
                                     timeout=30, retries=0, retry_delay=0, max_tokens=4096, temperature=0.7)]
    cfg.llm.evaluator_models = list(cfg.llm.models)
    cfg.llm.api_base = url
    cfg.evaluator.parallel_evaluations = 2
    cfg.evaluator.cascade_evaluation = False
    cfg.evaluator.use_llm_feedback = False
    cfg.evaluator.timeout = 60
    cfg.evaluator.max_retries = 0
    r = run_evolution(os.path.join(HERE, "initial.py"), os.path.join(HERE, "evaluate.py"), config=cfg,
                      iterations=n, output_dir=out, cleanup=False)
    print("openevolve: best score %.1f" % r.best_score)


if __name__ == "__main__":
    main()
