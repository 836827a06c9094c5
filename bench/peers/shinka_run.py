"""ShinkaEvolve side of bench/peers: N generations against the loopback model.

Run with the peers' venv: shinka_run.py N BASE_URL OUT_DIR
Full rewrites only (patch_types ["full"]), 2 evaluation jobs and 2 proposal
jobs in flight, local jobs (its only local mode: a Python process per
evaluation, running evaluate.py), no meta recommendations, no novelty
judge, no embeddings, one model (no bandit); everything else as
shinka-evolve 0.0.7 sets it.
"""
import os
import sys

from shinka.core import EvolutionConfig, ShinkaEvolveRunner
from shinka.database import DatabaseConfig
from shinka.launch import LocalJobConfig

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    n, url, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.environ.setdefault("MK_PEERS_KEY", "loopback-test-key")
    model = "local/loopback@%s?api_key_env=MK_PEERS_KEY" % url
    evo = EvolutionConfig(
        patch_types=["full"], patch_type_probs=[1.0], num_generations=n, job_type="local", language="python",
        llm_models=[model], llm_dynamic_selection=None, meta_rec_interval=None, embedding_model=None,
        init_program_path=os.path.join(HERE, "initial.py"), results_dir=out, novelty_llm_models=None,
        use_text_feedback=False)
    job = LocalJobConfig(eval_program_path=os.path.join(HERE, "evaluate.py"))
    db = DatabaseConfig(db_path=os.path.join(out, "evolution_db.sqlite"))
    runner = ShinkaEvolveRunner(evo, job, db, verbose=False, max_evaluation_jobs=2, max_proposal_jobs=2)
    runner.run()
    print("shinka: done")


if __name__ == "__main__":
    main()
