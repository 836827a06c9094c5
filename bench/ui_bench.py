"""Benchmark of the run viewer in Chromium (issue 23).

  /usr/bin/python3 bench/ui_bench.py page [N]      a N-node run's page (default 10,000): time to usable
  /usr/bin/python3 bench/ui_bench.py cpu [REPEATS]  engine CPU of a scripted run, page open vs not

page: the run is written by `mkengine script bench/ui_bench.lua make`, served
by `mkengine serve`; Chromium (headless, Debian's chromium-driver) opens it;
"usable" = every node counted, the tree drawn (the next animation frame
after), and a clicked node's panel showing its code. Repeated 3 times, fresh
page each time.

cpu: `mkengine run beam tests/tasks/rmsnorm_small --model scripted` (width 2,
depth 2) with and without `--ui`, alternating, REPEATS each (default 2); with
--ui a Chromium page is open on the run for its whole life. The figure is
the engine process's own CPU (its threads' schedstat, sampled every 10 ms
until it exits: compilers and candidates are other processes and not
counted).
Runs vary by tens of percent on a loaded machine, more than the viewer
costs; the steadier figure is the viewer's own share, which `run --ui`
prints at its end (CPU of the viewer's Lua work, loading its modules
included, and of the HTTP library, against the engine's os.clock()).
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from selenium import webdriver  # Debian's python3-selenium
from selenium.webdriver.chrome.service import Service

HOME = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("MKENGINE_BUILD", os.path.join(HOME, "build"))
MK = os.path.join(BUILD, "mkengine")


def browser():
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        o.add_argument(a)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=o)


def start_viewer(args):
    p = subprocess.Popen([MK] + args, cwd=HOME, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.search(r"viewer at (http://\S+)#token=", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, m.group(1)
    raise SystemExit("the engine printed no URL")


def fmt(xs, unit):
    xs = sorted(xs)
    return "%.3g %s (min-max %.3g-%.3g, n=%d)" % (statistics.median(xs), unit, xs[0], xs[-1], len(xs))


USABLE = """
const [n, done] = [arguments[0], arguments[arguments.length - 1]];
const t0 = performance.now();
(function wait() {
  if (window.mkui && mkui.nodeCount() >= n) requestAnimationFrame(() => done(performance.now() - t0));
  else setTimeout(wait, 5);
})();
"""


def page(n):
    tmp = tempfile.mkdtemp(prefix="mk-ui-bench-")
    run = os.path.join(tmp, "run")
    subprocess.run([MK, "script", "bench/ui_bench.lua", "make", run, str(n)], cwd=HOME, check=True)
    srv, url = start_viewer(["serve", run])
    d = browser()
    d.set_script_timeout(120)
    loads, clicks, busy, busy_click = [], [], [], []
    d.execute_cdp_cmd("Performance.enable", {})

    def task_s():  # the renderer's main thread: seconds spent running tasks (CPU-like, not waiting)
        return {m["name"]: m["value"] for m in d.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]}["TaskDuration"]
    try:
        for _ in range(3):
            t0 = time.monotonic()
            d.get(url)  # serve of a run prints its page
            d.execute_async_script(USABLE, n)
            loads.append(time.monotonic() - t0)
            b1 = task_s()  # the counter starts again with each document
            busy.append(b1)
            t1 = time.monotonic()
            d.execute_async_script("""
              const done = arguments[arguments.length - 1];
              mkui.select('n%04d').then(() => done(document.querySelector('#panel pre.node-code') !== null));
            """ % (n // 2))
            clicks.append(time.monotonic() - t1)
            busy_click.append(task_s() - b1)
    finally:
        d.quit()
        srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d-node run, navigation to tree drawn: %s" % (n, fmt(loads, "s")))
    print("  page main thread busy meanwhile: %s" % fmt(busy, "s"))
    print("click to a node's code shown: %s" % fmt([c * 1000 for c in clicks], "ms"))
    print("  page main thread busy meanwhile: %s" % fmt([b * 1000 for b in busy_click], "ms"))


def engine_cpu(pid, proc):
    """The engine's own CPU seconds (its threads' time on a CPU, in ns, from
    /proc/PID/task/*/schedstat), the last sample before it exited."""
    last = 0.0
    while proc.poll() is None:
        try:
            total = 0
            for tid in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    total += int(f.read().split()[0])
            last = total / 1e9
        except (OSError, IndexError, ValueError):
            pass
        time.sleep(0.01)
    return last


def one_run(ui):
    tmp = tempfile.mkdtemp(prefix="mk-ui-cpu-")
    args = [MK, "run", "beam", "tests/tasks/rmsnorm_small", "--model", "scripted", "--set", "width=2", "--set",
            "depth=2", "--run-dir", os.path.join(tmp, "run"), "--quiet"] + (["--ui"] if ui else [])
    env = dict(os.environ, TMPDIR=tmp, MKENGINE_CACHE=os.path.join(BUILD, "test-cache"))
    p = subprocess.Popen(args, cwd=HOME, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    d = None
    share = []
    if ui:
        for line in p.stderr:
            m = re.search(r"viewer at (http://\S+)", line)
            if m:
                d = browser()
                d.get(m.group(1))
                break

    tail = []

    def drain():
        for line in p.stderr:
            tail[:] = (tail + [line.rstrip()])[-5:]
            m = re.search(r"the viewer used ([0-9.]+) ms of CPU \(loading it ([0-9.]+), "
                          r"the HTTP library ([0-9.]+)\), ([0-9.]+) %", line)
            if m:
                share.append(tuple(float(x) for x in m.groups()))
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    t0 = time.monotonic()
    cpu = engine_cpu(p.pid, p)
    wall = time.monotonic() - t0
    reader.join(30)
    if d:
        d.quit()
    shutil.rmtree(tmp, ignore_errors=True)
    if p.returncode != 0:  # a run that failed measures nothing: left out, and said
        print("  a run%s exited %d, left out: %s" % (" with --ui" if ui else "", p.returncode, " | ".join(tail)))
        return None
    if ui and share:
        print("  viewer: %.2f ms CPU (loading it %.2f, HTTP library %.2f), %.2f %% of the engine's" % share[0])
        one_run.shares.append(share[0])
    return cpu, wall


one_run.shares = []


def cpu(repeats):
    plain, viewed = [], []
    for _ in range(repeats):
        for out, ui in ((plain, False), (viewed, True)):
            r = one_run(ui)
            if r:
                out.append(r)
    a = statistics.median(c for c, _ in plain)
    b = statistics.median(c for c, _ in viewed)
    print("engine CPU without the page: %s; walls %s" % (fmt([c for c, _ in plain], "s"), [round(w) for _, w in plain]))
    print("engine CPU with the page open: %s; walls %s" % (fmt([c for c, _ in viewed], "s"), [round(w) for _, w in viewed]))
    print("difference of the medians: %+.1f %%" % ((b - a) / a * 100))
    if one_run.shares:
        print("the viewer's own share of the engine CPU: %s" % fmt([s[3] for s in one_run.shares], "%"))
        print("  its CPU: %s, of which loading it %s and the HTTP library %s" % (
            fmt([s[0] for s in one_run.shares], "ms"), fmt([s[1] for s in one_run.shares], "ms"),
            fmt([s[2] for s in one_run.shares], "ms")))


if __name__ == "__main__":
    print("machine: load %s" % open("/proc/loadavg").read().split()[:3])
    what = sys.argv[1] if len(sys.argv) > 1 else "page"
    if what == "page":
        page(int(sys.argv[2]) if len(sys.argv) > 2 else 10000)
    elif what == "cpu":
        cpu(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    else:
        raise SystemExit(__doc__)
    print("machine: load %s" % open("/proc/loadavg").read().split()[:3])
