"""The trivial evaluator of bench/peers: the same work for every system.

It reads the candidate, checks that it compiles as Python, and scores it by
calling solve(3). Used four ways, as each system runs an evaluator:
  evaluate(program_path) -> {"combined_score": s}   (OpenEvolve, in its worker)
  evaluate.py --program_path P --results_dir D      (ShinkaEvolve: a process that
                                                     writes metrics.json, correct.json)
  evaluate.py --program_path P                      (mkengine: a process; exit 0 = ok)
  evaluate.py --serve                               (mkengine: a long-lived worker
                                                     process, as OpenEvolve's are: a
                                                     path per stdin line, evaluate()'s
                                                     JSON per stdout line)
"""
import argparse
import json
import os
import sys


def score(program_path):
    with open(program_path) as f:
        src = f.read()
    env = {}
    exec(compile(src, program_path, "exec"), env)
    return float(env["solve"](3))


def evaluate(program_path):
    try:
        return {"combined_score": score(program_path)}
    except Exception as e:  # a broken candidate scores 0, it does not stop the search
        return {"combined_score": 0.0, "error": str(e)}


def serve():
    for line in sys.stdin:
        sys.stdout.write(json.dumps(evaluate(line.rstrip("\n"))) + "\n")
        sys.stdout.flush()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program_path")
    ap.add_argument("--results_dir")
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    if a.serve:
        return serve()
    if not a.program_path:
        ap.error("--program_path or --serve is required")
    m = evaluate(a.program_path)
    if a.results_dir:
        os.makedirs(a.results_dir, exist_ok=True)
        with open(os.path.join(a.results_dir, "metrics.json"), "w") as f:
            json.dump({"combined_score": m["combined_score"], "public": {}, "private": {}}, f)
        with open(os.path.join(a.results_dir, "correct.json"), "w") as f:
            json.dump({"correct": "error" not in m, "error": m.get("error")}, f)
    return 0 if "error" not in m else 1


if __name__ == "__main__":
    sys.exit(main())
