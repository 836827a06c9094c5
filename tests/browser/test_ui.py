"""The run viewer in a real Chromium (Debian's chromium + chromium-driver,
driven by python3-selenium): the page of a running scripted search grows
live, a clicked node shows its code and diff, a hitl run is steered from
the page alone (an edited plan and edited code change what the run does),
its decisions survive a kill + resume, and a write without the token is
refused. Screenshots go to $MKENGINE_BUILD/browser-shots/.

Every wait is on something the page or the run shows (WebDriverWait on a
condition, a line printed by the engine), with limits generous enough for a
loaded 2-core machine; nothing sleeps a fixed time to let things happen."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest

HOME = os.environ.get("MKENGINE_HOME", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("MKENGINE_BUILD", os.path.join(HOME, "build"))
MK = os.path.join(BUILD, "mkengine")
TASK = os.path.join(HOME, "tests/tasks/rmsnorm_small")
GOOD = os.path.join(HOME, "examples/suites/cpu/rmsnorm/scripted/stream_store.c")
SHOTS = os.path.join(BUILD, "browser-shots")
LONG = 900  # seconds: a whole scripted search on a busy machine

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait
    MISSING = None
except ImportError as e:  # scripts/setup.sh installs python3-selenium (scripts/packages/ui.txt)
    MISSING = "python3-selenium is not installed (%s): run scripts/setup.sh" % e

DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
if not MISSING and not os.path.exists(DRIVER):
    MISSING = "chromium-driver is not installed: run scripts/setup.sh"


class Engine:
    """An mkengine process; its stderr is read on a thread so its URL line
    (and anything else) can be waited for."""

    def __init__(self, args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        self.lines = []
        self.cond = threading.Condition()
        self.p = subprocess.Popen([MK] + args, cwd=HOME, env=e, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stderr:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)
            self.cond.notify_all()

    def wait_line(self, pattern, timeout=LONG):
        rx = re.compile(pattern)
        with self.cond:
            ok = self.cond.wait_for(lambda: any(l is None or rx.search(l) for l in self.lines), timeout)
            for l in self.lines:
                if l is not None and rx.search(l):
                    return rx.search(l)
        raise AssertionError("engine never printed /%s/ (ok=%s):\n%s" % (pattern, ok, self.output()))

    def output(self):
        with self.cond:
            return "\n".join(l for l in self.lines if l is not None)

    def url(self):
        m = self.wait_line(r"viewer at (http://\S+)#token=([0-9a-f]+)", timeout=300)
        return m.group(1), m.group(2)

    def kill(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
        self.p.wait()

    def wait(self, timeout=LONG):
        return self.p.wait(timeout)


def browser():
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        o.add_argument(a)
    return webdriver.Chrome(service=Service(DRIVER), options=o)


def shot(d, name):
    os.makedirs(SHOTS, exist_ok=True)
    path = os.path.join(SHOTS, name + ".png")
    d.save_screenshot(path)
    print("screenshot:", path)


def until(d, fn, what, timeout=LONG):
    try:
        return WebDriverWait(d, timeout, poll_frequency=0.2).until(lambda _: fn())
    except Exception as e:
        shot(d, "failed-" + re.sub(r"\W+", "-", what))
        raise AssertionError("the page never showed: %s (%s)" % (what, e))


def count(d):
    return int(d.find_element(By.ID, "node-count").text or 0)


@unittest.skipIf(MISSING, MISSING or "")
class RunViewer(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mk-browser-")
        self.env = {"TMPDIR": self.tmp, "MKENGINE_CACHE": os.path.join(BUILD, "test-cache")}
        self.engines = []
        self.d = browser()

    def tearDown(self):
        self.d.quit()
        for e in self.engines:
            e.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def engine(self, args):
        e = Engine(args, self.env)
        self.engines.append(e)
        return e

    def test_live_tree_grows_and_a_node_shows_code_and_diff(self):
        run = os.path.join(self.tmp, "beam")
        e = self.engine(["run", "beam", TASK, "--model", "scripted", "--set", "width=2", "--set", "depth=2",
                         "--run-dir", run, "--ui", "--quiet"])
        url, tok = e.url()
        d = self.d
        d.get(url + "#token=" + tok)
        until(d, lambda: count(d) >= 1, "the reference node")
        first = count(d)
        until(d, lambda: count(d) > first, "the node count growing (was %d)" % first)
        until(d, lambda: d.find_elements(By.CSS_SELECTOR, '#node-list tr[data-id="n0002"]'), "n0002 in the list")
        # click the node in the tree (the canvas), where the page drew it
        pos = d.execute_script("return mkui.nodePos('n0002')")
        self.assertIsNotNone(pos)
        canvas = d.find_element(By.ID, "tree")
        rect = d.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.width, r.height]", canvas)
        ActionChains(d).move_to_element_with_offset(canvas, pos[0] - rect[0] - rect[2] / 2,
                                                   pos[1] - rect[1] - rect[3] / 2).click().perform()
        until(d, lambda: "n0002" in d.find_element(By.ID, "panel").text, "n0002's panel", 60)
        code = until(d, lambda: d.find_elements(By.CSS_SELECTOR, "#panel pre.node-code"), "n0002's code", 60)
        self.assertIn("kernel", code[0].text)
        diff = d.find_element(By.ID, "node-diff")
        self.assertIn("@@", diff.text)
        self.assertTrue(d.find_elements(By.CSS_SELECTOR, "#node-diff .add, #node-diff .del"))
        # values for people: no raw JSON in the metrics table
        metrics = d.find_element(By.CSS_SELECTOR, "#panel table.kv").text
        self.assertNotIn("{", metrics)
        shot(d, "run-live")
        # a write without the token is refused
        status = d.execute_async_script(
            "const done = arguments[0]; fetch('/api/run//stop', {method: 'POST'}).then(r => done(r.status))")
        self.assertEqual(status, 403)
        status = d.execute_async_script(
            "const done = arguments[0]; fetch('/api/run//stop', {method: 'POST', headers: {'X-MK-Token': 'nope'}})"
            ".then(r => done(r.status))")
        self.assertEqual(status, 403)
        self.assertFalse(os.path.exists(os.path.join(run, "stop.json")))

    def make_run(self, name, nodes):
        run = os.path.join(self.tmp, "runs", name)
        subprocess.run([MK, "script", "bench/ui_bench.lua", "make", run, str(nodes)], cwd=HOME, check=True,
                       env=dict(os.environ, **self.env))
        return run

    def test_serve_of_a_run_opens_its_page_and_of_a_directory_the_index(self):
        d = self.d
        one = self.make_run("one", 30)
        self.make_run("two", 12)
        e = self.engine(["serve", one])
        url, tok = e.url()
        self.assertTrue(url.endswith("/run/"), url)
        d.get(url + "#token=" + tok)
        until(d, lambda: count(d) == 30, "the run's 30 nodes", 120)
        shot(d, "serve-run")
        d.get(url[:-len("run/")])  # the index of a single run sends the browser on to it
        until(d, lambda: d.execute_script("return location.pathname") == "/run/", "the redirect to the run", 60)
        until(d, lambda: count(d) == 30, "the run's nodes after the redirect", 120)
        e.kill()
        e = self.engine(["serve", os.path.join(self.tmp, "runs")])
        url, tok = e.url()
        d.get(url + "#token=" + tok)
        rows = until(d, lambda: d.find_elements(By.CSS_SELECTOR, "#runs tbody tr") if len(
            d.find_elements(By.CSS_SELECTOR, "#runs tbody tr")) == 2 else None, "two rows in the index", 60)
        self.assertEqual(sorted(r.find_element(By.TAG_NAME, "a").text for r in rows), ["one", "two"])
        shot(d, "serve-index")
        d.find_element(By.LINK_TEXT, "two").click()
        until(d, lambda: d.execute_script("return location.pathname") == "/run/two", "the page of run two", 60)
        until(d, lambda: count(d) == 12, "run two's 12 nodes", 120)

    def answer_review(self, title, text=None, verb="accept"):
        d = self.d
        until(d, lambda: title in d.find_element(By.ID, "questions").text, "question '%s'" % title)
        if text is not None:
            ta = d.find_element(By.ID, "q-editor")
            d.execute_script("arguments[0].value = arguments[1]", ta, text[:-1])
            ta.send_keys(text[-1])  # the last character typed, as a person would
        d.find_element(By.ID, {"accept": "q-accept", "reject": "q-reject", "quit": "q-quit"}[verb]).click()
        until(d, lambda: title not in d.find_element(By.ID, "questions").text, "question '%s' answered" % title)

    def test_hitl_is_steered_from_the_page_and_survives_kill_and_resume(self):
        run = os.path.join(self.tmp, "hitl")
        with open(GOOD) as f:
            good = f.read()
        e = self.engine(["run", "hitl", TASK, "--model", "scripted", "--set", "iters=2", "--run-dir", run,
                         "--ui", "--quiet"])
        url, tok = e.url()
        d = self.d
        d.get(url + "#token=" + tok)
        my_plan = "Plan from the browser: one pass per row, vectorised store."
        self.answer_review("plan (iteration 1)", my_plan + "\n")
        shot(d, "hitl-question")
        self.answer_review("code (iteration 1)", good)
        # the run evaluates the code typed in the page: kill it in the middle
        decisions = os.path.join(run, "decisions")
        self.assertEqual(len([f for f in os.listdir(decisions) if f.endswith(".json")]), 2)
        e.kill()
        r = self.engine(["resume", run, "--ui", "--quiet"])
        url2, tok2 = r.url()
        d.get(url2 + "#token=" + tok2)
        # iteration 1 is replayed from the recorded decisions; iteration 2 asks
        until(d, lambda: "iteration 2" in d.find_element(By.ID, "questions").text, "a question of iteration 2")
        if "node to expand" in d.find_element(By.ID, "questions").text:
            d.find_element(By.ID, "q-choose").click()
        self.answer_review("plan (iteration 2)", verb="quit")
        self.assertEqual(r.wait(), 0, r.output())
        with open(os.path.join(run, "best", "kernel.c")) as f:
            self.assertEqual(f.read(), good)
        with open(os.path.join(run, "graph.git", "nodes.jsonl")) as f:
            nodes = [json.loads(l.split("\t")[0]) for l in f]
        edited = [n for n in nodes if n[4] == "edit"]
        self.assertEqual(len(edited), 1, nodes)
        plan = subprocess.run(["git", "--git-dir", os.path.join(run, "graph.git"), "show", edited[0][1] + ":plan.md"],
                              capture_output=True, text=True).stdout
        self.assertIn(my_plan, plan)
        with open(os.path.join(run, "events.jsonl")) as f:
            events = [json.loads(l) for l in f]
        asked = [x["title"] for x in events if x["type"] == "question"]
        self.assertEqual(asked.count("plan (iteration 1)"), 1, asked)  # not asked again after the resume
        self.assertEqual(asked.count("code (iteration 1)"), 1, asked)


if __name__ == "__main__":
    if MISSING:
        print("SKIPPED: " + MISSING)
    unittest.main(verbosity=2)
