--- What the sub-agents tell a model about the C target: the hardware, the
--- language, the rules a candidate must follow and the tunables syntax.
--- Edit freely; the prompt tests check that every target has each field.
return {
  target_desc = "a multi-core x86-64 CPU, in C11 with OpenMP (compiled with cc -O3 -march=native -fopenmp)",
  lang = "c",
  rules = "Rules: plain C11, any standard header, intrinsics and OpenMP pragmas are allowed; no file or network "
    .. "I/O, no processes, no dlopen, no timers, no signals, no constructors, no global state that survives "
    .. "between calls; the function must compute the full result on every call.",
  tune_syntax = "// mk:tune NAME v1 v2 v3   (then #ifndef NAME / #define NAME v1 / #endif)",
}
