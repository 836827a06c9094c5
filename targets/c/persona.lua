--- What the sub-agents tell a model about the C target: the hardware, the
--- language, the rules a candidate must follow, the tunables syntax, what a
--- plan must settle and how tuning works. Edit freely; the prompt tests
--- check that every target has the required fields. The measured facts
--- (cores, ISA, caches, sizes) come from facts() in machine.lua.
return {
  target_desc = "a multi-core x86-64 CPU, in C11 with OpenMP (compiled with cc -O3 -march=native -fopenmp)",
  lang = "c",
  rules = "Rules: plain C11, any standard header, intrinsics and OpenMP pragmas are allowed; no file or network "
    .. "I/O, no processes, no dlopen, no timers, no signals, no constructors, no global state that survives "
    .. "between calls; the function must compute the full result on every call, for every size (sizes are "
    .. "not multiples of the vector width or of your block sizes: handle the remainders).",
  tune_syntax = "// mk:tune NAME v1 v2 v3   (then #ifndef NAME / #define NAME v1 / #endif)",
  plan_template = "Settle: the loop order; blocking sizes against the cache sizes above; the vector width "
    .. "the ISA above allows and how remainders are handled; threading over the cores above (which loop, "
    .. "the schedule, false sharing); the memory traffic per element at the benchmark size.",
  tune_notes = "The engine compiles the file once per configuration with -DNAME=value for each tunable, so "
    .. "every use of a tunable must go through the macro. Offer values that divide the common sizes well "
    .. "and keep the remainder code correct for any size.",
}
