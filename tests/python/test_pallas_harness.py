"""Tests of the harness, targets/pallas/harness/ (stdlib unittest), on real JAX.

  * pure logic (task loading, YAML, tunables, candidate screen, manifest,
    trace-event median, roofline, test-scale sizes): Python stdlib only;
  * comparison and check: numpy;
  * the JAX paths end to end (freeze, run, check, test, compile errors,
    bench, profile, baseline) with real JAX;
  * real Pallas kernels (the rmsnorm bank, DMA races, out-of-bounds and
    uninitialised reads) in TPU interpret mode on the CPU, and the suite's
    JAXBench references frozen at test scale and checked as candidates.
JAX missing is a failure (TestEnvironment), never a skip: run under the
project's .venv/bin/python (scripts/setup.sh makes it; ctest uses it).
Run: .venv/bin/python -m unittest discover -s tests/python -p 'test_pallas*.py' -v
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HARNESS = os.path.join(ROOT, "targets", "pallas", "harness")  # a package, run as a folder
TASKS = os.path.join(HERE, "tasks")
CANDS = os.path.join(HERE, "candidates")
SUITE = os.path.join(ROOT, "examples", "suites", "pallas")
EXAMPLE = os.path.join(ROOT, "examples", "tasks", "pallas")

sys.path.insert(0, os.path.dirname(HARNESS))
H = importlib.import_module("harness")  # the package; its rooms by name where a test needs one
races = importlib.import_module("harness.races")
timing = importlib.import_module("harness.timing")


def have(mod):
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


HAVE_NUMPY = have("numpy")
HAVE_JAX = have("jax")
_skips = []


def skip_unless(cond, reason):
    if not cond:
        _skips.append(reason)
    return unittest.skipUnless(cond, reason)


def run_harness(*args, env=None):
    """Run the harness in a subprocess; returns (json result, exit code, stderr)."""
    e = dict(os.environ)
    e["MK_PALLAS_POISON_MB"] = "1"
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    e["JAX_PLATFORMS"] = "cpu"  # these tests are about TPU interpret mode on the CPU, also on a GPU host
    e.pop("MK_PALLAS_INTERPRET", None)
    e.pop("MK_PALLAS_TEST_SCALE", None)
    e.update(env or {})
    p = subprocess.run([sys.executable, HARNESS] + list(args), capture_output=True, text=True, env=e, timeout=600)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    if len(lines) != 1:
        raise AssertionError("harness printed %d stdout lines (want 1): %r\nstderr: %s"
                             % (len(lines), p.stdout, p.stderr[-3000:]))
    return json.loads(lines[0]), p.returncode, p.stderr


def class_suite(cls, prefix, task, seeds="0,1", heldout="1001"):
    """A test class's suite of tests/python/tasks/<task>, frozen in a
    temporary directory removed after the class (cls.tmp, task, tests,
    frozen)."""
    cls.tmp = tempfile.mkdtemp(prefix=prefix)
    cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
    cls.task = os.path.join(TASKS, task)
    cls.tests = os.path.join(cls.tmp, "tests")
    cls.frozen = frozen_suite(cls.task, cls.tests, seeds, heldout)


def frozen_suite(task, tests, seeds, heldout):
    """Freeze `task` into `tests` (a class's set-up); its result, or an
    AssertionError with the harness's error."""
    r, _, err = run_harness("freeze", "--task", task, "--tests", tests, "--seeds", seeds, "--heldout", heldout)
    if r["status"] != "ok":
        raise AssertionError("freeze failed: %r %s" % (r, err[-2000:]))
    return r


class TestEnvironment(unittest.TestCase):
    def test_jax_is_importable(self):
        self.assertTrue(HAVE_JAX, "JAX is not importable by %s: run scripts/setup.sh (it installs the pinned "
                        "JAX into .venv/) and run these tests with .venv/bin/python" % sys.executable)


# ---------------------------------------------------------------------------
# Pure logic
# ---------------------------------------------------------------------------

class TestLoad(unittest.TestCase):
    def test_jaxbench_task_loads_without_running_it(self):
        t = H.load_task(os.path.join(SUITE, "rmsnorm"))
        self.assertEqual(t["format"], "jaxbench")
        self.assertEqual(t["name"], "rmsnorm")
        self.assertEqual(t["entry"], "workload")
        self.assertEqual(t["signature"], "def workload(x, scale):")
        self.assertEqual(t["tolerance"], {"atol": 1e-3, "rtol": 1e-3})
        self.assertEqual(t["config"]["rows"], 8192)
        self.assertTrue(t["has_get_flops"])
        self.assertEqual(len(t["test_configs"]), 2)
        self.assertIn("RMSNorm", t["description"])
        self.assertEqual(t["candidate_file"], "kernel.py")

    def test_every_suite_task_loads(self):
        names = sorted(d for d in os.listdir(SUITE) if os.path.isdir(os.path.join(SUITE, d)))
        self.assertGreaterEqual(len(names), 5)
        for n in names:
            t = H.load_task(os.path.join(SUITE, n))
            self.assertEqual(t["name"], n)
            self.assertTrue(t["description"])
            self.assertTrue(t["has_get_flops"], n)

    def test_maxkernel_task_picks_per_configuration_tolerance(self):
        d = os.path.join(TASKS, "tiny_maxkernel")
        t = H.load_task(d)
        self.assertEqual(t["format"], "maxkernel")
        self.assertEqual(t["name"], "tiny_scaled_relu")
        self.assertEqual(t["entry"], "computation")
        self.assertEqual(t["signature"], "def computation(x, alpha):")
        self.assertEqual(t["tolerance"], {"atol": 1e-5, "rtol": 1e-3})
        t1 = H.load_task(d, {"config_index": 1})
        self.assertEqual(t1["tolerance"], {"atol": 1e-4, "rtol": 1e-2})
        self.assertIn("get_inputs", t["input_gen_code"])

    def test_overrides_replace_tolerance_and_name(self):
        t = H.load_task(os.path.join(SUITE, "softmax"), {"atol": 0.5, "rtol": 0.25, "name": "x"})
        self.assertEqual(t["tolerance"], {"atol": 0.5, "rtol": 0.25})
        self.assertEqual(t["name"], "x")

    def test_default_tolerance_is_one_percent(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "baseline.py"), "w") as f:
                f.write("CONFIG = {'n': 4}\ndef create_inputs(dtype=None):\n    pass\ndef workload(x):\n    return x\n")
            self.assertEqual(H.load_task(d)["tolerance"], {"atol": 1e-2, "rtol": 1e-2})

    def test_bad_tasks_are_reported_not_raised_as_bugs(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(H.HarnessError) as c:
                H.load_task(d)
            self.assertEqual(c.exception.kind, "bad_task")
            with open(os.path.join(d, "baseline.py"), "w") as f:
                f.write("def create_inputs():\n    pass\n")
            with self.assertRaises(H.HarnessError) as c:
                H.load_task(d)
            self.assertIn("workload", c.exception.message)
            with open(os.path.join(d, "baseline.py"), "w") as f:
                f.write("def workload(:\n")
            with self.assertRaises(H.HarnessError) as c:
                H.load_task(d)
            self.assertIn("syntax error", c.exception.message)

    def test_mk_format_is_task_lua_plus_reference(self):
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(os.path.join(TASKS, "tiny_rmsnorm", "baseline.py"), os.path.join(d, "reference.py"))
            with open(os.path.join(d, "task.lua"), "w") as f:
                f.write('return { name = "t1", target = "pallas", tolerance = { atol = 1e-4, rtol = 2.5e-3 } }\n')
            self.assertEqual(H.detect_format(d), "mk")
            t = H.load_task(d)
            self.assertEqual(t["reference_file"], "reference.py")
            self.assertEqual(t["entry"], "workload")
            self.assertEqual(t["name"], "t1")
            self.assertEqual(t["tolerance"], {"atol": 1e-4, "rtol": 2.5e-3})

    def test_load_subcommand_prints_one_json_object(self):
        r, code, _ = run_harness("load", "--task", os.path.join(SUITE, "attention"))
        self.assertEqual(code, 0)
        self.assertEqual(r["status"], "ok")
        self.assertEqual(r["task"]["signature"], "def workload(q, k, v):")
        r, code, _ = run_harness("load", "--task", "/nonexistent/dir")
        self.assertEqual(code, 3)
        self.assertEqual(r["status"], "error")
        self.assertEqual(r["error"]["kind"], "bad_task")


class TestYaml(unittest.TestCase):
    TEXT = ("task_id: 41k_Gemm_Add_ReLU  # a comment\n"
            "input_gen_code: |-\n"
            "  def get_inputs(dtype=jnp.float32):\n"
            "      return [1], []\n"
            "rtol: [0.01, 0.1]\n"
            "atol: 1e3\n")

    def test_kernel_task_yaml_is_read_by_pyyaml(self):
        import yaml
        d = H.parse_yaml(self.TEXT)
        self.assertEqual(d, yaml.safe_load(self.TEXT))
        self.assertEqual(d["task_id"], "41k_Gemm_Add_ReLU")  # the comment is not part of the value
        self.assertEqual(d["atol"], "1e3")  # YAML 1.1: a float needs a dot; PyYAML's reading, not a guess

    def test_without_pyyaml_the_error_says_so(self):
        saved = sys.modules.get("yaml")
        sys.modules["yaml"] = None  # `import yaml` raises ImportError
        try:
            with self.assertRaises(H.HarnessError) as cm:
                H.parse_yaml(self.TEXT)
        finally:
            if saved is None:
                sys.modules.pop("yaml", None)
            else:
                sys.modules["yaml"] = saved
        self.assertEqual(cm.exception.kind, "no_yaml")
        self.assertIn("PyYAML", cm.exception.message)

    def test_invalid_yaml_is_a_bad_task(self):
        with self.assertRaises(H.HarnessError) as cm:
            H.parse_yaml("a: [1, 2\n")
        self.assertEqual(cm.exception.kind, "bad_task")


class TestTunables(unittest.TestCase):
    def test_python_and_c_forms(self):
        src = ("import jax\n"
               "# mk:tune block_m = [128, 256]\n"
               "#   mk:tune block_k=(512,)\n"
               "# mk:tune mode = ['a', \"b\"]\n"
               "// mk:tune BLOCK 32 64 128\n"
               "x = 1  # mk:tune not_at_line_start = [1]\n")
        self.assertEqual(H.parse_tunables(src), [
            {"name": "block_m", "values": [128, 256]},
            {"name": "block_k", "values": [512]},
            {"name": "mode", "values": ["a", "b"]},
            {"name": "BLOCK", "values": [32, 64, 128]},
        ])

    def test_malformed_and_duplicate_tunables_raise(self):
        with self.assertRaises(H.HarnessError):
            H.parse_tunables("# mk:tune a = [1, 2\n")
        with self.assertRaises(H.HarnessError):
            H.parse_tunables("# mk:tune a = [1]\n# mk:tune a = [2]\n")
        with self.assertRaises(H.HarnessError):
            H.parse_tunables("# mk:tune a = []\n")

    def test_tunables_subcommand(self):
        r, code, _ = run_harness("tunables", "--candidate", os.path.join(CANDS, "tunable.py"))
        self.assertEqual(code, 0)
        self.assertEqual(r["tunables"], [{"name": "eps_scale", "values": [1, 10000]}])


class TestScan(unittest.TestCase):
    def test_no_way_to_the_interpreter_through_an_allowed_module(self):
        # typing (allowed) imports sys: typing.sys.modules holds the harness's
        # modules, typing.sys._getframe() its frames (examples/expert/1p_Flash_Attention/cheat.py)
        for src in ('import typing\nh = typing.sys.modules["__main__"]\n',
                    'import collections\nf = collections._sys._getframe(1).f_back\n',
                    'import typing\ns = getattr(typing, "sys")\n',
                    'from operator import attrgetter\nimport typing\ns = attrgetter("sys")(typing)\n'):
            self.assertTrue(H.scan_candidate(src), src)

    def test_pallas_kernel_is_clean(self):
        src = ("import functools\nimport jax\nimport jax.numpy as jnp\n"
               "from jax.experimental import pallas as pl\n"
               "from jax.experimental.pallas import tpu as pltpu\n"
               "def k(x_ref, o_ref):\n    o_ref[...] = x_ref[...]\n")
        self.assertEqual(H.scan_candidate(src), [])

    def test_file_process_and_reference_access_are_refused(self):
        for src, word in (("import os\n", "os"), ("import subprocess\n", "subprocess"),
                          ("from pathlib import Path\n", "pathlib"), ("x = open('f')\n", "open"),
                          ("x = eval('1')\n", "eval"), ("import mk_reference\n", "mk_reference"),
                          ("f = (lambda: 0).__globals__\n", "__globals__"),
                          ("from . import baseline\n", "import of ."),
                          ("import sys\n", "sys"), ("import harness\n", "harness"),
                          ("from harness.jaxcall import _REAL\n", "harness"), ("from harness import cli\n", "harness")):
            bad = H.scan_candidate(src)
            self.assertTrue(bad, src)
            self.assertIn(word, bad[0])

    def test_patching_imported_modules_is_refused(self):
        for src in ("import jax\njax.block_until_ready = lambda x: x\n",
                    "from jax import profiler\nprofiler.trace = None\n",
                    "import jax.numpy as jnp\njnp.sqrt.x = 1\n",
                    "import numpy as np\nnp.random.seed = 0\n"):
            bad = H.scan_candidate(src)
            self.assertTrue(bad and "imported module" in bad[0], src)
        # Local names and module-level tunables stay allowed.
        self.assertEqual(H.scan_candidate("import jax\nblock = 128\nd = {}\nd['a'] = 1\n"), [])

    def test_getattr_only_with_constant_public_names(self):
        self.assertEqual(H.scan_candidate("import jax\nf = getattr(jax, 'numpy', None)\n"), [])
        self.assertTrue(H.scan_candidate("import jax\nf = getattr(jax, '__dict__')\n"))
        self.assertTrue(H.scan_candidate("import jax\nn = 'x'\nf = getattr(jax, n)\n"))


class TestManifest(unittest.TestCase):
    def test_verify_detects_changed_missing_and_absent_manifest(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "inputs"))
            os.makedirs(os.path.join(d, "expected"))
            for rel, data in (("inputs/a.npz", b"in"), ("expected/a.npz", b"out"), ("cases.json", b"{}")):
                with open(os.path.join(d, rel), "wb") as f:
                    f.write(data)
            with self.assertRaises(H.HarnessError) as c:
                H.verify_manifest(d)
            self.assertEqual(c.exception.kind, "no_tests")
            self.assertEqual(H.write_manifest(d), 3)
            with open(os.path.join(d, H.MANIFEST)) as f:
                first = f.readline()
            self.assertRegex(first, r"^[0-9a-f]{64}  cases\.json\n$")
            H.verify_manifest(d)
            with open(os.path.join(d, "expected", "a.npz"), "wb") as f:
                f.write(b"forged")
            H.verify_manifest(d, subset={"inputs"})  # only inputs checked
            with self.assertRaises(H.HarnessError) as c:
                H.verify_manifest(d)
            self.assertEqual(c.exception.kind, "tampered")
            self.assertIn("expected/a.npz", c.exception.message)
            os.remove(os.path.join(d, "inputs", "a.npz"))
            with self.assertRaises(H.HarnessError) as c:
                H.verify_manifest(d, subset={"inputs"})
            self.assertIn("missing", c.exception.message)


class TestTraceEvents(unittest.TestCase):
    def planes(self):
        def ev(n, t, d):
            return {"name": n, "start_ns": t, "duration_ns": d}

        return [
            {"name": "/host:CPU", "lines": [{"name": "XLA Modules", "events": [ev("jit_mk_candidate(1)", 0, 9e9)]}]},
            {"name": "/device:TPU:0", "lines": [
                {"name": "XLA Ops", "events": [ev("fusion", 0, 5.0)]},
                {"name": "XLA Modules", "events": [
                    ev("jit_mk_candidate(7)", 100, 1000.0),   # warm-up, dropped by expected_calls
                    ev("jit_other(3)", 150, 50.0),
                    ev("jit_mk_candidate(7)", 200, 3000.0),
                    ev("jit_mk_candidate(7)", 400, 2000.0),
                    ev("jit_mk_candidate(7)", 300, 4000.0),
                ]}]},
        ]

    def test_durations_of_the_named_executable_on_the_device(self):
        d = H.device_event_durations(self.planes(), "jit_mk_candidate", expected_calls=3)
        self.assertEqual([round(x * 1e9) for x in d], [3000, 4000, 2000])  # start order, last 3
        self.assertAlmostEqual(H.median(d), 3e-6)
        self.assertEqual(len(H.device_event_durations(self.planes(), "jit_mk_candidate")), 4)

    def test_no_device_events_gives_empty(self):
        self.assertEqual(H.device_event_durations(self.planes(), "jit_absent"), [])
        self.assertEqual(H.device_event_durations([], "jit_mk_candidate"), [])

    def test_module_name_match_is_exact_on_the_base_name(self):
        self.assertTrue(timing._module_matches("jit_mk_candidate(12)", "jit_mk_candidate"))
        self.assertTrue(timing._module_matches("jit_mk_candidate", "jit_mk_candidate"))
        self.assertFalse(timing._module_matches("jit_mk_candidate_fused(1)", "jit_mk_candidate"))

    def test_timed_calls_bounded_by_max_time_one_at_least(self):
        plan = timing.plan_iters
        self.assertEqual(plan(3, 0, 3, 2.0), 3)
        self.assertEqual(plan(3, 0, 3, 2.0, max_time=30), 3, "2 s calls: all three within 30 s")
        self.assertEqual(plan(3, 0, 3, 12.0, max_time=30), 2)
        self.assertEqual(plan(3, 0, 3, 50.0, max_time=30), 1, "7p's interpreted call: timed once")
        self.assertEqual(plan(3, 10.0, 100, 0.25, max_time=5), 20, "min_time asks 40, max_time allows 20")

    @skip_unless(HAVE_JAX, "jax not installed")
    def test_a_warm_up_call_past_max_time_is_the_one_timing(self):
        import time
        import jax
        import jax.numpy as jnp
        calls = []

        importlib.import_module("harness.jaxcall")._jax()  # the harness's own clock, as its steps set it

        def slow(x):  # a call of at least 50 ms, counted
            calls.append(1)
            time.sleep(0.05)
            return jnp.zeros(1)
        x = jnp.ones(4)
        r = timing.time_compiled(jax, slow, [x], "m", warmup=1, iters=3, use_trace=False, max_time=0.01)
        self.assertEqual((len(calls), r["wall"]["n"], r.get("warmup_only")), (1, 1, True))
        self.assertGreaterEqual(r["latency_s"], 0.05)
        del calls[:]
        r = timing.time_compiled(jax, slow, [x], "m", warmup=1, iters=3, use_trace=False, max_time=100)
        self.assertEqual((len(calls), r["wall"]["n"], r.get("warmup_only")), (4, 3, None))

    def test_summary_median_and_spread(self):
        s = H.summarize([4.0, 1.0, 3.0, 2.0])
        self.assertEqual(s["median_s"], 2.5)
        self.assertEqual((s["min_s"], s["max_s"], s["n"]), (1.0, 4.0, 4))
        self.assertAlmostEqual(s["spread"], (3.0 - 2.0) / 2.5)
        self.assertIsNone(H.summarize([]))


class TestRoofline(unittest.TestCase):
    def test_chip_names(self):
        self.assertEqual(H.chip_peaks("TPU v5 lite")["chip"], "TPU v5e")
        self.assertEqual(H.chip_peaks("TPU v6 lite")["peak_flops"], 918e12)
        self.assertEqual(H.chip_peaks("NVIDIA H200")["peak_bytes_per_s"], 4800e9)
        self.assertIsNone(H.chip_peaks("cpu"))

    def test_bound_classification(self):
        p = H.chip_peaks("TPU v5 lite")  # ridge ~240 FLOP/byte
        mem = H.roofline(1e9, 1e9, 1e9 / 600e9, p)  # 600 GB/s of 819
        self.assertEqual(mem["bound"], "memory")
        self.assertAlmostEqual(mem["bandwidth_fraction"], 600 / 819, places=3)
        comp = H.roofline(1e12, 1e9, 1e12 / 150e12, p)
        self.assertEqual(comp["bound"], "compute")
        slow = H.roofline(1e9, 1e9, 1.0, p)
        self.assertEqual(slow["bound"], "latency")
        self.assertIn("memory-bound", H.roofline_text(mem))
        self.assertIn("TPU v5e", H.roofline_text(comp))
        self.assertNotIn("bound", H.roofline(1e9, 1e9, 1e-3, None))


# ---------------------------------------------------------------------------
# numpy: comparison and check
# ---------------------------------------------------------------------------

@skip_unless(HAVE_NUMPY, "numpy not importable by %s: comparison tests skipped" % sys.executable)
class TestCompare(unittest.TestCase):
    def test_verdicts(self):
        import numpy as np
        w = np.array([[1.0, -2.0], [3.0, 4.0]], np.float32)
        self.assertTrue(H.compare_outputs([w + 1e-4], [w], 1e-3, 1e-3)["ok"])
        r = H.compare_outputs([w + 1.0], [w], 1e-3, 1e-3)
        self.assertEqual((r["ok"], r["reason"]), (False, "mismatch"))
        self.assertIn("4 of 4", r["message"])
        bad = w.copy()
        bad[1, 0] = np.nan
        r = H.compare_outputs([bad], [w], 10.0, 10.0)
        self.assertEqual(r["reason"], "nonfinite")
        self.assertIn("[1, 0]", r["message"])
        self.assertEqual(H.compare_outputs([w.T], [w[:1]], 1, 1)["reason"], "shape")
        self.assertEqual(H.compare_outputs([w, w], [w], 1, 1)["reason"], "count")

    def test_zeros_cannot_pass_a_loose_atol(self):
        import numpy as np
        w = np.full((4, 4), 0.05, np.float32)
        r = H.compare_outputs([np.zeros_like(w)], [w], 1e-1, 1e-1)
        self.assertEqual(r["reason"], "zeros")
        # An all-zero expected output may be matched by zeros.
        self.assertTrue(H.compare_outputs([np.zeros_like(w)], [np.zeros_like(w)], 1e-2, 1e-2)["ok"])
        # Tiny outputs: the absolute term shrinks with the output's RMS.
        tiny = np.full((4,), 1e-4, np.float32)
        self.assertEqual(H.compare_outputs([np.zeros_like(tiny)], [tiny], 1e-2, 0)["reason"], "zeros")
        self.assertTrue(H.compare_outputs([tiny * 1.001], [tiny], 1e-2, 1e-2)["ok"])
        self.assertEqual(H.compare_outputs([tiny * 2], [tiny], 1e-2, 1e-2)["reason"], "mismatch")

    def test_a_bfloat16_references_own_rounding_is_not_a_mismatch(self):
        import numpy as np
        # Outputs of RMS 0.07 (1p's causal attention over 4096 keys): a
        # kernel 4e-4 RMS from the bfloat16 reference fails the RMS-scaled
        # atol (7e-4) at some values but is within the published tolerance.
        rng = np.random.default_rng(0)
        w = rng.normal(0, 0.07, (64, 64))
        g = w + rng.normal(0, 4e-4, w.shape)
        r = H.compare_outputs([g], [w], 1e-2, 1e-2)
        self.assertTrue(r["ok"], r["message"])
        self.assertGreater(r["loose_values"], 0)
        # ... but not a mis-scaled output, nor one value off by more than atol
        self.assertEqual(H.compare_outputs([w * 0.9], [w], 1e-2, 1e-2)["reason"], "mismatch")
        g[3, 3] += 0.02
        self.assertEqual(H.compare_outputs([g], [w], 1e-2, 1e-2)["reason"], "mismatch")

    def test_a_float32_evaluation_of_the_reference_bounds_what_its_own_error_excuses(self):
        import numpy as np
        rng = np.random.default_rng(1)
        hi = rng.normal(0, 1, (32, 32))
        want = hi + rng.choice([-0.25, 0.25], (32, 1))  # a bf16 reference: a rounded mean off per row
        got = hi + rng.normal(0, 1e-3, hi.shape)  # a float32 kernel
        self.assertEqual(H.compare_outputs([got], [want], 1e-2, 1e-2)["reason"], "mismatch")
        r = H.compare_outputs([got], [want], 1e-2, 1e-2, wide=[hi])
        self.assertTrue(r["ok"], r["message"])
        self.assertEqual(r["float32_values"], 32 * 32 - int(r["mismatches"]))
        # off by more than twice the reference's own error: incorrect
        r = H.compare_outputs([hi + 0.6], [want], 1e-2, 1e-2, wide=[hi])
        self.assertEqual(r["reason"], "mismatch")
        self.assertIn("from the reference evaluated in float32", r["message"])
        # off everywhere by what the reference is off at its worst: its RMS error bounds it
        r = H.compare_outputs([hi + 0.45], [want], 1e-2, 1e-2, wide=[hi])
        self.assertTrue(r["ok"], r["message"])
        r = H.compare_outputs([hi + 0.55], [want], 1e-2, 1e-2, wide=[hi])
        self.assertFalse(r["ok"])
        # a value the float32 evaluation has no finite answer for is not excused
        hi2 = hi.copy()
        hi2[0, 0] = np.nan
        self.assertFalse(H.compare_outputs([got], [want], 1e-2, 1e-2, wide=[hi2])["ok"])

    def test_scalar_outputs_compare(self):
        import numpy as np
        self.assertTrue(H.compare_outputs([np.float32(2.0)], [np.array(2.0)], 1e-3, 1e-3)["ok"])
        self.assertEqual(H.compare_outputs([np.float32(3.0)], [np.array(2.0)], 1e-3, 1e-3)["reason"], "mismatch")
        self.assertEqual(H.compare_outputs([np.array([2.0])], [np.array(2.0)], 1e-3, 1e-3)["reason"], "shape")

    def test_matching_nonfinite_expected_values(self):
        import numpy as np
        w = np.array([np.inf, -np.inf, np.nan, 1.0])
        self.assertTrue(H.compare_outputs([w.copy()], [w], 1e-3, 1e-3)["ok"])
        g = w.copy()
        g[0] = 5.0
        self.assertEqual(H.compare_outputs([g], [w], 1e-3, 1e-3)["reason"], "mismatch")

    def test_bfloat16_bits_decode_without_ml_dtypes(self):
        import numpy as np
        f = np.array([1.0, -2.5, 3.140625], np.float32)
        bits = (f.view(np.uint32) >> 16).astype(np.uint16)
        back = H.decode_array(bits, "bfloat16", for_compare=True)
        np.testing.assert_array_equal(back, f)

    def test_check_reads_both_calls_and_reports_the_first_failure(self):
        import numpy as np
        with tempfile.TemporaryDirectory() as d:
            tests, outs = os.path.join(d, "tests"), os.path.join(d, "outs")
            for sub in ("inputs", "expected"):
                os.makedirs(os.path.join(tests, sub))
            os.makedirs(outs)
            want = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
            meta = H.save_arrays(os.path.join(tests, "expected", "s0.npz"), [want])
            with open(os.path.join(tests, "expected", "s0.json"), "w") as f:
                json.dump({"outputs": meta}, f)
            with open(os.path.join(tests, "cases.json"), "w") as f:
                json.dump({"cases": [{"id": "s0"}]}, f)
            H.write_manifest(tests)
            for call, arr in (("first", want), ("repeat", want * 0 + 7)):
                m = H.save_arrays(os.path.join(outs, "s0.%s.npz" % call), [arr])
                with open(os.path.join(outs, "s0.%s.json" % call), "w") as f:
                    json.dump({"outputs": m}, f)
            v = H.check_outputs(tests, outs, ["s0"], 1e-3, 1e-3)
            self.assertEqual(v["status"], "incorrect")
            self.assertIn("repeat call", v["message"])
            os.remove(os.path.join(outs, "s0.repeat.npz"))
            v = H.check_outputs(tests, outs, ["s0"], 1e-3, 1e-3)
            self.assertEqual(v["reason"], "missing")


# ---------------------------------------------------------------------------
# JAX paths end to end (real JAX, or the numpy stand-in)
# ---------------------------------------------------------------------------



@skip_unless(HAVE_NUMPY, "numpy not importable by %s: end-to-end harness tests skipped" % sys.executable)
class TestEndToEnd(unittest.TestCase):
    """freeze -> compile/run/check/test/bench/profile/baseline, real JAX."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mk-pallas-test-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)  # also when setUpClass fails
        cls.task = os.path.join(TASKS, "tiny_rmsnorm")
        cls.tests = os.path.join(cls.tmp, "tests")
        cls.frozen = frozen_suite(cls.task, cls.tests, "0,1", "1001")

    def cand(self, name):
        return os.path.join(CANDS, name + ".py")

    def evaluate(self, name, *extra):
        r, code, _ = run_harness("test", "--task", self.task, "--candidate", self.cand(name),
                                 "--tests", self.tests, *extra)
        self.assertEqual(code, 0, r)
        return r

    def test_freeze_writes_cases_seeds_configs_and_heldout(self):
        ids = [c["id"] for c in self.frozen["cases"]]
        self.assertEqual(ids, ["s0", "s1", "c0", "h1001"])
        shapes = {c["id"]: c["shapes"] for c in self.frozen["cases"]}
        self.assertEqual(shapes["s0"], [[16, 128], [128]])
        self.assertEqual(shapes["c0"], [[5, 7], [7]])
        self.assertTrue([c for c in self.frozen["cases"] if c["heldout"]][0]["id"] == "h1001")
        H.verify_manifest(self.tests)
        self.assertEqual(H.case_ids(self.tests), ["s0", "s1", "c0"])
        self.assertEqual(H.case_ids(self.tests, heldout=True), ["h1001"])
        self.assertEqual(self.frozen["warnings"], [])

    def test_seeds_give_different_inputs_and_seed_zero_is_the_tasks_own(self):
        import numpy as np
        m0, m1 = H.read_case(self.tests, "s0"), H.read_case(self.tests, "s1")
        a0 = H.load_arrays(os.path.join(self.tests, "inputs", "s0.npz"), m0["inputs"])
        a1 = H.load_arrays(os.path.join(self.tests, "inputs", "s1.npz"), m1["inputs"])
        self.assertFalse(np.allclose(a0[0], a1[0]))

    def test_correct_candidate_passes_search_and_heldout(self):
        r = self.evaluate("good")
        self.assertEqual(r["status"], "ok", r)
        self.assertTrue(r["correct"])
        self.assertEqual(len(r["cases"]), 6)  # 3 cases x 2 calls
        r = self.evaluate("good", "--heldout-cases")
        self.assertEqual(r["status"], "ok", r)

    def test_wrong_zero_nan_candidates_are_incorrect_with_a_reason(self):
        for name, reason in (("wrong_eps", "mismatch"), ("zeros", "zeros"), ("nan", "nonfinite")):
            r = self.evaluate(name)
            self.assertEqual(r["status"], "incorrect", name)
            self.assertFalse(r["correct"])
            self.assertEqual(r["reason"], reason, r["message"])

    def test_compile_errors_name_their_phase(self):
        r = self.evaluate("syntax")
        self.assertEqual((r["status"], r["phase"]), ("compile_error", "import"))
        self.assertIn("kernel.py:4", r["message"])
        r = self.evaluate("lower_error")
        self.assertEqual((r["status"], r["phase"], r["kind"]), ("compile_error", "lower", "lowering"))
        self.assertIn("divisible by (8, 128)", r["message"])
        self.assertIn("kernel.py:5 in workload", r["message"])
        r = self.evaluate("noentry")
        self.assertEqual(r["status"], "compile_error")
        self.assertIn("workload", r["message"])

    def test_compile_error_kinds_are_classified_from_their_text(self):
        self.assertEqual(H.classify_compile_error("INTERNAL: Mosaic failed to compile TPU kernel: x"), "mosaic")
        self.assertEqual(H.classify_compile_error("RESOURCE_EXHAUSTED: scoped vmem limit"), "vmem_oom")
        self.assertEqual(H.classify_compile_error("RESOURCE_EXHAUSTED: out of memory"), "oom")
        self.assertEqual(H.classify_compile_error("INTERNAL: something"), "xla")

    def test_rule_breaking_candidate_is_rejected_before_it_runs(self):
        r = self.evaluate("rejected")
        self.assertEqual(r["status"], "rejected")
        self.assertIn("import of os", r["message"])
        r = self.evaluate("patch_timer")
        self.assertEqual(r["status"], "rejected")
        self.assertIn("imported module jax", r["message"])

    def test_candidate_output_on_stdout_does_not_forge_the_result(self):
        r = self.evaluate("printer")
        self.assertEqual(r["status"], "ok")
        self.assertNotIn("forged", r)

    def test_tunable_params_reach_the_candidate(self):
        self.assertEqual(self.evaluate("tunable")["status"], "incorrect")
        self.assertEqual(self.evaluate("tunable", "--params", '{"eps_scale": 1}')["status"], "ok")

    def test_tampered_expected_output_stops_the_check(self):
        tests = os.path.join(self.tmp, "tampered")
        shutil.copytree(self.tests, tests)
        p = os.path.join(tests, "expected", "s1.npz")
        with open(p, "r+b") as f:
            f.seek(-8, 2)
            f.write(b"\x00" * 8)
        r, code, _ = run_harness("test", "--task", self.task, "--candidate", self.cand("good"), "--tests", tests)
        self.assertEqual((r["status"], r["error"]["kind"], code), ("error", "tampered", 3))

    def test_run_then_check_in_separate_processes(self):
        outs = os.path.join(self.tmp, "outs-split")
        r, _, _ = run_harness("run", "--task", self.task, "--candidate", self.cand("good"),
                              "--tests", self.tests, "--outputs", outs)
        self.assertEqual(r["status"], "ok", r)
        self.assertEqual(r["cases"], ["s0", "s1", "c0"])
        # check never imports JAX (nor candidate code): it runs under an
        # interpreter without JAX too.
        r, _, _ = run_harness("check", "--task", self.task, "--tests", self.tests, "--outputs", outs,
                              env={"PYTHONPATH": os.path.join(HERE, "nojax")})
        self.assertEqual(r["status"], "ok", r)

    def test_bench_reports_a_median_and_checks_the_timed_output(self):
        r, _, _ = run_harness("bench", "--task", self.task, "--candidate", self.cand("good"),
                              "--tests", self.tests, "--iters", "5", "--warmup", "1")
        self.assertEqual(r["status"], "ok", r)
        self.assertGreater(r["latency_s"], 0)
        self.assertIn(r["method"], ("device", "wall"))
        self.assertEqual(r["wall"]["n"], 5)
        self.assertEqual(r["timed_scale"], self.timed_scale())
        r, _, _ = run_harness("bench", "--task", self.task, "--candidate", self.cand("wrong_eps"),
                              "--tests", self.tests, "--iters", "3", "--warmup", "1")
        self.assertEqual(r["status"], "incorrect")
        self.assertIn("timed runs", r["message"])

    def test_profile_and_baseline(self):
        r, _, _ = run_harness("profile", "--task", self.task, "--candidate", self.cand("good"),
                              "--tests", self.tests, "--iters", "3", "--warmup", "1")
        self.assertEqual(r["status"], "ok", r)
        self.assertGreater(r["profile"]["flops"], 0)
        self.assertGreater(r["profile"]["bytes"], 0)
        self.assertIn("latency", r["text"])
        r, _, _ = run_harness("baseline", "--task", self.task, "--tests", self.tests, "--iters", "3", "--warmup", "1")
        self.assertEqual(r["status"], "ok", r)
        self.assertEqual(r["flops"], 4 * 16 * 128)  # the task's get_flops()
        self.assertGreater(r["latency_s"], 0)
        # the scale it timed the reference at, as bench records the candidate's (the same case)
        self.assertEqual(r["timed_scale"], self.timed_scale())

    def timed_scale(self):
        """The scale a timing step on the first search case must record."""
        first = self.frozen["cases"][0]
        return {"case": first["id"], "factor": self.frozen["test_scale"]["factor"],
                "tier": self.frozen["test_scale"]["tier"], "shapes": first["shapes"]}

    def test_seeds_that_do_not_reach_the_inputs_are_reported(self):
        with tempfile.TemporaryDirectory() as d:
            task = os.path.join(d, "t")
            os.makedirs(task)
            with open(os.path.join(task, "baseline.py"), "w") as f:
                f.write("import jax.numpy as jnp\nCONFIG = {}\n"
                        "def create_inputs(dtype=jnp.float32):\n    return (jnp.ones((4, 8), dtype),)\n"
                        "def workload(x):\n    return x * 2\n")
            r, _, err = run_harness("freeze", "--task", task, "--tests", os.path.join(d, "tests"),
                                    "--seeds", "0,1", "--heldout", "")
            self.assertEqual(r["status"], "ok", err[-2000:])
            self.assertEqual(len(r["warnings"]), 2, r["warnings"])
            # no size to scale: its own sizes are frozen, with what they cannot test said
            self.assertIn("the reference's output is constant: these tests cannot tell", r["warnings"][0])
            self.assertIn("case s1 has the same inputs as case s0", r["warnings"][1])

    def test_maxkernel_task_end_to_end_with_static_args(self):
        task = os.path.join(TASKS, "tiny_maxkernel")
        tests = os.path.join(self.tmp, "mk-tests")
        r, _, err = run_harness("freeze", "--task", task, "--tests", tests, "--seeds", "0", "--heldout", "")
        self.assertEqual(r["status"], "ok", (r, err[-2000:]))
        self.assertEqual(H.read_case(tests, "s0")["statics"], [2.0])
        r, _, _ = run_harness("test", "--task", task, "--candidate", self.cand("relu_good"), "--tests", tests)
        self.assertEqual(r["status"], "ok", r)


# ---------------------------------------------------------------------------
# Real Pallas kernels in TPU interpret mode (the CPU default)
# ---------------------------------------------------------------------------

SC = importlib.import_module("harness.scaling")  # the test-scale search


class TestTestScale(unittest.TestCase):
    """Size symbols, factors and the resized inputs function (no JAX)."""
    SOURCE = (
        "CONFIG = {'name': 'x', 'rows': 8192, 'heads': 8, 'eps': 1e-5, 'seed': 100000, 'rope_theta': 10000}\n"
        "def create_inputs(dtype=None):\n"
        "    key = jax.random.key(4096)\n"
        "    ks = jax.random.split(key, 64)\n"
        "    batch, width = 512, 1024\n"
        "    height = depth = 32\n"
        "    seed = 2048\n"
        "    L = {'seq': 2048, 'base': 5000}\n"
        "    return (batch, width, height, depth, (4096, 300), L['seq'], 6)\n"
        "def workload(x):\n"
        "    return x.reshape(-1, 300)\n")

    def test_symbols_are_sizes_written_in_config_or_the_inputs_function(self):
        syms = SC.symbols(self.SOURCE, "create_inputs", {"rows": 8192, "heads": 8, "groups": 8, "eps": 1e-5,
                                                         "seed": 100000, "rope_theta": 10000}, "workload")
        # groups <= FLOOR; eps, seed, theta are not sizes; a head count is a symbol at any value (keep_ratios)
        self.assertEqual(syms["config"], {"rows": 8192, "heads": 8})
        # keys and key counts, `seed = ...`, non-size dict entries and small
        # literals are not symbols; 300 is written by the workload: pinned
        self.assertEqual(syms["inputs"], {"batch": 512, "width": 1024, "height": 32, "depth": 32,
                                          "CONFIG['seq']": 2048, "#4096": 4096})
        self.assertEqual(syms["pinned"], {"#300": 300})

    def test_a_size_the_computation_names_is_pinned_not_every_size_of_its_value(self):
        # 45k's way: the workload writes out_features = 8192 and num_groups = 256;
        # in_features is 8192 too, but another size: it scales (else its
        # 8192 x 8192 weight passes the input budget at every factor)
        src = ("CONFIG = {'name': 'x', 'batch': 4096, 'in_features': 8192, 'out_features': 8192, 'groups': 256}\n"
               "def create_inputs(dtype=None):\n"
               "    batch, in_features, out_features = 4096, 8192, 8192\n"
               "    return (batch, in_features), (out_features, in_features), (8192,)\n"
               "def workload(x, w, b):\n"
               "    out_features = 8192\n"
               "    groups = 256\n"
               "    return (x @ w.T + b).reshape(-1, groups, out_features // groups)\n")
        syms = SC.symbols(src, "create_inputs", {"batch": 4096, "in_features": 8192, "out_features": 8192,
                                                 "groups": 256}, "workload")
        self.assertEqual(syms["config"], {"batch": 4096, "in_features": 8192})
        self.assertEqual(syms["inputs"], {"batch": 4096, "in_features": 8192})
        self.assertEqual(syms["pinned"], {"out_features": 8192, "groups": 256, "#8192": 8192})

    def test_sizes_scale_by_one_factor_never_below_the_floor(self):
        self.assertEqual([SC.scaled(v, 16) for v in (8192, 1000, 24, 8, 3)], [512, 62, 8, 8, 3])
        p = SC.plan({"config": {"rows": 8192, "cols": 64}, "inputs": {"#4096": 4096}, "pinned": {}}, 32)
        self.assertEqual(p["config"], {"rows": 256, "cols": 8})
        self.assertEqual(p["inputs"], {"#4096": 128})

    def test_a_product_of_two_sizes_stays_their_product_when_the_floor_stops_one(self):
        # 6p: max_seq_len = pages_per_seq x page_size; at factor 16 page_size
        # stops at 8, so the lengths follow the cache (128), not 4096 / 16
        six = {"config": {"num_seqs": 64, "max_seq_len": 4096, "head_dim": 128, "page_size": 16,
                          "pages_per_seq": 256}, "inputs": {}, "pinned": {}}
        p = SC.plan(six, 16)["config"]
        self.assertEqual((p["pages_per_seq"], p["page_size"], p["max_seq_len"]), (16, 8, 128))
        # no stopped factor: divided as any size (4096 / 16), 64 x 64 being no relation
        two = {"config": {"a": 64, "b": 64, "n": 4096}, "inputs": {}, "pinned": {}}
        self.assertEqual(SC.plan(two, 4)["config"], {"a": 16, "b": 16, "n": 1024})

    def test_factors_go_from_small_sizes_to_the_tasks_own_then_smaller(self):
        syms = {"config": {"rows": 8192}, "inputs": {}}
        self.assertEqual(SC.factors(syms, 256), [32, 16, 8, 4, 2, 1, 64, 128, 256, 512, 1024])
        self.assertEqual(SC.factors({"config": {}, "inputs": {}}, 256), [1])

    def test_the_inputs_function_is_rebuilt_with_the_scaled_sizes(self):
        ns = {"jax": type("J", (), {"random": type("R", (), {"key": staticmethod(lambda k: k),
                                                              "split": staticmethod(lambda k, n: n)})})}
        fn = SC.scaled_inputs_fn(self.SOURCE, "t.py", "create_inputs",
                                 {"batch": 16, "height": 8, "#4096": 128, "CONFIG['seq']": 64}, ns)
        # height = depth = 32 is one written number: both names follow it
        self.assertEqual(fn(), (16, 1024, 8, 8, (128, 300), 64, 6))

    def test_head_counts_are_scaled_together_keeping_their_ratio(self):
        syms = SC.symbols("CONFIG = {}\n", "create_inputs", {"num_q_heads": 64, "num_kv_heads": 8, "head_dim": 128,
                                                              "max_seqs": 64}, "workload")
        self.assertEqual(syms["config"]["num_kv_heads"], 8)  # a head count is a symbol below the floor too
        # two KV heads, not one: with one, a kernel reading the wrong KV group is right
        self.assertEqual(SC.plan(syms, 16)["config"], {"num_q_heads": 8, "num_kv_heads": 2, "head_dim": 8,
                                                       "max_seqs": 8})
        self.assertEqual(SC.plan(syms, 2, "widths")["config"], {"num_q_heads": 32, "num_kv_heads": 4,
                                                                "head_dim": 64})
        # 128 per 8 at factor 64 (2p): 16 per 2, not 16 per 1
        two = {"config": {"num_query_heads": 128, "num_kv_heads": 8}, "inputs": {}, "pinned": {}}
        self.assertEqual(SC.plan(two, 64)["config"], {"num_query_heads": 16, "num_kv_heads": 2})
        # an odd query count keeps one KV head (it must stay a multiple)
        self.assertEqual(SC.plan({"config": {"q_heads": 40, "kv_heads": 8}, "inputs": {}}, 8)["config"],
                         {"q_heads": 5, "kv_heads": 1})
        # equal counts, or counts with no integer ratio, are scaled as any size
        self.assertEqual(SC.plan({"config": {"q_heads": 32, "kv_heads": 32}, "inputs": {}}, 2)["config"],
                         {"q_heads": 16, "kv_heads": 16})
        self.assertEqual(SC.plan({"config": {"q_heads": 48, "kv_heads": 32}, "inputs": {}}, 2)["config"],
                         {"q_heads": 24, "kv_heads": 16})

    def test_the_input_change_moves_scales_and_shifts_so_whole_input_reductions_see_it(self):
        import jax
        import jax.numpy as jnp
        import numpy as np
        tol = {"atol": 1e-2, "rtol": 1e-2}
        x = jax.random.uniform(jax.random.key(0), (64, 256))
        w = jnp.ones((8,))

        def pooled(a, _):  # a global average of a nonlinearity (39k's shape of computation)
            return [np.asarray(jnp.mean(jax.nn.gelu(a), axis=1))]

        def normed(a, _):  # a norm: a per-element output, blind to scale and shift
            return [np.asarray((a - a.mean(axis=1, keepdims=True)) / a.std(axis=1, keepdims=True))]

        def mean_of_normed(a, _):  # 25k: the norm's mean is 0 whatever a is
            return [np.asarray(jnp.mean(normed(a, _)[0], axis=1) + 1.0)]
        moved = jnp.roll(x.reshape(-1), 1).reshape(x.shape)
        self.assertTrue(SC.passes_as(pooled(moved, w), pooled(x, w), tol))  # moving alone: no change seen
        changed = SC._changed_input(jax, np, [x, w])
        self.assertIs(changed[1], w)  # the largest input is the one changed
        self.assertFalse(SC.passes_as(pooled(*changed), pooled(x, w), tol))
        self.assertFalse(SC.passes_as(normed(*changed), normed(x, w), tol))
        self.assertTrue(SC.passes_as(mean_of_normed(*changed), mean_of_normed(x, w), tol))

    def test_trivial_outputs_are_judged_within_the_checks_tolerance_not_exactly(self):
        import numpy as np
        tol = {"atol": 1e-2, "rtol": 1e-2}
        rng = np.random.default_rng(0)
        # 25k's output: mean(beta) for every sample, up to float rounding
        noisy = np.float32(0.0123) + rng.normal(0, 1e-9, 128).astype(np.float32)
        self.assertGreater(float(np.ptp(noisy)), 0.0)  # compared exactly it looked varied
        self.assertEqual(SC._trivial(np, [noisy], tol), SC.CONSTANT)
        self.assertEqual(SC._trivial(np, [np.zeros(16, np.float32)], tol), SC.ZEROS)
        varied = rng.normal(0, 1, 128).astype(np.float32)
        self.assertIsNone(SC._trivial(np, [varied], tol))
        self.assertIsNone(SC._trivial(np, [np.float32(3.0)], tol))  # a scalar: judged by the input change
        self.assertIsNone(SC._trivial(np, [np.float32(0.0123) + rng.normal(0, 1e-3, 128)], tol))
        # an input change that moves the output by rounding only is no change; one the check sees is
        self.assertTrue(SC.passes_as([varied + np.float32(1e-7) * varied], [varied], tol))
        self.assertFalse(SC.passes_as([varied * np.float32(1.05)], [varied], tol))
        # a scalar output (13p's mean loss) as the reference returns it, 0-d
        self.assertTrue(SC.passes_as([np.asarray(np.float32(2.0))], [np.asarray(np.float32(2.0))], tol))
        self.assertFalse(SC.passes_as([np.asarray(np.float32(2.5))], [np.asarray(np.float32(2.0))], tol))


class TestScaleChosen(unittest.TestCase):
    """Each failure class of one-cap-per-entry scaling, with the project's
    own tasks (tests/python/tasks/scale_*): related sizes, a mask built
    from CONFIG, a Python size among the inputs, sizes written in
    create_inputs, a reference that no scale makes testable, limits."""
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mk-pallas-scale-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)

    def freeze(self, name, *extra, env=None):
        tests = os.path.join(self.tmp, name + "-".join(extra))
        r, code, err = run_harness("freeze", "--task", os.path.join(TASKS, name), "--tests", tests,
                                   "--seeds", "0", "--heldout", "", *extra, env=env)
        return r, code, err, tests

    def frozen_and_passes(self, name):
        r, _, err, tests = self.freeze(name)
        self.assertEqual(r["status"], "ok", "%r %s" % (r, err[-2000:]))
        cand = os.path.join(TASKS, name, "baseline.py")
        t, _, err = run_harness("test", "--task", os.path.join(TASKS, name), "--candidate", cand, "--tests", tests)
        self.assertEqual(t["status"], "ok", "the reference as a candidate: %r %s" % (t, err[-2000:]))
        return r

    def test_related_sizes_shrink_together(self):
        r = self.frozen_and_passes("scale_related")
        self.assertEqual(r["test_scale"]["factor"], 8)  # width 2048 -> 256
        self.assertEqual(r["scaled_config"], {"tokens": 128, "width": 256, "latent": 64, "pos": 8})
        self.assertEqual(r["cases"][0]["shapes"], [[2, 128, 256], [256, 72], [64, 256]])

    def test_a_mask_built_from_config_follows_the_case(self):
        r = self.frozen_and_passes("scale_mask")
        self.assertEqual(r["cases"][0]["shapes"][0], [4, 256, 8])  # seq 2048 and dim 64, both /8
        self.assertEqual(r["cases"][0]["output_shapes"], [[4, 256, 8]])

    def test_a_python_size_among_the_inputs_is_static(self):
        r = self.frozen_and_passes("scale_groups")
        self.assertEqual(r["cases"][0]["shapes"], [[256, 64], [8, 64, 32], [8]])  # rows 4096/16, 8 groups

    def test_sizes_written_in_create_inputs_scale_and_the_workloads_own_stay(self):
        r = self.frozen_and_passes("scale_literals")
        ts = r["test_scale"]
        self.assertEqual(ts["inputs"], {"rows": 256, "cols": 64})
        self.assertEqual(ts["pinned"], {"hidden": 2048, "#2048": 2048})
        self.assertEqual(r["cases"][0]["shapes"], [[256, 64], [64, 2048], [2048]])

    def test_cost_is_counted_from_shapes_before_any_input_is_made(self):
        # at its own sizes: 4.3 GFLOP a call, inputs made through 1 GiB;
        # under a 900 MiB limit the freeze only passes if nothing is made there
        r, _, err, tests = self.freeze("scale_cost", env={"MK_PALLAS_MEM_MB": "900"})
        self.assertEqual(r["status"], "ok", "%r %s" % (r, err[-2000:]))
        first, chosen = r["test_scale"]["tried"][0], r["test_scale"]["tried"][-1]
        self.assertEqual((first["factor"], first["inputs_made"]), (1, False), first)
        self.assertIn("FLOP a call, over the budget", first["refused"])
        self.assertGreater(first["flops"], 2e9)
        self.assertEqual((r["test_scale"]["factor"], chosen["inputs_made"]), (2, True))
        self.assertEqual(r["test_scale"]["inputs"], {"batch": 64, "chans": 32, "n": 32})
        cand = os.path.join(TASKS, "scale_cost", "baseline.py")
        t, _, err = run_harness("test", "--task", os.path.join(TASKS, "scale_cost"), "--candidate", cand,
                                "--tests", tests)
        self.assertEqual(t["status"], "ok", (t, err[-2000:]))

    def test_an_output_that_ignores_an_input_everywhere_is_frozen_with_a_warning_after_three_scales(self):
        r = self.frozen_and_passes("scale_ignored")
        ts = r["test_scale"]
        self.assertEqual([t["factor"] for t in ts["tried"]], [8, 4, 2])  # not every factor
        self.assertEqual(ts["factor"], 2)  # the largest sizes tried
        self.assertTrue(any("does not change when the largest input does at any test scale tried" in w
                            for w in r["warnings"]), r["warnings"])

    def test_an_output_constant_up_to_rounding_is_frozen_with_a_warning_after_three_scales(self):
        r, _, err, _ = self.freeze("scale_noise")
        self.assertEqual(r["status"], "ok", "%r %s" % (r, err[-2000:]))
        ts = r["test_scale"]
        self.assertEqual([t["factor"] for t in ts["tried"]], [4, 2, 1])  # exactly compared, 4 passed as testable
        self.assertEqual(ts["tried"][1]["refused"], "the reference's output is constant")
        self.assertEqual(ts["factor"], 1)  # the largest sizes tried: its own
        self.assertTrue(any("the reference's output is constant at any test scale tried" in w
                            for w in r["warnings"]), r["warnings"])

    def test_sizes_tied_to_a_module_table_stay_and_the_widths_shrink(self):
        r = self.frozen_and_passes("scale_tables")
        ts = r["test_scale"]
        self.assertEqual((ts["tier"], ts["factor"]), ("widths", 4))
        self.assertEqual(r["scaled_config"], {"num_heads": 16, "head_dim": 256})
        self.assertEqual(r["cases"][0]["shapes"], [[1024, 16, 256], [16, 256], [32], [32]])
        # every size divided: the reference fails (a negative pad) until that is hopeless
        self.assertTrue(any(t.get("refused", "").startswith("the reference fails") and "tier" not in t
                            for t in ts["tried"]), ts["tried"])
        # escalation freezes the next scale in the same tier
        tests = os.path.join(self.tmp, "scale_tables-f2")
        r2, _, err = run_harness("freeze", "--task", os.path.join(TASKS, "scale_tables"), "--tests", tests,
                                 "--seeds", "0", "--heldout", "", "--scale-factor", "2", "--scale-tier", "widths")
        self.assertEqual(r2["status"], "ok", (r2, err[-2000:]))
        self.assertEqual(r2["scaled_config"], {"num_heads": 32, "head_dim": 512})

    def test_grouped_head_counts_keep_their_ratio_in_the_widths_tier(self):
        r, _, err, _ = self.freeze("scale_gqa")
        self.assertEqual(r["status"], "ok", "%r %s" % (r, err[-2000:]))
        ts = r["test_scale"]
        self.assertEqual((ts["tier"], ts["factor"]), ("widths", 8))
        # 40 query heads per 8 KV heads: 5 per 1, not 8 per 8 (the floor stopped only the KV heads)
        self.assertEqual(r["scaled_config"], {"head_dim": 256, "num_q_heads": 5, "num_kv_heads": 1})
        self.assertEqual(r["cases"][0]["shapes"], [[1024, 5, 256], [1, 256], [32], [32]])

    def test_no_testable_scale_is_one_clear_error(self):
        r, code, err, _ = self.freeze("scale_constant")
        self.assertEqual((code, r["status"], r["error"]["kind"]), (3, "error", "cannot_freeze"))
        self.assertIn("scale_constant cannot be frozen at any test scale", r["error"]["message"])
        self.assertIn("the reference's output is all zeros", r["error"]["message"])
        self.assertNotIn("Traceback", r["error"]["message"])

    def test_memory_and_time_limits_end_the_step_with_one_message(self):
        r, code, _, _ = self.freeze("scale_mask", env={"MK_PALLAS_MEM_MB": "40"})
        self.assertEqual((code, r["status"], r["error"]["kind"]), (3, "error", "memory_limit"))
        self.assertRegex(r["error"]["message"], r"^harness freeze used \d+ MiB, over its limit of 40 MiB")
        r, code, _, _ = self.freeze("scale_mask", env={"MK_PALLAS_TIME_S": "0.5"})
        self.assertEqual((code, r["error"]["kind"]), (3, "time_limit"))
        self.assertIn("ran past its limit of 0.5 s", r["error"]["message"])


@skip_unless(HAVE_JAX, "JAX not importable by %s: float32 reference tests skipped" % sys.executable)
@skip_unless(HAVE_JAX, "JAX not importable")
class TestOwnError(unittest.TestCase):
    """A kernel's error against the reference's own, where the freeze kept
    the reference in float32 (tests/python/tasks/bf16_rowdot: float32 sums
    of bf16 products, tolerance 1e-2): reported on every check, and a
    warning when a passing kernel is far beyond it."""

    @classmethod
    def setUpClass(cls):
        class_suite(cls, "mk-pallas-own-", "bf16_rowdot")

    def check(self, name):
        r, _, err = run_harness("test", "--task", self.task, "--candidate", os.path.join(CANDS, name + ".py"),
                                "--tests", self.tests)
        self.assertEqual(r["status"], "ok", err[-2000:])
        return r

    def test_a_kernel_as_precise_as_the_reference_gets_no_warning(self):
        r = self.check("rowdot_f32")
        self.assertLess(r["error_ratio"], 1)
        self.assertNotIn("warning", r)
        self.assertEqual(self.check("../tasks/bf16_rowdot/baseline")["error_ratio"], 0)

    def test_a_kernel_within_a_loose_tolerance_far_beyond_the_reference_s_error_is_warned_of(self):
        r = self.check("rowdot_off")
        self.assertGreater(r["error_ratio"], 100)  # 0.4% against float32 rounding (2^-16)
        self.assertIn(r["error_ratio_case"], ("s0", "s1"))
        self.assertRegex(r["warning"], r"^within the tolerance, but \d+x the reference's own error \(case s\d: the "
                                       r"reference against its float32 evaluation\): atol=0.01, rtol=0.01 is far "
                                       r"looser than the reference's precision")
        self.assertTrue(all(c["error_ratio"] > 100 for c in r["cases"]), r["cases"])

    def test_the_ratio_is_the_kernel_s_error_over_the_reference_s_own_with_a_floor(self):
        import numpy as np
        C = importlib.import_module("harness.compare")
        hi = np.array([1.0, -2.0, 3.0, 4.0])
        w = hi + np.array([0.01, -0.01, 0.01, -0.01])  # the reference 0.01 RMS off
        self.assertAlmostEqual(C.error_ratio(hi + 0.05, w, hi), 5.0)
        self.assertAlmostEqual(C.error_ratio(hi + 1e-3, hi, hi), 1e-3 / (2 ** -16 * C._rms(hi)))
        self.assertIsNone(C.error_ratio(hi, w, hi[:2]), "shapes differ")


@skip_unless(HAVE_JAX, "JAX not importable")
class TestHeldoutVaries(unittest.TestCase):
    """tests/python/tasks/const_affine: a layer norm whose weight and bias
    the inputs make ones and zeros (and a third constant input it ignores).
    The held-out cases vary the constant inputs the output depends on, so a
    kernel that drops the weight and bias fails them."""

    @classmethod
    def setUpClass(cls):
        class_suite(cls, "mk-pallas-vary-", "const_affine")

    def inputs(self, cid):
        import numpy as np
        m = H.read_case(self.tests, cid)
        return [np.asarray(a) for a in H.load_arrays(os.path.join(self.tests, "inputs", cid + ".npz"), m["inputs"])], m

    def test_the_held_out_case_varies_the_constant_inputs_the_output_depends_on(self):
        import numpy as np
        self.assertEqual([(c["id"], c.get("varied")) for c in self.frozen["cases"]],
                         [("s0", None), ("s1", None), ("h1001", [1, 2])])
        (x, gamma, beta, unused), meta = self.inputs("h1001")
        self.assertEqual(meta["varied"], [1, 2])
        self.assertGreater(float(np.std(gamma)), 0.1)
        self.assertGreater(float(np.std(beta)), 0.1)
        self.assertTrue((unused == 1).all(), "the output ignores it: kept")
        (_, g0, b0, _), _ = self.inputs("s1")
        self.assertTrue((g0 == 1).all() and (b0 == 0).all(), "search cases are the task's own kind of inputs")

    def test_a_kernel_ignoring_the_weight_and_bias_fails_the_held_out_case_only(self):
        def test(name, *extra):
            r, _, err = run_harness("test", "--task", self.task, "--candidate", os.path.join(CANDS, name + ".py"),
                                    "--tests", self.tests, *extra)
            return r["status"]
        self.assertEqual(test("ignore_affine"), "ok")
        self.assertEqual(test("ignore_affine", "--heldout-cases"), "incorrect")
        ref = os.path.join("..", "tasks", "const_affine", "baseline")
        self.assertEqual(test(ref, "--heldout-cases"), "ok", "the reference on the varied inputs is the expected")


@skip_unless(HAVE_JAX, "JAX not importable")
class TestWork(unittest.TestCase):
    """Work inside and outside the Pallas kernels (harness work.py): a loop's
    body counts once per trip, gathers and scatters are work."""

    def work(self, fn, *args):
        import jax
        W = importlib.import_module("harness.work")
        return W.jaxpr_work(jax.make_jaxpr(fn)(*args).jaxpr)

    def test_a_while_loop_s_body_counts_once_per_trip_when_its_jaxpr_fixes_them(self):
        import jax.numpy as jnp
        from jax import lax
        x, w = jnp.ones((16, 32)), jnp.ones((32, 16))
        mm = 2 * 16 * 16 * 32

        def loop(n, start=0, step=1):
            def body(c):
                return c[0] + step, c[1] + x @ w
            return lambda x, w: lax.while_loop(lambda c: c[0] < n, body, (start, jnp.zeros((16, 16))))[1]
        self.assertEqual(self.work(loop(8), x, w)["top"]["dot_general"], 8 * mm)
        self.assertEqual(self.work(loop(8, 2, 3), x, w)["top"]["dot_general"], 2 * mm, "2, 5: two trips")
        self.assertNotIn("dot_general", self.work(loop(0), x, w)["top"], "no trip: no work")

        def traced(x, n):  # a bound only known when it runs: counted once
            return lax.fori_loop(0, n, lambda i, a: a + x @ x.T, jnp.zeros((16, 16)))
        self.assertEqual(self.work(traced, x, 4)["top"]["dot_general"], 2 * 16 * 16 * 32)

        def fori(x):  # Python bounds: a scan of 5 steps
            return lax.fori_loop(0, 5, lambda i, a: a + x @ x.T, jnp.zeros((16, 16)))
        self.assertEqual(self.work(fori, x)["top"]["dot_general"], 5 * mm)

    def test_gathers_and_scatters_count_the_values_they_read_and_write(self):
        import jax.numpy as jnp
        table, idx, upd = jnp.ones((1000, 8)), jnp.array([1, 2, 3]), jnp.ones((3, 8))
        top = self.work(lambda t, i: t[i], table, idx)["top"]
        self.assertEqual(top["gather"], 24, "3 rows of 8 read, not the table's 8000")
        top = self.work(lambda t, i, u: t.at[i].add(u), table, idx, upd)["top"]
        self.assertEqual(top["scatter-add"], 24, "3 rows of 8 written")

    def test_a_candidate_doing_the_reference_s_work_in_a_loop_is_plain_jax(self):
        tmp = tempfile.mkdtemp(prefix="mk-pallas-work-")
        self.addCleanup(shutil.rmtree, tmp, True)
        task = os.path.join(TASKS, "tiny_rmsnorm")
        frozen_suite(task, os.path.join(tmp, "t"), "0", "")
        r, _, err = run_harness("compile", "--task", task, "--candidate", os.path.join(CANDS, "pallas_plain_while.py"),
                                "--tests", os.path.join(tmp, "t"))
        self.assertEqual(r["status"], "ok", err[-2000:])
        w = r["work"]
        self.assertEqual(w["calls"], 1)
        self.assertGreaterEqual(w["plain"], 0.8 * w["reference"], w)  # the engine's plain_work_limit: rejected


class TestConfigurationsForm(unittest.TestCase):
    """MaxKernel's get_inputs: one ([dynamic], [static]) pair, or a list of
    them (one per input configuration), each with its own tolerance."""

    def test_one_pair_and_a_list_of_pairs_are_told_apart(self):
        I = importlib.import_module("harness.inputs")
        x, y = object(), object()
        self.assertEqual(I.configurations(([x, y], [2.0])), [([x, y], [2.0])])
        self.assertEqual(I.configurations(([x], [])), [([x], [])])
        two = [([x], [1.0]), ([y], [2.0])]
        self.assertEqual(I.configurations(two), two, "two configurations, not one pair")
        self.assertEqual(I.configurations([([x, y], [1.0])]), [([x, y], [1.0])])
        self.assertIsNone(I.configurations((x, y)))
        self.assertIsNone(I.configurations([x, [y], []]))

    def test_a_configuration_takes_its_own_tolerance_the_last_reused(self):
        I = importlib.import_module("harness.inputs")
        task = H.load_task(os.path.join(TASKS, "multi_config"))
        self.assertEqual(task["tolerance"], {"atol": 1e-4, "rtol": 1e-4})
        tols = [I.configuration_task(task, k)["tolerance"] for k in range(4)]
        self.assertEqual(tols, [{"atol": 1e-4, "rtol": 1e-4}] + [{"atol": 1e-2, "rtol": 1e-2}] * 3)
        self.assertEqual(I.configuration_task(task, 2)["configuration"], 2)
        one = H.load_task(os.path.join(TASKS, "tiny_rmsnorm"))
        self.assertEqual(I.configuration_task(one, 1)["tolerance"], one["tolerance"], "one tolerance: kept")


@skip_unless(HAVE_JAX, "JAX not importable")
class TestConfigurations(unittest.TestCase):
    """tests/python/tasks/multi_config: get_inputs returns three
    configurations (one row, 256 rows, 7 rows), atol/rtol lists of two and
    three entries. Every configuration is frozen at its own test scale and
    checked with its own tolerance; the result says what passed in each."""

    @classmethod
    def setUpClass(cls):
        class_suite(cls, "mk-pallas-configs-", "multi_config")

    def check(self, name, *extra):
        r, code, err = run_harness("test", "--task", self.task, "--candidate", os.path.join(CANDS, name + ".py"),
                                   "--tests", self.tests, *extra)
        self.assertEqual(code, 0, err[-2000:])
        return r, [(c["configuration"], c["ok"], c["failed"]) for c in r.get("configurations", [])]

    def test_every_configuration_is_frozen_with_its_own_cases_scale_and_tolerance(self):
        cases = self.frozen["cases"]
        self.assertEqual([c["id"] for c in cases], ["k0s0", "k0s1", "k0h1001", "k1s0", "k1s1", "k1h1001",
                                                    "k2s0", "k2s1", "k2h1001"])
        self.assertEqual([c["configuration"] for c in cases], [0] * 3 + [1] * 3 + [2] * 3)
        self.assertEqual([c["tolerance"]["atol"] for c in cases], [1e-4] * 3 + [1e-2] * 6)
        self.assertEqual([c["tolerance"]["rtol"] for c in cases], [1e-4] * 3 + [1e-2] * 6, "the last rtol reused")
        # each at its own test scale: 512 wide halved, the rows kept where 8 or less (the odd 7 stays odd)
        self.assertEqual([c["shapes"][0] for c in cases[::3]], [[1, 256], [128, 256], [7, 192]])
        rec = self.frozen["test_scale"]
        self.assertEqual([(r["configuration"], r["factor"]) for r in rec["configurations"]], [(0, 2), (1, 2), (2, 2)])
        with open(os.path.join(self.tests, "cases.json")) as f:
            self.assertEqual(json.load(f)["configurations"], 3)

    def test_the_reference_passes_every_configuration(self):
        r, per = self.check("../tasks/multi_config/reference")
        self.assertEqual((r["status"], per), ("ok", [(0, True, None), (1, True, None), (2, True, None)]), r)
        self.assertEqual(r["message"], "configurations: 0 passed, 1 passed, 2 passed")
        r, per = self.check("pallas_multi_rmsnorm", "--heldout-cases")
        self.assertEqual((r["status"], [c["cases"] for c in r["configurations"]]),
                         ("ok", [["k0h1001"], ["k1h1001"], ["k2h1001"]]), r)

    def test_a_kernel_off_by_0_1_percent_fails_only_the_configuration_of_the_tight_tolerance(self):
        r, per = self.check("multi_scaled")
        self.assertEqual((r["status"], per), ("incorrect", [(0, False, "k0s0"), (1, True, None), (2, True, None)]))
        self.assertTrue(r["message"].startswith("configurations: 0 failed (case k0s0), 1 passed, 2 passed; case "
                                                "k0s0 (first call, inputs (1, 256) float32"), r["message"])
        self.assertIn("atol=0.0001", r["message"])

    def test_a_kernel_wrong_on_odd_row_counts_fails_only_that_configuration(self):
        r, per = self.check("multi_odd_rows")
        self.assertEqual((r["status"], per), ("incorrect", [(0, True, None), (1, True, None), (2, False, "k2s0")]))
        self.assertEqual([c["cases"] for c in r["configurations"]], [["k0s0", "k0s1"], ["k1s0", "k1s1"], ["k2s0"]])

    def test_at_a_scale_factor_asked_for_every_configuration_is_frozen_there(self):
        r, _, err = run_harness("freeze", "--task", self.task, "--tests", os.path.join(self.tmp, "own"), "--seeds", "0",
                                "--heldout", "", "--scale-factor", "1")
        self.assertEqual(r["status"], "ok", err[-2000:])
        self.assertEqual([(c["id"], c["shapes"][0]) for c in r["cases"]],
                         [("k0s0", [1, 512]), ("k1s0", [256, 512]), ("k2s0", [7, 384])])


class TestFloat32Reference(unittest.TestCase):
    """A bfloat16 reference's own error: a kernel computing in float32 that
    is nearer the true output is correct, one further off than the
    reference's error allows is not (tests/python/tasks/bf16_center)."""
    @classmethod
    def setUpClass(cls):
        class_suite(cls, "mk-pallas-f32-", "bf16_center")

    def evaluate(self, name, *extra, shift=None):
        cand = os.path.join(CANDS, name + ".py")
        if shift is not None:  # a twin of the kernel, off by a constant
            with open(cand) as f:
                src = f.read()
            self.assertIn("\nSHIFT = 0.0", src)
            cand = os.path.join(self.tmp, "shifted.py")
            with open(cand, "w") as f:
                f.write(src.replace("\nSHIFT = 0.0", "\nSHIFT = %r" % shift))
        r, code, err = run_harness("test", "--task", self.task, "--candidate", cand,
                                   "--tests", self.tests, "--interpret", "tpu", *extra)
        self.assertEqual(code, 0, (r, err[-2000:]))
        return r

    def test_the_reference_in_float32_is_frozen_beside_every_case(self):
        self.assertEqual([(c["id"], c["float32"]) for c in self.frozen["cases"]],
                         [("s0", True), ("s1", True), ("h1001", True)])
        self.assertEqual(self.frozen["warnings"], [])
        H.verify_manifest(self.tests)  # the float32 outputs are under the manifest
        import numpy as np
        with open(os.path.join(self.tests, "expected", "s0.json")) as f:
            emeta = json.load(f)
        want = H.load_arrays(os.path.join(self.tests, "expected", "s0.npz"), emeta["outputs"], True)[0]
        hi = H.load_arrays(os.path.join(self.tests, "expected", "s0.f32.npz"), emeta["float32"], True)[0]
        self.assertEqual(emeta["outputs"][0]["dtype"], "bfloat16")
        self.assertEqual(emeta["float32"][0]["dtype"], "float32")
        # the reference is a rounded mean away from its float32 self: 0.25 at most
        self.assertAlmostEqual(float(np.abs(want - hi).max()), 0.25, places=3)

    def test_a_float32_kernel_nearer_the_truth_is_correct_on_search_and_heldout_cases(self):
        r = self.evaluate("center_f32")
        self.assertEqual(r["status"], "ok", r)
        self.assertGreater(r["cases"][0].get("float32_values", 0), 0, r["cases"][0])
        self.assertEqual(self.evaluate("center_f32", "--heldout-cases")["status"], "ok")

    def test_a_kernel_further_off_than_the_references_own_error_is_incorrect(self):
        # off by 0.75: more than twice the reference's own error (0.25) plus the tolerance
        r = self.evaluate("center_f32", shift=0.75)
        self.assertEqual((r["status"], r["reason"]), ("incorrect", "mismatch"), r)
        self.assertIn("from the reference evaluated in float32", r["message"])

    def test_a_reference_that_refuses_or_changes_in_float32_is_frozen_with_a_warning(self):
        for name, body, why in (
                ("bf16_only", "    assert x.dtype == jnp.bfloat16, 'bfloat16 only'\n    return x * 3\n",
                 "the reference fails in float32 (AssertionError: bfloat16 only"),
                ("by_dtype", "    return x * 3 if x.dtype == jnp.bfloat16 else -x\n",
                 "its float32 evaluation is not kept (output 0 is ")):
            task = os.path.join(self.tmp, name)
            os.makedirs(task)
            with open(os.path.join(task, "baseline.py"), "w") as f:
                f.write("import jax.numpy as jnp\nCONFIG = {'name': '%s', 'n': 64}\n"
                        "def create_inputs(dtype=jnp.bfloat16):\n"
                        "    return (jnp.linspace(1.0, 2.0, CONFIG['n'] * 8).reshape(CONFIG['n'], 8).astype(dtype),)\n"
                        "def workload(x):\n%s" % (name, body))
            tests = os.path.join(self.tmp, name + "_tests")
            r, _, err = run_harness("freeze", "--task", task, "--tests", tests, "--seeds", "0", "--heldout", "")
            self.assertEqual(r["status"], "ok", (r, err[-2000:]))
            self.assertEqual(r["cases"][0]["float32"], False)
            self.assertTrue(any(w.startswith("no float32 evaluation of the reference for case s0: " + why)
                                for w in r["warnings"]), r["warnings"])
            self.assertFalse(os.path.exists(os.path.join(tests, "expected", "s0.f32.npz")))


class Session:
    """`harness worker --session` driven as the engine drives it: a JSON
    request line in; a {"started": step} line, then the step's JSON object."""

    def __init__(self, tmp, env=None):
        e = dict(os.environ, MK_PALLAS_POISON_MB="1", PYTHONDONTWRITEBYTECODE="1", JAX_PLATFORMS="cpu")
        e.pop("MK_PALLAS_INTERPRET", None)
        e.update(env or {})
        self.dir = tempfile.mkdtemp(prefix="mk-session-", dir=tmp)
        self.p = subprocess.Popen([sys.executable, HARNESS, "worker", "--inbox", self.dir, "--session"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=e)

    def step(self, *argv):
        """(started line, answer, the step's output) of one step."""
        errf = os.path.join(self.dir, "step.stderr")
        self.p.stdin.write((json.dumps({"argv": list(argv), "cwd": self.dir, "stderr": errf}) + "\n").encode())
        self.p.stdin.flush()
        started = json.loads(self.p.stdout.readline())
        ans = json.loads(self.p.stdout.readline())
        with open(errf) as f:
            return started, ans, f.read()

    def close(self):
        self.p.stdin.close()
        return self.p.wait(60)

    def kill(self):
        self.p.kill()
        self.p.wait(60)
        for f in (self.p.stdin, self.p.stdout):
            if not f.closed:
                f.close()


@skip_unless(HAVE_JAX, "JAX not importable")
class TestSession(unittest.TestCase):
    """One candidate's steps in one process, in the order sent; a second
    candidate refused by it; its output apart from the answers."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mk-pallas-session-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.task = os.path.join(TASKS, "tiny_rmsnorm")
        cls.tests = os.path.join(cls.tmp, "tests")
        frozen_suite(cls.task, cls.tests, "0,1", "")

    def cand(self, name):
        return ["--task", self.task, "--candidate", os.path.join(CANDS, name + ".py")]

    def test_compile_run_bench_in_order_in_one_process_reusing_the_executable(self):
        s = Session(self.tmp)
        self.addCleanup(s.kill)
        outs = os.path.join(self.tmp, "outs-session")
        st, c, out = s.step("compile", *self.cand("printer"), "--tests", self.tests)
        self.assertEqual((st, c["status"], c["session_step"]), ({"started": "compile"}, "ok", 1), c)
        self.assertIn("forged", out, "the candidate's prints go to the step's output file")
        self.assertNotIn("forged", c)
        self.assertGreater(c["compile_s"], 0)
        _, r, out = s.step("run", *self.cand("printer"), "--tests", self.tests, "--outputs", outs)
        self.assertEqual((r["status"], r["session_step"], r["cases"]), ("ok", 2, ["s0", "s1", "c0"]), r)
        self.assertIn("hello from the candidate", out)
        self.assertNotIn("forged", out, "imported once: the module's print ran in the first step only")
        _, b, _ = s.step("bench", *self.cand("printer"), "--tests", self.tests, "--iters", "3", "--warmup", "1")
        self.assertEqual((b["status"], b["session_step"], b.get("reused")), ("ok", 3, True), b)
        self.assertEqual((b["lower_s"], b["compile_s"]), (0, 0), "the compile step's executable is timed")
        self.assertEqual(len({c["process"], r["process"], b["process"]}), 1)
        self.assertGreater(b["cpu_s"], 0)
        # the check is another process, which never imports the candidate
        k, _, _ = run_harness("check", "--task", self.task, "--tests", self.tests, "--outputs", outs)
        self.assertEqual(k["status"], "ok", k)
        self.assertNotEqual(k["process"], c["process"])
        self.assertEqual(s.close(), 0, "EOF on its stdin ends the session")

    def test_a_second_candidate_is_refused_by_the_process_of_the_first(self):
        s = Session(self.tmp)
        self.addCleanup(s.kill)
        _, c, _ = s.step("compile", *self.cand("leak_x64"), "--tests", self.tests)
        self.assertEqual(c["status"], "ok", c)
        _, r, _ = s.step("compile", *self.cand("probe_x64"), "--tests", self.tests)
        self.assertEqual((r["status"], r["error"]["kind"]), ("error", "session"), r)
        self.assertIn("serves one candidate", r["error"]["message"])
        # in a process of its own the probe is correct; after leak_x64 in one
        # process it is not (what the refusal above prevents)
        self.assertEqual(run_harness("test", *self.cand("probe_x64"), "--tests", self.tests)[0]["status"], "ok")
        s.close()
        both = ("import sys\n"
                "sys.path.insert(0, %r)\n"
                "import harness as H\n"
                "for c in sys.argv[1:]:\n"
                "    r, _ = H.run_step(['test', '--task', %r, '--candidate', c, '--tests', %r], sys.stderr)\n"
                "    print(r['status'])\n") % (os.path.dirname(HARNESS), self.task, self.tests)
        p = subprocess.run([sys.executable, "-c", both, os.path.join(CANDS, "leak_x64.py"),
                            os.path.join(CANDS, "probe_x64.py")], capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, JAX_PLATFORMS="cpu", MK_PALLAS_POISON_MB="1"))
        self.assertEqual(p.stdout.split(), ["ok", "incorrect"], p.stderr[-2000:])

    def test_a_request_s_env_sets_its_step_s_memory_limit(self):
        # the engine sends each step's memory limit with it ($MK_PALLAS_MEM_MB
        # for that step only): hog.py's 1 GiB at import passes 700 MiB
        s = Session(self.tmp)
        self.addCleanup(s.kill)
        errf = os.path.join(s.dir, "step.stderr")
        s.p.stdin.write((json.dumps({"argv": ["compile", *self.cand("hog"), "--tests", self.tests], "cwd": s.dir,
                                     "stderr": errf, "env": {"MK_PALLAS_MEM_MB": "700"}}) + "\n").encode())
        s.p.stdin.flush()
        self.assertEqual(json.loads(s.p.stdout.readline()), {"started": "compile"})
        r = json.loads(s.p.stdout.readline())
        self.assertEqual((r["status"], r["error"]["kind"]), ("error", "memory_limit"), r)
        self.assertRegex(r["error"]["message"],
                         r"^harness compile used \d+ MiB, over its limit of 700 MiB while importing the candidate$")
        self.assertGreater(r["peak_rss_mb"], 700)
        self.assertEqual(s.p.wait(60), 3)

    def test_a_request_s_env_is_set_for_its_step_alone(self):
        W = importlib.import_module("harness.worker")
        self.addCleanup(os.environ.pop, "MK_TEST_Y", None)
        os.environ.pop("MK_TEST_X", None)
        os.environ["MK_TEST_Y"] = "kept"
        with W._StepEnv({"MK_TEST_X": 1, "MK_TEST_Y": "the step's"}):
            self.assertEqual((os.environ["MK_TEST_X"], os.environ["MK_TEST_Y"]), ("1", "the step's"))
        self.assertNotIn("MK_TEST_X", os.environ)
        self.assertEqual(os.environ["MK_TEST_Y"], "kept")
        with W._StepEnv(None):  # a request without env changes nothing
            self.assertEqual(os.environ["MK_TEST_Y"], "kept")

    def test_a_crash_in_a_step_ends_the_session_with_its_output_kept(self):
        s = Session(self.tmp, env={"MK_PALLAS_TIME_S": "0.5"})
        self.addCleanup(s.kill)
        errf = os.path.join(s.dir, "step.stderr")
        s.p.stdin.write((json.dumps({"argv": ["freeze", "--task", os.path.join(TASKS, "scale_mask"), "--tests",
                                              os.path.join(s.dir, "t")], "cwd": s.dir, "stderr": errf}) + "\n").encode())
        s.p.stdin.flush()
        self.assertEqual(json.loads(s.p.stdout.readline()), {"started": "freeze"})
        r = json.loads(s.p.stdout.readline())
        self.assertEqual((r["status"], r["error"]["kind"]), ("error", "time_limit"), r)
        self.assertEqual(s.p.wait(60), 3)
        self.assertEqual(s.p.stdout.read(), b"", "nothing after the limit's message")


@skip_unless(HAVE_JAX, "JAX not importable by %s: race detector tests skipped" % sys.executable)
class TestRaceChecks(unittest.TestCase):
    """The vectorised race checks (harness/races.py _fast_race_checks) replace the
    pinned JAX's detector, and order clocks exactly as it does; the race
    tests (TestPallasKernels, test_candidates_pallas) run through them."""

    def test_installed_on_the_pinned_jax(self):
        self.assertTrue(races._fast_race_checks(), "the pinned JAX's race detector changed shape: interpret "
                        "mode's race checks are quadratic again (harness/races.py _fast_race_checks)")
        from jax._src.pallas.mosaic.interpret import race_detection_state as rds
        self.assertTrue(rds.RaceDetectionState._mk_fast)

    def test_unordered_clocks_are_those_vector_clock_ordered_says_are_not(self):
        import numpy as np
        from jax._src.pallas.mosaic.interpret import vector_clock as vc
        rng = np.random.default_rng(7)
        rows = races._ClockRows(4)
        clocks = [rng.integers(0, 3, 4).astype(np.int32) for _ in range(300)]  # many equal and ordered pairs
        for c in clocks:
            rows.add(c)
        for probe in clocks[:40]:
            want = [i for i, c in enumerate(clocks[:250]) if not vc.ordered(c, probe)]
            self.assertEqual(rows.unordered(probe, 250).tolist(), want)


class TestSampling(unittest.TestCase):
    """Sampled grid execution (harness/sampling.py): the sample holds every
    corner, only blocks written by sampled points alone are compared, what
    cannot be run faithfully is refused with why, and the body really runs
    at the sampled points only."""

    def setUp(self):
        self.S = importlib.import_module("harness.sampling")

    def test_the_sample_holds_every_corner_and_is_seeded(self):
        pts = self.S.sample_points([5, 7], 3)
        for c in ((0, 0), (0, 6), (4, 0), (4, 6)):
            self.assertIn(c, pts)
        self.assertEqual(pts, self.S.sample_points([5, 7], 3))
        self.assertEqual(pts, sorted(set(pts)))

    @skip_unless(HAVE_JAX, "jax not installed")
    def test_plans_and_refusals(self):
        import jax
        import jax.numpy as jnp
        from jax.experimental import pallas as pl
        from jax.experimental.pallas import tpu as pltpu
        out = jax.ShapeDtypeStruct((64, 1024), jnp.float32)

        def k(sem, out_map=lambda i, j: (i, j), **kw):
            return dict(grid=(8, 8), in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                        out_specs=pl.BlockSpec((8, 128), out_map),
                        compiler_params=pltpu.CompilerParams(dimension_semantics=sem), **kw)
        plan = self.S.plan_call(jax, k(("parallel", "parallel")), out, 0)
        self.assertEqual(plan.total, 64)
        self.assertEqual(len(plan.blocks), len(plan.points))
        self.assertIn({"output": 0, "index": [7, 7], "start": [56, 896], "stop": [64, 1024]}, plan.blocks)
        self.assertIn("of 64 output blocks", plan.describe())
        self.assertEqual(plan.unwritten, [])
        # a grid rounded down leaves the last rows unwritten: certain wrong where the outputs are the kernel's
        plan = self.S.plan_call(jax, dict(k(("parallel", "parallel")), grid=(7, 8)), out, 0)
        self.assertEqual(plan.unwritten, ["the grid writes 56 of the 64 entries of output 0 in dimension 0"])
        # a parallel dimension then an arbitrary one: only the first sampled, the second runs every step
        plan = self.S.plan_call(jax, k(("parallel", "arbitrary"), lambda i, j: (i, 0)),
                                jax.ShapeDtypeStruct((64, 128), jnp.float32), 0)
        self.assertEqual(plan.dims, [0])
        self.assertIn("every step of grid dimension 1", plan.describe())
        refusals = [
            (k(("arbitrary", "parallel")), "no leading grid dimension is declared parallel"),
            # a block every j writes, j sampled: never written by sampled points alone
            (k(("parallel", "parallel"), lambda i, j: (i, 0)), "no output block is written by sampled"),
            (dict(k(("parallel", "parallel")), in_specs=[pl.BlockSpec(memory_space=pl.ANY)]), "manual DMAs"),
            (dict(k(("parallel", "parallel")), scratch_shapes=[pltpu.SemaphoreType.DMA(())]), "semaphores"),
        ]
        for kw, why in refusals:
            with self.assertRaises(self.S.NotSampleable) as e:
                self.S.plan_call(jax, kw, out, 0)
            self.assertIn(why, str(e.exception))

    @skip_unless(HAVE_JAX, "jax not installed")
    def test_the_body_runs_at_sampled_points_only(self):
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jax.experimental import pallas as pl
        from jax.experimental.pallas import tpu as pltpu
        self.S.install(jax)

        def body(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1.0

        def f(x):
            return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(8, 8),
                                  in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                                  out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),
                                  compiler_params=pltpu.CompilerParams(
                                      dimension_semantics=("parallel", "parallel")))(x)
        x = jnp.arange(64 * 1024, dtype=jnp.float32).reshape(64, 1024)
        params = pltpu.InterpretParams(uninitialized_memory="nan")
        with self.S.trace(0) as st, pltpu.force_tpu_interpret_mode(params):
            traced = jax.jit(self.S.wrap_outputs(f, st)).trace(x)
            self.assertIsNone(self.S.refusal(st, traced.jaxpr.jaxpr))
            y = np.asarray(traced.lower().compile()(x))
        plan = st.calls[0][0]
        written = np.zeros((8, 8), bool)
        for b in plan.blocks:
            written[tuple(b["index"])] = True
        for i in range(8):
            for j in range(8):
                blk = y[8 * i:8 * i + 8, 128 * j:128 * j + 128]
                want = np.asarray(x)[8 * i:8 * i + 8, 128 * j:128 * j + 128] + 1
                if written[i, j]:
                    np.testing.assert_array_equal(blk, want)
                else:  # its buffer written back as the last sampled step left it (or NaN): never its own values
                    self.assertFalse(np.array_equal(blk, want), "block %s ran though not sampled" % ((i, j),))
        # a reshape after the call moves values across blocks: refused
        with self.S.trace(0) as st, pltpu.force_tpu_interpret_mode(params):
            traced = jax.jit(self.S.wrap_outputs(lambda x: f(x).reshape(1024, 64), st)).trace(x)
            self.assertIn("not its pallas_call's outputs", self.S.refusal(st, traced.jaxpr.jaxpr))

        # a transpose after the call (attention kernels return (B, S, H, D)): its blocks move with it
        def h(x):
            return f(x).T
        with self.S.trace(0) as st, pltpu.force_tpu_interpret_mode(params):
            traced = jax.jit(self.S.wrap_outputs(h, st)).trace(x)
            self.assertIsNone(self.S.refusal(st, traced.jaxpr.jaxpr))
            yt = np.asarray(traced.lower().compile()(x))
        self.assertEqual(yt.shape, (1024, 64))
        moved = st.calls[0][0].blocks
        self.assertEqual(len(moved), len(plan.blocks))
        for b in moved:
            i, j = b["index"][1], b["index"][0]  # the call's block (i, j) is the kernel's (j, i)
            self.assertEqual((b["start"], b["stop"]), ([128 * j, 8 * i], [128 * j + 128, 8 * i + 8]))
            blk = yt[b["start"][0]:b["stop"][0], b["start"][1]:b["stop"][1]]
            np.testing.assert_array_equal(blk, (np.asarray(x)[8 * i:8 * i + 8, 128 * j:128 * j + 128] + 1).T)
        # run apart (the operands, then the call alone): the same blocks, moved as the kernel moves them
        before, call, avals = self.S.split_at_call(traced.jaxpr)
        self.assertEqual([tuple(v.shape) for v in avals], [(64, 1024)])
        with pltpu.force_tpu_interpret_mode(params):
            outs = jax.jit(call)(*jax.jit(before)(x))
        for b, got in zip(moved, self.S.call_blocks(outs, st.calls[0][0])):
            np.testing.assert_array_equal(got, yt[b["start"][0]:b["stop"][0], b["start"][1]:b["stop"][1]])
        # work after the call: its outputs are not the pallas_call's, refused
        with self.S.trace(0) as st, pltpu.force_tpu_interpret_mode(params):
            traced = jax.jit(self.S.wrap_outputs(lambda x: f(x) * 2, st)).trace(x)
            self.assertIn("not its pallas_call's outputs",
                          self.S.refusal(st, traced.jaxpr.jaxpr))


class TestChunkedReference(unittest.TestCase):
    """A reference too large for a process at the task's own sizes, run in
    equal parts along axes every array has (harness/chunked.py): the plan
    splits the lowest axes first and only as far as needed, the parts give
    the unsplit outputs, and a reference that mixes its parts (a softmax
    over the batch) or maps heads another way is found out on the test
    scale's inputs, never split."""

    def setUp(self):
        self.C = importlib.import_module("harness.chunked")

    def test_the_plan_splits_the_lowest_axes_first_and_no_further(self):
        # GQA's own sizes: q (4, 4096, 128, 128), k and v (4, 4096, 8, 128), out as q
        q, kv = (4, 4096, 128, 128), (4, 4096, 8, 128)
        sizes = self.C.axis_sizes([q, kv, kv], [q])
        self.assertEqual(sizes, {0: 4, 1: 4096, 2: 8, 3: 128})
        self.assertEqual(self.C.choose(sizes, 100, 100), {})
        self.assertEqual(self.C.choose(sizes, 100, 50, usable={0, 2}), {0: 2})
        self.assertEqual(self.C.choose(sizes, 100, 20, usable={0, 2}), {0: 4, 2: 2})
        self.assertEqual(self.C.choose(sizes, 100, 3.2, usable={0, 2}), {0: 4, 2: 8})
        self.assertIsNone(self.C.choose(sizes, 100, 3.0, usable={0, 2}), "32 parts at most")
        self.assertEqual(self.C.axis_sizes([(6, 5)], [(6,)]), {0: 6}, "the axes every array has")

    @skip_unless(HAVE_JAX, "jax not installed")
    def test_parts_give_the_whole_and_mixing_references_are_refused(self):
        import jax
        import jax.numpy as jnp
        import numpy as np

        def gqa(q, k):  # query head h reads kv head h // G
            G = q.shape[1] // k.shape[1]
            return jnp.einsum("bhd,bhd->bhd", q, jnp.repeat(k, G, axis=1)) * 2.0

        def interleaved(q, k):  # query head h reads kv head h % Hkv
            return q * jnp.tile(k, (1, q.shape[1] // k.shape[1], 1))

        def batch_softmax(q, k):  # mixes the batch
            return jax.nn.softmax(q, axis=0) + k.sum()

        rng = np.random.default_rng(0)
        q = jnp.asarray(rng.standard_normal((4, 8, 16)), jnp.float32)
        k = jnp.asarray(rng.standard_normal((4, 2, 16)), jnp.float32)
        tol = {"atol": 1e-3, "rtol": 1e-3}
        out = [jax.ShapeDtypeStruct((4, 8, 16), jnp.float32)]
        whole = np.asarray(gqa(q, k))
        parts = self.C.run(jax, gqa, [q, k], {0: 4, 1: 2}, out)
        np.testing.assert_array_equal(parts[0], whole)
        where = tempfile.mkdtemp()  # the outputs written to files part by part
        np.testing.assert_array_equal(self.C.run(jax, gqa, [q, k], {0: 4, 1: 2}, out, where=where)[0], whole)
        shutil.rmtree(where)
        self.assertIsNone(self.C.verify(jax, gqa, [q, k], {0: 4, 1: 2}, tol))
        self.assertIn("differ from its unsplit ones", self.C.verify(jax, interleaved, [q, k], {1: 2}, tol))
        self.assertIn("differ from its unsplit ones", self.C.verify(jax, batch_softmax, [q, k], {0: 2}, tol))
        self.assertIsNone(self.C.verify(jax, interleaved, [q, k], {0: 2}, tol), "its batch is separable")
        # attention in bfloat16: its evaluations at other shapes round differently; the batch passes, queries do not
        def attn(q, k):
            s = jnp.einsum("bqd,bkd->bqk", q, k)
            return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), k)
        qb = jnp.asarray(rng.standard_normal((4, 64, 16)), jnp.bfloat16)
        self.assertIsNone(self.C.verify(jax, attn, [qb, qb], {0: 4}, tol))
        self.assertIn("differ from its unsplit ones", self.C.verify(jax, attn, [qb, qb], {1: 2}, tol))
        # an axis the test scale cannot split as the own sizes are split
        self.assertIn("cannot be split", self.C.verify(jax, gqa, [q[:, :1], k[:, :1]], {1: 2}, tol))


    @skip_unless(HAVE_JAX, "jax not installed")
    def test_in_parts_is_one_program_that_gives_the_whole_with_less_memory(self):
        import jax
        import jax.numpy as jnp
        import numpy as np

        def attn(q, k, scale, flag):  # a Python scale and flag stay static; two outputs, one a tuple's
            s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * scale
            p = jax.nn.softmax(s, axis=-1)
            return jnp.einsum("bhqk,bhkd->bhqd", p, k), (p.max(axis=-1) if flag else p.min(axis=-1),)
        rng = np.random.default_rng(3)
        q = jnp.asarray(rng.standard_normal((4, 6, 512, 8)), jnp.float32)  # scores of 25 MB
        k = jnp.asarray(rng.standard_normal((4, 6, 512, 8)), jnp.float32)
        args = [q, k, 0.5, True]
        whole = jax.jit(attn, static_argnums=(2, 3))(*args)
        for parts in ({0: 2}, {1: 3}, {0: 4, 1: 2}):
            g = self.C.in_parts(jax, attn, parts)
            self.assertEqual(g.__name__, "attn", "the timed module keeps the reference's name")
            fn = jax.jit(g, static_argnums=(2, 3))
            got = fn(*args)
            self.assertEqual(jax.tree_util.tree_structure(got), jax.tree_util.tree_structure(whole))
            for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(whole)):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6, err_msg=str(parts))
            # part k in the place run() puts it (the plan's own order)
            outs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in jax.tree_util.tree_leaves(whole)]
            by_run = self.C.run(jax, lambda q, k: attn(q, k, 0.5, True), [q, k], parts, outs)
            for a, b in zip(jax.tree_util.tree_leaves(got), by_run):
                np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6, atol=1e-6)
        count = self.C.xla_bytes
        one = count(jax.jit(attn, static_argnums=(2, 3)).lower(*args).compile())
        eight = count(jax.jit(self.C.in_parts(jax, attn, {0: 4, 1: 2}), static_argnums=(2, 3)).lower(*args).compile())
        self.assertLess(eight, one / 2, "one part's temporaries at a time")

    @skip_unless(HAVE_JAX, "jax not installed")
    def test_a_larger_scale_too_large_for_a_process_is_frozen_in_parts_checked_on_the_test_scale(self):
        import numpy as np
        tmp = tempfile.mkdtemp(prefix="mk-scale-memory-")
        self.addCleanup(shutil.rmtree, tmp, True)
        task = os.path.join(TASKS, "scale_memory")
        base = os.path.join(tmp, "base")
        frozen_suite(task, base, "0", "")
        small = {"MK_PALLAS_MEM_MB": "900"}  # 0.75 GB for the reference; whole it is estimated at 0.81 GB

        def freeze(name, *extra, env=None):
            r, _, err = run_harness("freeze", "--task", task, "--tests", os.path.join(tmp, name), "--seeds", "0",
                                    "--heldout", "5", "--scale-factor", "2", *extra, env=env)
            return r, err
        parts, err = freeze("parts", "--base", base, env=small)
        self.assertEqual(parts["status"], "ok", (parts, err[-2000:]))
        chunks = parts["test_scale"]["chunks"]
        self.assertTrue(chunks and set(chunks) <= {"0", "1"}, chunks)  # batch and heads: never the sequence
        self.assertLess(parts["peak_rss_mb"], 900)
        # no test-scale suite to check a split on: whole while XLA's own count (0.14 GB) fits 4/5 of the limit
        lone, err = freeze("lone", env=small)
        self.assertEqual(lone["status"], "ok", (lone, err[-2000:]))
        self.assertNotIn("chunks", lone["test_scale"])
        self.assertIn("not run in parts without the test scale's suite", lone["test_scale"]["tried"][0]["whole"])
        refused, _ = freeze("refused", env={"MK_PALLAS_MEM_MB": "700"})  # ... and refused when it does not
        self.assertEqual(refused["status"], "error")
        self.assertEqual(refused["error"]["kind"], "cannot_freeze")
        self.assertIn("over the", refused["error"]["message"])
        self.assertIn("not run in parts without the test scale's suite", refused["error"]["message"])
        self.assertIn("XLA's own count is over 4/5 of the memory limit", refused["error"]["message"])
        whole, err = freeze("whole", "--base", base)  # no limit: 4 GB, the reference whole
        self.assertEqual(whole["status"], "ok", (whole, err[-2000:]))
        self.assertNotIn("chunks", whole["test_scale"])
        for cid in ("s0", "h5"):
            a = np.load(os.path.join(tmp, "parts", "expected", cid + ".npz"))
            b = np.load(os.path.join(tmp, "whole", "expected", cid + ".npz"))
            for name in a.files:
                np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-5)
        # the baseline is timed as the suite was frozen: in parts, and says so
        r, _, err = run_harness("baseline", "--task", task, "--tests", os.path.join(tmp, "parts"), "--iters", "1",
                                "--warmup", "1", env=small)
        self.assertEqual(r["status"], "ok", (r, err[-2000:]))
        self.assertEqual({str(k): v for k, v in r["parts"].items()}, chunks)
        self.assertIn("equal parts", r["text"])
        r, _, _ = run_harness("baseline", "--task", task, "--tests", os.path.join(tmp, "whole"), "--iters", "1",
                              "--warmup", "1")
        self.assertIsNone(r["parts"])

    @skip_unless(HAVE_JAX, "jax not installed")
    def test_a_reference_no_split_computes_runs_whole_when_its_own_count_fits_the_limit(self):
        tmp = tempfile.mkdtemp(prefix="mk-own-gemm-")
        self.addCleanup(shutil.rmtree, tmp, True)
        task = os.path.join(TASKS, "own_gemm")

        def freeze(name, mem):
            r, _, err = run_harness("freeze", "--task", task, "--tests", os.path.join(tmp, name), "--heldout", "5",
                                    "--own-sampled", env={"MK_PALLAS_MEM_MB": mem})
            return r, err
        r, err = freeze("whole", "830")
        self.assertEqual(r["status"], "ok", (r, err[-2000:]))
        self.assertNotIn("chunks", r["test_scale"])
        self.assertTrue(any(w.startswith("the reference ran whole") for w in r["warnings"]), r["warnings"])
        self.assertFalse(os.path.exists(os.path.join(tmp, "whole", ".spilled")))
        r, err = freeze("refused", "700")
        self.assertEqual(r["status"], "error", (r, err[-2000:]))
        self.assertEqual(r["error"]["kind"], "cannot_freeze")

    @skip_unless(HAVE_JAX, "jax not installed")
    def test_the_float32_evaluation_on_the_sampled_blocks_alone_and_spilled_inputs(self):
        import jax
        import jax.numpy as jnp
        import numpy as np

        def gqa(q, k):
            return jnp.sin(q) * jnp.repeat(k, q.shape[1] // k.shape[1], axis=1)
        rng = np.random.default_rng(1)
        q = rng.standard_normal((4, 8, 16)).astype(jnp.bfloat16)
        k = rng.standard_normal((4, 2, 16)).astype(jnp.bfloat16)
        out = [jax.ShapeDtypeStruct((4, 8, 16), jnp.bfloat16)]
        blocks = [{"output": 0, "start": [0, 0, 0], "stop": [1, 8, 16]},
                  {"output": 0, "start": [1, 2, 4], "stop": [3, 6, 12]}]  # across parts on both axes
        self.assertEqual(self.C.part_of(blocks[1], (4, 8, 16), {0: 2, 1: 2}),
                         [{0: 0, 1: 0}, {0: 0, 1: 1}, {0: 1, 1: 0}, {0: 1, 1: 1}])
        tmp = tempfile.mkdtemp()
        old = self.C.SPILL_BYTES
        self.C.SPILL_BYTES = 1  # every input read from its file, part by part
        try:
            dyn = self.C.spill([q, k], tmp)
        finally:
            self.C.SPILL_BYTES = old
        self.assertIsInstance(dyn[0], self.C.Spilled)
        wide, why = self.C.blocks_wide(jax, gqa, dyn, {0: 2, 1: 2}, out, blocks, 1e12)
        self.assertIsNone(why)
        full = np.asarray(gqa(q.astype(np.float32), k.astype(np.float32)))
        for w, b in zip(wide, blocks):
            self.assertEqual(w.dtype, np.float32)
            np.testing.assert_allclose(w, full[tuple(slice(s, e) for s, e in zip(b["start"], b["stop"]))], rtol=1e-6)
        _, why = self.C.blocks_wide(jax, gqa, dyn, {0: 2, 1: 2}, out, blocks, 10)
        self.assertIn("needs", why)
        # over the estimate's budget, but XLA's own count fits the memory limit: evaluated all the same
        again, why = self.C.blocks_wide(jax, gqa, dyn, {0: 2, 1: 2}, out, blocks, 10, mem=8 << 30)
        self.assertIsNone(why)
        for w, v in zip(again, wide):
            np.testing.assert_array_equal(w, v)
        _, why = self.C.blocks_wide(jax, gqa, dyn, {0: 2, 1: 2}, out, blocks, 10, mem=1 << 20)
        self.assertIn("over 4/5 of the memory limit", why)
        shutil.rmtree(tmp)


class TestPallasKernels(unittest.TestCase):
    """The rmsnorm bank's Pallas kernels and purpose-written broken kernels,
    in TPU interpret mode (the default on a CPU backend): Mosaic lowering
    rules, DMA races, out-of-bounds and uninitialised reads."""
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mk-pallas-real-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)  # also when setUpClass fails
        cls.task = os.path.join(EXAMPLE, "rmsnorm")
        cls.tests = os.path.join(cls.tmp, "tests")
        cls.frozen = frozen_suite(cls.task, cls.tests, "0", "")
        cls.tiny = os.path.join(TASKS, "tiny_rmsnorm")
        cls.tiny_tests = os.path.join(cls.tmp, "tiny")
        frozen_suite(cls.tiny, cls.tiny_tests, "0", "")

    def run_bank(self, name, *extra):
        r, _, _ = run_harness("test", "--task", self.task, "--candidate",
                              os.path.join(self.task, "scripted", name), "--tests", self.tests, *extra)
        return r

    def run_tiny(self, name, *extra):
        r, _, _ = run_harness("test", "--task", self.tiny, "--candidate", os.path.join(CANDS, name),
                              "--tests", self.tiny_tests, "--cases", "s0", *extra)
        return r

    def test_cpu_freeze_is_test_scaled_and_keeps_the_extra_configs(self):
        ts = self.frozen["test_scale"]
        self.assertEqual((ts["factor"], ts["target"]), (16, 256))  # 4096 / 16 = 256
        self.assertEqual(self.frozen["scaled_config"], {"rows": 256, "cols": 256})
        shapes = {c["id"]: c["shapes"] for c in self.frozen["cases"]}
        self.assertEqual(shapes["s0"], [[256, 256], [256]])
        self.assertEqual(shapes["c0"], [[37, 256], [256]])
        self.assertEqual(shapes["c1"], [[1, 1024], [1024]])

    def test_a_smaller_test_scale_target(self):
        tests = os.path.join(self.tmp, "unscaled")
        r, _, _ = run_harness("freeze", "--task", self.tiny, "--tests", tests, "--seeds", "0", "--heldout", "",
                              "--test-scale", "8")
        self.assertEqual(r["scaled_config"], {"rows": 8, "cols": 8})
        self.assertEqual(r["cases"][0]["shapes"], [[8, 8], [8]])

    def test_test_scale_off_keeps_the_tasks_own_shapes_with_no_search(self):
        tests = os.path.join(self.tmp, "own")
        r, _, _ = run_harness("freeze", "--task", self.tiny, "--tests", tests, "--seeds", "0", "--heldout", "",
                              "--test-scale", "off")
        self.assertEqual((r["test_scale"]["factor"], r["test_scale"]["tried"]), (1, []))
        self.assertEqual(r["cases"][0]["shapes"], [[16, 128], [128]])

    def test_rows_kernel_is_correct_in_tpu_interpret_mode(self):
        r = self.run_bank("pallas_rows.py")
        self.assertEqual(r["status"], "ok", r)
        self.assertEqual(len(r["cases"]), 6)  # s0, c0, c1 x two calls

    def test_compile_reports_tpu_interpret_mode_and_interpret_timing(self):
        r, _, _ = run_harness("compile", "--task", self.task, "--tests", self.tests, "--candidate",
                              os.path.join(self.task, "scripted", "pallas_rows.py"))
        self.assertEqual((r["status"], r["interpret"], r["timing"]), ("ok", "tpu", "interpret"), r)
        r, _, _ = run_harness("bench", "--task", self.task, "--tests", self.tests, "--candidate",
                              os.path.join(self.task, "scripted", "pallas_dma.py"), "--iters", "2",
                              "--warmup", "1", "--no-trace")
        self.assertEqual((r["status"], r["timing"]), ("ok", "interpret"), r)
        self.assertGreater(r["latency_s"], 0)

    def test_typo_is_a_trace_error_with_the_candidates_line(self):
        r = self.run_bank("pallas_typo.py")
        self.assertEqual((r["status"], r["phase"], r["kind"]), ("compile_error", "lower", "lowering"), r)
        self.assertIn("kernel.py:19 in workload", r["message"])
        self.assertIn("BlockSpc", r["message"])

    def test_block_shape_the_tpu_cannot_lower_is_a_lowering_error_plain_interpret_misses(self):
        r = self.run_bank("pallas_block5.py")
        self.assertEqual((r["status"], r["phase"], r["kind"]), ("compile_error", "lower", "lowering"), r)
        self.assertIn("lowering for TPU (Mosaic) failed", r["message"])
        self.assertIn("divisible by 8 and 128", r["message"])
        self.assertTrue(r["message"].startswith("kernel.py:9: def _rmsnorm_kernel"), r["message"][:200])
        self.assertEqual(self.run_bank("pallas_block5.py", "--interpret", "plain")["status"], "ok")

    def test_dma_race_is_incorrect_naming_the_race_plain_interpret_misses(self):
        r = self.run_bank("pallas_dma_race.py")
        self.assertEqual((r["status"], r["reason"]), ("incorrect", "race"), r)
        self.assertIn("data race", r["message"])
        self.assertIn("kernel.py:18", r["message"])  # the early read of the DMA's destination
        self.assertEqual(self.run_bank("pallas_dma.py")["status"], "ok")
        self.assertEqual(self.run_bank("pallas_dma_race.py", "--interpret", "plain")["status"], "ok")

    def test_out_of_bounds_read_is_incorrect_naming_it(self):
        r = self.run_tiny("pallas_oob.py")
        self.assertEqual((r["status"], r["reason"]), ("incorrect", "out_of_bounds"), r)
        self.assertIn("Out-of-bounds read", r["message"])
        self.assertIn("shape (16, 128)", r["message"])

    def test_uninitialised_scratch_reads_give_nan_outputs(self):
        r = self.run_tiny("pallas_uninit.py")
        self.assertEqual((r["status"], r["reason"]), ("incorrect", "nonfinite"), r)
        self.assertIn("uninitialised", r["message"])

    def test_block_rows_tunable_values_all_pass(self):
        for br in (8, 16, 32, 64):
            r = self.run_bank("pallas_rows.py", "--params", '{"block_rows": %d}' % br, "--cases", "c0,c1")
            self.assertEqual(r["status"], "ok", (br, r))


class TestSuiteReferences(unittest.TestCase):
    """Item: every JAXBench-layout task of the suite freezes (test-scaled on
    the CPU) and passes its own reference, used as a candidate. (How long
    that takes is measured by `mkengine suite check`, BENCHMARKS.md, not
    asserted here: a loaded CI machine would fail a timed test.)"""

    def test_each_suite_reference_passes_as_a_candidate(self):
        names = sorted(d for d in os.listdir(SUITE) if os.path.isdir(os.path.join(SUITE, d)))
        self.assertGreaterEqual(len(names), 5)
        for n in names:
            task = os.path.join(SUITE, n)
            with tempfile.TemporaryDirectory(prefix="mk-pallas-suite-") as d:
                tests = os.path.join(d, "tests")
                r, _, err = run_harness("freeze", "--task", task, "--tests", tests, "--seeds", "0", "--heldout", "")
                self.assertEqual(r["status"], "ok", (n, r, err[-1500:]))
                self.assertEqual(r["test_scale"]["target"], 256, n)
                r, _, err = run_harness("test", "--task", task, "--candidate", os.path.join(task, "baseline.py"),
                                        "--tests", tests)
                self.assertEqual(r["status"], "ok", (n, r, err[-1500:]))


class TestSuiteBanks(unittest.TestCase):
    """Every kernel of every real scripted bank (the rmsnorm task's and the
    suite's) gets its bank's expected status in TPU interpret mode on the
    task's first extra test shape, in this process (scripts/device_bench.py
    runs the same kernels natively on a device)."""

    def test_every_bank_kernel_of_every_bank(self):
        spec = importlib.util.spec_from_file_location("device_bench", os.path.join(ROOT, "scripts", "device_bench.py"))
        DB = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(DB)
        jax = DB.jaxcall._jax()
        seen = 0
        for tdir, kernels in DB.banks():
            task = DB.H.load_task(tdir)
            ref = DB.H.reference_module(task)
            dyn, statics = DB.H.make_inputs(task, ref, 0, task["test_configs"][0], None)
            want = DB.reference_outputs(jax, task, ref, dyn, statics)
            kinds = set()
            for kid, (path, expect) in sorted(kernels.items()):
                k, _ = DB.check_kernel(jax, task, path, dyn, statics, want, "tpu")
                wanted = "ok" if expect in ("fast", "slow") else expect
                self.assertEqual(k["status"], wanted, (tdir, kid, k.get("message")))
                if k.get("reason") == "race":
                    kinds.add("race")
                kinds.add(expect)
                seen += 1
            # each bank: a correct kernel, a slower one, a wrong one, a
            # lowering error, a race only TPU interpret mode sees
            self.assertTrue({"fast", "slow", "incorrect", "compile_error", "race"} <= kinds, (tdir, kinds))
        self.assertGreaterEqual(seen, 8 * 6)  # rmsnorm and the 7 suite tasks, 6 kernels or more each


def tearDownModule():
    for reason in sorted(set(_skips)):
        print("SKIP: %s" % reason, file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
