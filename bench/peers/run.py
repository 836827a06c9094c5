#!/usr/bin/env python3
"""The peers, side by side (issue 24 item 5): OpenEvolve, ShinkaEvolve and
mkengine's node loop, each for N iterations against the same loopback
OpenAI-compatible model, with the same trivial evaluator, 2 evaluations in
flight, full rewrites. Prints one table: wall, CPU and peak memory per
iteration and the ratios to mkengine.

Started by bench/peers/run.sh, which installs the peers into their own venv.

The model: tests/fake_llm/bench_server.py --program --delay 0, a loopback
test double that answers every chat call at once with a full rewrite of a
~2 KB Python program (numbered, so every candidate differs). It runs in its
own process and is not counted. The evaluator: bench/peers/evaluate.py
(compiles the candidate, calls solve(3) for a score).

What one iteration is, per system (all of it is counted, in every process
the system starts):
  OpenEvolve 0.4.0   in one of its 2 worker processes: a prompt built from
                     a snapshot of its database (parent, top and diverse
                     programs, artifacts), one chat call, the code block
                     parsed, the candidate written to a temp file, the
                     evaluator's evaluate() called in that worker; then the
                     main process adds the program to its MAP-Elites islands.
  ShinkaEvolve 0.0.7 in its async runner: a parent and inspirations sampled
                     from its SQLite database, a prompt built, one chat call,
                     the full rewrite applied, a Python process started for
                     evaluate.py (its only local mode), its metrics.json read
                     back, the program stored in SQLite; console tables printed
                     (to a file here).
  mkengine (python)  one task of the engine: a prompt holding the best
                     program, one chat call, the code block extracted, the
                     candidate written, evaluate.py run as a process by
                     mk.proc (the same process ShinkaEvolve starts), a node
                     committed to the git graph with its score.
  mkengine (worker)  the same, but evaluate() runs in a long-lived Python
                     process per task (evaluate.py --serve: a path per line
                     in, evaluate()'s JSON out), as OpenEvolve runs it in its
                     worker processes: no Python start per candidate.
  mkengine (true)    the same with /bin/true as the evaluator process: the
                     engine's own cost and one process start, no Python.
Like for like: OpenEvolve is compared with mkengine (worker) (both call
evaluate() inside a Python process that stays up), ShinkaEvolve with
mkengine (python) (both start a Python process per candidate).
mkengine here is the node loop of bench/peers/mkengine_loop.lua, not a whole
`mkengine run` (which needs a target that compiles and benchmarks): it has
no strategy choosing among many parents and no prompt assembly from a
knowledge base, which the peers' iterations include.

Wall per iteration = the time from the model's first answer to its last in
the run of N, divided by the N - 1 iterations between them (the model
server stamps its answers), so start-up and shut-down are left out; the
whole run's wall divided by N is shown beside it. CPU per iteration =
(CPU of the run of N - CPU of a run of N0) / (N - N0), again without
start-up. CPU = user + system time of the system's process and every
process it waited for (getrusage of the waited child). Peak memory = the
largest sum of RSS over the system's process tree, sampled every 0.1 s (a
whole-run figure, not per iteration). Medians over R repeats with min-max.

Usage: run.py --venv DIR [--iterations N] [--small N0] [--repeats R] [--only NAMES]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def proc_tree_rss(root):
    """Sum of RSS (bytes) of root and its descendants."""
    parent, rss = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
            fields = s[s.rindex(")") + 2:].split()
            parent[int(d)] = int(fields[1])
            rss[int(d)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [root]
    kids = {}
    for p, pp in parent.items():
        kids.setdefault(pp, []).append(p)
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(kids.get(p, []))
    return total


def measure(argv, env, log):
    """Run argv; return (wall s, cpu s, peak tree RSS bytes, exit code)."""
    with open(log, "w") as out:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        peak = 0
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, proc_tree_rss(p.pid))
            time.sleep(0.1)
        wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, peak, p.returncode


def calls(url, reset=False):
    """(count, first, last): the model's answers since the last reset, and the
    times of the first and the last."""
    with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/calls" + ("?reset" if reset else ""), timeout=10) as r:
        n, first, last = r.read().split()
        return int(n), float(first), float(last)


def fmt(xs, scale=1.0, unit=""):
    s = sorted(x * scale for x in xs)
    if not s:
        return "-"
    n = len(s)
    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2

    def num(x):
        return "%.0f" % x if abs(x) >= 100 else "%.1f" % x if abs(x) >= 10 else "%.2f" % x
    if n == 1:
        return "%s%s" % (num(med), unit)
    return "%s%s (%s-%s)" % (num(med), unit, num(s[0]), num(s[-1]))


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def machine():
    with open("/proc/loadavg") as f:
        return "load " + " ".join(f.read().split()[:3])


# Each peer beside the mkengine run that evaluates the same way (like for
# like, see the header), then beside the engine's own cost.
PAIRS = [("openevolve", "mkengine-worker"), ("shinka", "mkengine-python"),
         ("openevolve", "mkengine-true"), ("shinka", "mkengine-true")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", required=True, help="the peers' venv (bench/peers/run.sh makes it)")
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--small", type=int, default=10, help="iterations of the run subtracted (start-up)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="openevolve,shinka,mkengine-python,mkengine-worker,mkengine-true")
    ap.add_argument("--mkengine", default=os.path.join(ROOT, "build", "mkengine"))
    a = ap.parse_args()
    if a.iterations <= a.small:
        sys.exit("run.py: --iterations must be larger than --small")
    py = os.path.join(os.path.abspath(a.venv), "bin", "python")
    work = tempfile.mkdtemp(prefix="mk-peers-")
    env = dict(os.environ, MK_PEERS_KEY="loopback-test-key", MK_PEERS_PYTHON=py, OPENAI_API_KEY="loopback-test-key",
               PYTHONDONTWRITEBYTECODE="1", MKENGINE_HOME=ROOT)
    port_file = os.path.join(work, "port")
    srv = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "fake_llm", "bench_server.py"),
                            "--port-file", port_file, "--delay", "0", "--program", "--watch-pid", str(os.getpid())])
    try:
        while not os.path.exists(port_file):
            time.sleep(0.05)
        url = "http://127.0.0.1:%d/v1" % int(open(port_file).read().split()[0])
        systems = {
            "openevolve": ("OpenEvolve 0.4.0", lambda n, d: [py, os.path.join(HERE, "openevolve_run.py"), str(n), url, d]),
            # generation 0 is the initial program: N generations after it make N calls
            "shinka": ("ShinkaEvolve 0.0.7", lambda n, d: [py, os.path.join(HERE, "shinka_run.py"), str(n + 1), url, d]),
            "mkengine-python": ("mkengine (python evaluator)", lambda n, d: [
                a.mkengine, "script", os.path.join(HERE, "mkengine_loop.lua"), str(n), "2", url, "python", d]),
            "mkengine-worker": ("mkengine (evaluator worker)", lambda n, d: [
                a.mkengine, "script", os.path.join(HERE, "mkengine_loop.lua"), str(n), "2", url, "worker", d]),
            "mkengine-true": ("mkengine (/bin/true evaluator)", lambda n, d: [
                a.mkengine, "script", os.path.join(HERE, "mkengine_loop.lua"), str(n), "2", url, "true", d]),
        }
        names = [s for s in a.only.split(",") if s]
        print("peers: %d iterations (minus a run of %d), %d repeat(s); %s; %d cores" % (
            a.iterations, a.small, a.repeats, machine(), os.cpu_count()))
        res = {}
        for r in range(a.repeats):
            for name in names:
                label, cmd = systems[name]
                got = {}
                for n in (a.small, a.iterations):
                    d = os.path.join(work, "%s-%d-%d" % (name, n, r))
                    os.makedirs(d)
                    calls(url, reset=True)
                    wall, cpu, peak, code = measure(cmd(n, d), env, d + ".log")
                    made, first, last = calls(url)
                    if code != 0 or made < n:
                        sys.stdout.write(open(d + ".log").read()[-3000:])
                        sys.exit("run.py: %s failed (exit %d, %d model calls for %d iterations); log %s.log"
                                 % (label, code, made, n, d))
                    got[n] = (wall, cpu, peak, made, (last - first) / (made - 1))
                (w0, c0_, _, m0, _), (w1, c1, p1, m1, step) = got[a.small], got[a.iterations]
                per = res.setdefault(name, {"wall": [], "cpu": [], "peak": [], "whole": [], "calls": []})
                per["wall"].append(step)
                per["cpu"].append((c1 - c0_) / (m1 - m0))
                per["peak"].append(p1)
                per["whole"].append(w1 / m1)
                per["calls"].append(m1)
                print("  repeat %d %-32s %d calls: wall %.2f s, CPU %.2f s, peak %.0f MB; %d calls: wall %.2f s, "
                      "CPU %.2f s" % (r + 1, label, m1, w1, c1, p1 / 2**20, m0, w0, c0_), flush=True)
        print()
        print("| system | wall per iteration | CPU per iteration | peak memory (tree RSS) | whole run / N |")
        print("|---|---|---|---|---|")
        for name in names:
            p = res[name]
            print("| %s | %s | %s | %s | %s |" % (
                systems[name][0], fmt(p["wall"], 1e3, " ms"), fmt(p["cpu"], 1e3, " ms"), fmt(p["peak"], 2**-20, " MB"),
                fmt(p["whole"], 1e3, " ms")))
        print()
        print("| ratio, peer / mkengine | wall | CPU | memory |")
        print("|---|---|---|---|")
        for peer, base in PAIRS:
            if peer in res and base in res:
                p, b = res[peer], res[base]
                print("| %s / %s | %.1fx | %.1fx | %.1fx |" % (
                    systems[peer][0], systems[base][0], median(p["wall"]) / median(b["wall"]),
                    median(p["cpu"]) / median(b["cpu"]), median(p["peak"]) / median(b["peak"])))
        print()
        print("medians over %d repeat(s), (min-max); wall per iteration from the model's first to its last answer;"
              " CPU per iteration = (run of %d - run of %d) / their difference in model calls; %s at the end"
              % (a.repeats, a.iterations, a.small, machine()))
    finally:
        srv.kill()
        srv.wait()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
