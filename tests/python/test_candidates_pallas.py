"""Candidates as they come (issue 21): the task's whole file, kernels that ask
for their chip, races between DMAs in flight, out-of-bounds block indices,
Pallas cheats; on real JAX in TPU interpret mode on the CPU.
Run: .venv/bin/python -m unittest discover -s tests/python -p 'test_candidates_pallas.py' -v
"""

import ast
import glob
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CANDS = os.path.join(HERE, "candidates")
TINY = os.path.join(HERE, "tasks", "tiny_rmsnorm")
# ../shared/benchmarks beside the main checkout (two levels up from a worktree)
BENCHMARKS = next((d for d in (os.environ.get("MK_BENCHMARKS"), os.path.join(ROOT, "..", "shared", "benchmarks"),
                                os.path.join(ROOT, "..", "..", "shared", "benchmarks")) if d and os.path.isdir(d)),
                  os.path.join(ROOT, "..", "shared", "benchmarks"))

sys.path.insert(0, os.path.join(ROOT, "targets", "pallas"))
H = importlib.import_module("harness")  # the package targets/pallas/harness/

spec = importlib.util.spec_from_file_location("harness_tests", os.path.join(HERE, "test_pallas_harness.py"))
T = importlib.util.module_from_spec(spec)
spec.loader.exec_module(T)
run_harness = T.run_harness


def read(name):
    with open(os.path.join(CANDS, name)) as f:
        return f.read()


class TestScreenWholeFile(unittest.TestCase):
    """Only code that can run is screened: a task's file with its benchmark()
    helper and __main__ block passes; the same imports reached from the
    entry do not."""

    def test_task_file_with_benchmark_helper_and_main_block_is_clean(self):
        self.assertEqual(H.scan_candidate(read("pallas_whole_file.py")), [])

    def test_every_published_task_file_passes_the_screen(self):
        files = sorted(glob.glob(os.path.join(BENCHMARKS, "jaxbench", "*", "baseline.py"))
                       + glob.glob(os.path.join(BENCHMARKS, "maxkernel", "*", "reference.py")))
        if not files:
            self.skipTest("no published benchmarks at %s (they live outside the repository)" % BENCHMARKS)
        self.assertEqual(len(files), 100)
        for f in files:
            with open(f) as fh:
                self.assertEqual(H.scan_candidate(fh.read()), [], f)

    def test_helpers_reached_from_the_entry_are_screened(self):
        reached = {
            "called": "def helper():\n    import os\ndef workload(x):\n    helper()\n    return x\n",
            "by getattr name": "import jax\ndef helper():\n    import os\ndef workload(x):\n"
                               "    return getattr(jax, 'helper')\n",
            "aliased at module level": "def helper():\n    import os\nrun = helper\ndef workload(x):\n    return x\n",
            "as a default": "def helper():\n    import os\ndef workload(x, f=helper):\n    return x\n",
            "as a decorator": "def deco(f):\n    import os\n    return f\n@deco\ndef workload(x):\n    return x\n",
            "through another helper": "def a():\n    import os\ndef b():\n    a()\ndef workload(x):\n"
                                      "    b()\n    return x\n",
        }
        for how, src in reached.items():
            bad = H.scan_candidate(src)
            self.assertTrue(any("import of os" in b for b in bad), "%s: %r" % (how, bad))

    def test_main_block_runs_when_name_is_rebound_and_its_else_always(self):
        rebound = "__name__ = '__main__'\nif __name__ == '__main__':\n    import os\ndef workload(x):\n    return x\n"
        self.assertTrue(any("import of os" in b for b in H.scan_candidate(rebound)))
        orelse = "if __name__ == '__main__':\n    pass\nelse:\n    import sys\ndef workload(x):\n    return x\n"
        self.assertTrue(any("import of sys" in b for b in H.scan_candidate(orelse)))

    def test_time_and_json_may_be_imported_but_not_used(self):
        self.assertEqual(H.scan_candidate("import time\nimport json\ndef workload(x):\n    return x\n"), [])
        for src in ("import time\ndef workload(x):\n    time.sleep(1)\n    return x\n",
                    "from time import perf_counter as pc\ndef workload(x):\n    pc()\n    return x\n",
                    "import json\ndef workload(x):\n    return json.loads('1')\n"):
            bad = H.scan_candidate(src)
            self.assertTrue(any("is not allowed" in b and "use of" in b for b in bad), bad)

    def test_patched_clock_in_a_reached_helper_is_refused(self):
        bad = H.scan_candidate(read("pallas_patch_clock.py"))
        self.assertTrue(any("assigning into imported module time" in b for b in bad), bad)

    def test_screened_nodes_leave_out_only_unreached_bodies(self):
        tree = ast.parse(read("pallas_whole_file.py"))
        lines = {getattr(n, "lineno", None) for n in H.screened_nodes(tree)}
        src = read("pallas_whole_file.py").splitlines()
        self.assertNotIn(src.index("    import time") + 1, lines)
        self.assertNotIn(src.index("    import json") + 1, lines)
        self.assertIn(src.index("def _kernel(x_ref, s_ref, o_ref):") + 2, lines)  # reached from workload


class _Spec:
    def __init__(self, block_shape, index_map=None):
        self.block_shape, self.index_map = block_shape, index_map


class _Arr:
    def __init__(self, *shape):
        self.shape = shape


class TestScaleSigns(unittest.TestCase):
    """What makes a test-scaled case wait for a larger scale (see
    tests/lua/pallas_escalate_test.lua for the whole path)."""

    def test_empty_grid_and_blocks_larger_than_their_arrays(self):
        hints = H.scale_hints((0, 1, 0), [_Spec((512, 512)), _Spec((512, 256))], _Spec((512, 512)),
                              [_Arr(256, 256), _Arr(256, 256)], [_Arr(256, 256)])
        self.assertEqual(hints, ["empty grid (0, 1, 0)", "block (512, 512) of input 0 exceeds its shape (256, 256)",
                                 "block (512, 256) of input 1 exceeds its shape (256, 256)",
                                 "block (512, 512) of output 0 exceeds its shape (256, 256)"])
        self.assertEqual(H.scale_hints((2,), [_Spec((8, 128)), _Spec(None)], [_Spec((8, 128))],
                                       [_Arr(16, 128), _Arr(128)], [_Arr(16, 128)]), [])

    def test_a_grid_that_leaves_part_of_an_output_unwritten(self):
        # 8p_GEMM's expert grid, rounded down, at N = 3584: one 2048-wide column tile
        ij = _Spec((1024, 2048), lambda i, j, k: (i, j))
        self.assertEqual(H.scale_hints((1, 3584 // 2048, 1), [], [ij], [], [_Arr(1024, 3584)]),
                         ["the grid writes 2048 of the 3584 entries of output 0 in dimension 1"])
        # rounded up (an edge block), or exact: covered
        self.assertEqual(H.scale_hints((1, 2, 1), [], [ij], [], [_Arr(1024, 3584)]), [])
        self.assertEqual(H.scale_hints((2, 2), [], [_Spec((8, 128), lambda i, j: (i, j))], [], [_Arr(16, 256)]), [])
        # an index map that needs scalar-prefetch refs: no sign from it
        pre = _Spec((8, 128), lambda i, lens_ref: (lens_ref[i], 0))
        self.assertEqual(H.scale_hints((1,), [], [pre], [], [_Arr(64, 128)]), [])

    def test_own_check_is_a_raise_or_assert_in_the_candidate(self):
        path = os.path.join(CANDS, "pallas_big_blocks_checked.py")
        ns = {}
        with open(path) as f:
            exec(compile(f.read(), path, "exec"), ns)
        try:
            ns["workload"](_Arr(256, 256), _Arr(256, 256))
        except ValueError as e:
            self.assertTrue(H.own_check_raised(e, path))
        try:
            ns["undefined_name"]
        except KeyError as e:
            self.assertFalse(H.own_check_raised(e, path))

    def test_a_case_is_scaled_when_its_sizes_are_the_shrunk_ones(self):
        d = tempfile.mkdtemp(prefix="mk-scaled-")
        self.addCleanup(shutil.rmtree, d, True)
        os.makedirs(os.path.join(d, "inputs"))
        with open(os.path.join(d, "cases.json"), "w") as f:
            f.write('{"scaled_config": {"rows": 256, "cols": 256}, "cases": []}')
        for cid, cfg in (("s0", '{"rows": 256, "cols": 256}'), ("c1", '{"rows": 1, "cols": 1024}'),
                         ("c0", '{"rows": 37, "cols": 256}')):
            with open(os.path.join(d, "inputs", cid + ".json"), "w") as f:
                f.write('{"config": %s}' % cfg)
        self.assertEqual([H.case_is_scaled(d, c) for c in ("s0", "c1", "c0")], [True, False, True])


class TestCandidateKinds(unittest.TestCase):
    """The tiny task (16 x 128) frozen with two seeds; each candidate run in
    TPU interpret mode through `harness test`."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mk-pallas-cands-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.tests = os.path.join(cls.tmp, "tests")
        r, _, err = run_harness("freeze", "--task", TINY, "--tests", cls.tests, "--seeds", "0,1", "--heldout", "")
        if r["status"] != "ok":
            raise AssertionError("freeze failed: %r %s" % (r, err[-2000:]))

    def run_cand(self, name, *extra):
        r, _, _ = run_harness("test", "--task", TINY, "--candidate", os.path.join(CANDS, name), "--tests",
                              self.tests, "--cases", "s0,s1", *extra)
        return r

    def test_the_tasks_whole_file_is_a_correct_candidate(self):
        self.assertEqual(self.run_cand("pallas_whole_file.py")["status"], "ok")

    def test_race_between_two_dmas_in_flight_is_found(self):
        self.assertGreaterEqual(H.VECTOR_CLOCK_SIZE, 16)
        r = self.run_cand("pallas_two_dma_race.py")
        self.assertEqual((r["status"], r["reason"]), ("incorrect", "race"), r)
        self.assertIn("kernel.py:16", r["message"])  # the read of B's destination before B's wait

    def test_out_of_bounds_block_index_is_an_out_of_bounds_verdict(self):
        r = self.run_cand("pallas_oob_block.py")
        self.assertEqual((r["status"], r["reason"]), ("incorrect", "out_of_bounds"), r)
        self.assertIn('Out-of-bounds block index (2, 0) for input "x_ref"', r["message"])

    def test_out_of_bounds_dma_never_waited_for_is_found(self):
        # examples/expert/1p_Flash_Attention/oob.py's unguarded prefetch: DMAs run when started
        r = self.run_cand("pallas_oob_unwaited.py")
        self.assertEqual((r["status"], r["reason"]), ("incorrect", "out_of_bounds"), r)

    def test_kernel_asking_for_its_chip_sees_the_emulated_tpu(self):
        self.assertEqual(self.run_cand("pallas_chip_query.py")["status"], "ok")
        self.assertEqual(self.run_cand("pallas_chip_query.py", "--chip", "TPU v5 lite")["status"], "ok")
        # without the emulation (plain interpret mode) the kernel sees the CPU, as it did before
        r = self.run_cand("pallas_chip_query.py", "--interpret", "plain")
        self.assertEqual(r["status"], "compile_error", r)
        self.assertIn("Unsupported TPU device kind: cpu", r["message"])
        r = self.run_cand("pallas_chip_query.py", "--chip", "cpu")
        self.assertEqual((r["status"], r["error"]["kind"]), ("error", "bad_args"), r)

    def test_memo_across_calls_is_caught_by_the_second_seed(self):
        # A host callback is not lowered for the TPU from a CPU host: never correct here...
        r = self.run_cand("pallas_memo.py")
        self.assertEqual((r["status"], r["phase"]), ("compile_error", "lower"), r)
        # ... and without that step, the seed-1 case gets seed 0's answer
        r = self.run_cand("pallas_memo.py", "--interpret", "plain")
        self.assertEqual(r["status"], "incorrect", r)
        self.assertEqual([c["case"] for c in r["cases"] if not c["ok"]][:1], ["s1"], r)

    def test_patched_clock_is_rejected_before_it_runs(self):
        self.assertEqual(self.run_cand("pallas_patch_clock.py")["status"], "rejected")



def marked_processes(marker):
    """Pids of processes whose command line mentions `marker`."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid() and marker in cmdline(int(p))]


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def wait_for(cond, deadline_s):
    """Poll cond() until it is true or deadline_s passes; its last value."""
    end = time.monotonic() + deadline_s
    v = cond()
    while not v and time.monotonic() < end:
        time.sleep(0.2)
        v = cond()
    return v


class TestNoLeftoverProcesses(unittest.TestCase):
    """No harness process outlives the engine that started it: neither after
    `mkengine eval` returns nor after the engine is killed with SIGKILL
    mid-evaluation (then nothing in the engine runs to stop them: each
    watches its stderr, which only the engine reads)."""

    ENGINE = os.path.join(ROOT, "build", "mkengine")

    def setUp(self):
        if not os.path.exists(self.ENGINE):
            self.fail("%s is not built (cmake --build build)" % self.ENGINE)
        self.tmp = tempfile.mkdtemp(prefix="mk-leak-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.task = os.path.join(self.tmp, "task")  # every step names it: the marker of this engine's processes
        shutil.copytree(TINY, self.task)
        py = os.path.join(os.path.realpath(os.path.join(ROOT, ".venv")), "bin", "python")
        self.env = dict(os.environ, TMPDIR=self.tmp, MKENGINE_CACHE=os.path.join(self.tmp, "cache"),
                        JAX_PLATFORMS="cpu", MK_PYTHON=py if os.path.exists(py) else os.environ.get("MK_PYTHON", ""))
        self.addCleanup(self.kill_marked)

    def kill_marked(self):
        for pid in marked_processes(self.tmp):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def eval_cmd(self):
        return [self.ENGINE, "eval", self.task, os.path.join(CANDS, "pallas_whole_file.py"), "--fresh", "--no-profile",
                "--no-tune"]

    def test_none_left_after_eval_returns(self):
        p = subprocess.run(self.eval_cmd(), env=self.env, capture_output=True, text=True, timeout=600)
        self.assertIn(": ok", p.stdout, p.stdout + p.stderr[-2000:])
        left = wait_for(lambda: not marked_processes(self.tmp), 30)
        self.assertTrue(left, "harness processes alive after eval: %r" % marked_processes(self.tmp))

    def test_none_left_after_the_engine_and_a_workers_wrapper_are_killed(self):
        # The wrapper (mk-exec) of each step stops its child when the engine
        # goes; a worker whose wrapper is gone first (the OOM killer's pick
        # on a machine near its memory limit) used to wait out its 600 s
        # idle timeout. Each harness process now watches the engine itself.
        p = subprocess.Popen(self.eval_cmd(), env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            marker = "harness\0worker\0--inbox\0" + self.tmp
            exe = os.path.join(ROOT, "build", "engine", "exec", "mk-exec")

            def wrappers():
                return [q for q in marked_processes(marker) if cmdline(q).startswith(exe)]
            self.assertTrue(wait_for(wrappers, 300), "no pre-started harness worker appeared")
            w = wrappers()[0]
            os.kill(w, signal.SIGKILL)
            self.assertTrue(wait_for(lambda: w not in marked_processes(marker), 30))
        finally:
            p.kill()
            p.wait()
        gone = wait_for(lambda: not marked_processes(self.tmp), 60)
        self.assertTrue(gone, "harness processes alive 60 s after the engine was killed: %r"
                        % [cmdline(q)[:200] for q in marked_processes(self.tmp)])
        # Their directories stay (nothing of the engine ran to remove them)
        # until the next engine's first evaluator sweeps them; a directory
        # of the same name without the held marker is not the engine's.
        def worker_dirs():
            return sorted(n for n in os.listdir(self.tmp) if n.startswith("mk-pallas-worker-"))
        left = worker_dirs()
        self.assertTrue(left, "the killed engine's workers had no directories under TMPDIR")
        os.mkdir(os.path.join(self.tmp, "mk-pallas-worker-not-ours"))
        c_task = os.path.join(ROOT, "tests", "tasks", "rmsnorm_small")
        q = subprocess.run([self.ENGINE, "eval", c_task, os.path.join(c_task, "reference.c"), "--no-tune",
                            "--no-profile", "--min-time", "0.01"], env=self.env, capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(q.returncode, 0, q.stdout + q.stderr[-2000:])
        self.assertEqual(worker_dirs(), ["mk-pallas-worker-not-ours"])

if __name__ == "__main__":
    unittest.main()
