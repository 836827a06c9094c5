"""mkengine's harness for the JAX Pallas target, a package (run as
`python targets/pallas/harness <step> ...`: __main__.py)."""

from .errors import (HarnessError, CandidateRejected, CandidateError, error_text, name_candidate, _source_line,
    classify_compile_error, candidate_failure)
from .tasks import _read, _module_info, parse_yaml, detect_format, _tolerance_value, load_task, _overrides
from .tunables import _TUNE_RE, _literal, parse_tunables
from .screen import (ALLOWED_IMPORTS, FORBIDDEN_CALLS, INERT_IMPORTS, FORBIDDEN_NAMES, FORBIDDEN_ATTRS, ENTRIES,
    _is_main_guard, _name_rebound, _names_in, _def_header, screened_nodes, _assign_violations, _imported_modules,
    _node_violations, _inert_uses, scan_candidate)
from .suite import (MANIFEST, sha256_file, write_manifest, read_manifest, verify_manifest, case_shapes, read_cases,
    case_ids, read_case)
from .arrays import _EXOTIC, encode_array, decode_array, save_arrays, write_json, load_arrays
from .compare import _within_as_published, _rms, _within_reference_error, compare_outputs, check_outputs
from .jaxcall import (_REAL, _jax, _sync, _clock, _import_file, static_positions, jit_static, _WithStatics,
    _leaves, _to_numpy, device_info, poison_device)
from .timing import (median, summarize, device_event_durations, _module_matches, _trace_planes, plan_iters,
    time_compiled)
from .roofline import PEAKS, chip_peaks, roofline, roofline_text, task_flops, _cost, _io_bytes
from .inputs import (_resolve_dtype, _SeededKeys, reference_module, config_scope, make_inputs, entry_fn,
    frozen_case_inputs)
from .interpret import (_install_interpret, INTERPRET_MODES, interpret_mode, VECTOR_CLOCK_SIZE, PROGRESS,
    _count_step, _count_dmas, tpu_interpret_params, ProgressFile)
from .races import (_ClockRows, _fast_race_checks, reset_tpu_interpret, _Tee, _RACE_RE, _OOB_RE, _races_found,
    _clear_races, call_checked)
from .chip import DEFAULT_CHIP, _EMULATED, _EmulatedDevice, _asks_for_chip, _device_list, emulate_chip
from .escalation import (_SCALE_HINTS, _CASE_HINTS, Rescale, _spec_list, _block_over, MAX_GRID_WALK, _uncovered,
    scale_hints, _record_hints, watch_pallas_calls, own_check_raised, traces_at_own_sizes, case_is_scaled,
    rescale_instead)
from .work import _MOVES, _size, _eqn_work, jaxpr_work, traced_work, case_work
from .candidate import _SESSION, _candidate_key, load_candidate, lower_and_compile, exec_key, lower_checked
from .protocol import HARNESS_VERSION, STATUSES, _json_default, _clean, PROCESS_ID, answer, _own_stdout
from .limits import ENGINE_GONE_EXIT, watch_engine, PHASE, rss_mb, peak_rss_mb, start_limits, _env_number, _cpu_s
from .freeze import (_split_inputs, TEST_SCALE_TARGET, CASES_BUDGET_S, test_scale_target, choose_scale,
    freeze_plan, NARROW_FLOATS, WIDE_BUDGET_S, WIDE_AGREE, WideRefused, _narrow, reference_in_float32, freeze_case,
    cmd_freeze, cmd_verify, _int_list)
from .steps import (python_paths, cmd_load, cmd_tunables, _case_config, _bench_args, _timing_kind, _bench_case,
    timed_scale, _candidate_compiled, cmd_compile, cmd_run, _run_cases, cmd_check, cmd_test, cmd_bench,
    cmd_profile, cmd_baseline, _params, build_parser, _PARSERS, _parser, run_step, main, warm_up, _request_lines,
    STEP_OUTPUT_KEEP, _StepOutput, serve, worker)

__all__ = ("HarnessError", "CandidateRejected", "CandidateError", "error_text", "name_candidate", "_source_line",
    "classify_compile_error", "candidate_failure", "_read", "_module_info", "parse_yaml", "detect_format",
    "_tolerance_value", "load_task", "_overrides", "_TUNE_RE", "_literal", "parse_tunables", "ALLOWED_IMPORTS",
    "FORBIDDEN_CALLS", "INERT_IMPORTS", "FORBIDDEN_NAMES", "FORBIDDEN_ATTRS", "ENTRIES", "_is_main_guard",
    "_name_rebound", "_names_in", "_def_header", "screened_nodes", "_assign_violations", "_imported_modules",
    "_node_violations", "_inert_uses", "scan_candidate", "MANIFEST", "sha256_file", "write_manifest",
    "read_manifest", "verify_manifest", "case_shapes", "read_cases", "case_ids", "read_case", "_EXOTIC",
    "encode_array", "decode_array", "save_arrays", "write_json", "load_arrays", "_within_as_published", "_rms",
    "_within_reference_error", "compare_outputs", "check_outputs", "_REAL", "_jax", "_sync", "_clock",
    "_import_file", "static_positions", "jit_static", "_WithStatics", "_leaves", "_to_numpy", "device_info",
    "poison_device", "median", "summarize", "device_event_durations", "_module_matches", "_trace_planes",
    "plan_iters", "time_compiled", "PEAKS", "chip_peaks", "roofline", "roofline_text", "task_flops", "_cost",
    "_io_bytes", "_resolve_dtype", "_SeededKeys", "reference_module", "config_scope", "make_inputs", "entry_fn",
    "frozen_case_inputs", "_install_interpret", "INTERPRET_MODES", "interpret_mode", "VECTOR_CLOCK_SIZE",
    "PROGRESS", "_count_step", "_count_dmas", "tpu_interpret_params", "ProgressFile", "_ClockRows",
    "_fast_race_checks", "reset_tpu_interpret", "_Tee", "_RACE_RE", "_OOB_RE", "_races_found", "_clear_races",
    "call_checked", "DEFAULT_CHIP", "_EMULATED", "_EmulatedDevice", "_asks_for_chip", "_device_list",
    "emulate_chip", "_SCALE_HINTS", "_CASE_HINTS", "Rescale", "_spec_list", "_block_over", "MAX_GRID_WALK",
    "_uncovered", "scale_hints", "_record_hints", "watch_pallas_calls", "own_check_raised", "traces_at_own_sizes",
    "case_is_scaled", "rescale_instead", "_MOVES", "_size", "_eqn_work", "jaxpr_work", "traced_work", "case_work",
    "_SESSION", "_candidate_key", "load_candidate", "lower_and_compile", "exec_key", "lower_checked",
    "HARNESS_VERSION", "STATUSES", "_json_default", "_clean", "PROCESS_ID", "answer", "_own_stdout",
    "ENGINE_GONE_EXIT", "watch_engine", "PHASE", "rss_mb", "peak_rss_mb", "start_limits", "_env_number", "_cpu_s",
    "_split_inputs", "TEST_SCALE_TARGET", "CASES_BUDGET_S", "test_scale_target", "choose_scale", "freeze_plan",
    "NARROW_FLOATS", "WIDE_BUDGET_S", "WIDE_AGREE", "WideRefused", "_narrow", "reference_in_float32",
    "freeze_case", "cmd_freeze", "cmd_verify", "_int_list", "python_paths", "cmd_load", "cmd_tunables",
    "_case_config", "_bench_args", "_timing_kind", "_bench_case", "timed_scale", "_candidate_compiled",
    "cmd_compile", "cmd_run", "_run_cases", "cmd_check", "cmd_test", "cmd_bench", "cmd_profile", "cmd_baseline",
    "_params", "build_parser", "_PARSERS", "_parser", "run_step", "main", "warm_up", "_request_lines",
    "STEP_OUTPUT_KEEP", "_StepOutput", "serve", "worker")
