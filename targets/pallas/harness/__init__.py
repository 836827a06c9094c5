"""mkengine's harness for the JAX Pallas target: a package Python runs as a
folder, one step a process, one JSON object on stdout (__main__.py, cli.py):

  python targets/pallas/harness <step> [args...]
  python targets/pallas/harness worker --inbox DIR [--idle S] [--light] [--session [--warm]]

  load      describe a task (no JAX needed: the task files are parsed, not run)
  tunables  list the `# mk:tune NAME = [v, ...]` lines of a candidate (no JAX)
  freeze    inputs and expected outputs from the reference, SHA-256 manifest
  verify    check a frozen suite's manifest (no JAX)
  compile   jax.jit(entry).lower(...) then .compile(); lowering and Mosaic
            compile errors are reported apart, with their text
  run       run a candidate on frozen inputs, write its outputs (no expected
            outputs are read by the process that runs candidate code)
  check     compare outputs written by `run` with the expected ones (numpy
            only: never imports JAX nor candidate code)
  test      run + check in one process (convenient, less isolated)
  bench     on-device time from a jax.profiler trace (median of the
            executable's device events), falling back to wall time
  profile   cost_analysis FLOPs/bytes, achieved vs chip peaks, bound class
  baseline  bench + cost analysis of jax.jit(reference): the XLA baseline

Task formats: JAXBench `baseline.py` (CONFIG, create_inputs, workload,
optional get_flops), MaxKernel `reference.py` + `kernel_task.yaml`
(get_inputs -> ([dynamic], [static]), computation), and mkengine's own
`task.lua` + `reference.py` (JAXBench conventions, plus optional
TEST_CONFIGS and a `seed` argument of create_inputs).

JAX, numpy and yaml are imported lazily so that loading, tunables, the
manifest, the comparison and the trace-event logic are testable without JAX.
Exit code: 0 when a verdict was printed (whatever it is), 3 when the
environment cannot run the step (JAX missing...), 2 on bad arguments.

One module per responsibility, each named for it (ARCHITECTURE.md lists
them); this file only re-exports what tests and scripts call.
"""

from .protocol import HARNESS_VERSION, STATUSES
from .errors import CandidateError, CandidateRejected, HarnessError, classify_compile_error, error_text
from .tasks import detect_format, load_task, parse_yaml
from .tunables import parse_tunables
from .screen import scan_candidate, screened_nodes
from .suite import MANIFEST, case_ids, read_case, read_cases, read_manifest, verify_manifest, write_manifest
from .arrays import decode_array, encode_array, load_arrays, save_arrays
from .compare import check_outputs, compare_outputs
from .jaxcall import device_info
from .inputs import entry_fn, make_inputs, reference_module
from .candidate import load_candidate, lower_and_compile
from .interpret import VECTOR_CLOCK_SIZE, interpret_mode
from .races import call_checked
from .escalation import case_is_scaled, own_check_raised, scale_hints
from .timing import device_event_durations, median, summarize, time_compiled
from .roofline import chip_peaks, roofline, roofline_text
from .cli import run_step

__all__ = (
    "HARNESS_VERSION", "STATUSES",
    "CandidateError", "CandidateRejected", "HarnessError", "classify_compile_error", "error_text",
    "detect_format", "load_task", "parse_yaml", "parse_tunables", "scan_candidate", "screened_nodes",
    "MANIFEST", "case_ids", "read_case", "read_cases", "read_manifest", "verify_manifest", "write_manifest",
    "decode_array", "encode_array", "load_arrays", "save_arrays", "check_outputs", "compare_outputs",
    "device_info", "entry_fn", "make_inputs", "reference_module", "load_candidate", "lower_and_compile",
    "VECTOR_CLOCK_SIZE", "interpret_mode", "call_checked", "case_is_scaled", "own_check_raised", "scale_hints",
    "device_event_durations", "median", "summarize", "time_compiled", "chip_peaks", "roofline", "roofline_text",
    "run_step",
)
