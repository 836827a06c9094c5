-- Scripted-model bank for RMSNorm (4096 x 4096, memory-bound at the bench size).
return {
  plans = {
    {
      id = "stream_stores",
      title = "AVX2 with non-temporal stores",
      text = [=[At 4096 x 4096 the kernel is memory-bound: 64 MiB of x in and 64 MiB
of out, and since each output store first pulls its destination line into cache
(write-allocate), the reference moves about 192 MiB per call; its serial double
accumulator adds latency on top. Compute the sum of squares with AVX2 FMAs in two
8-wide float accumulators (16 elements per step; float is accurate to ~1e-6 for
4096 O(1) terms), reduce the lanes, add the scalar tail for cols % 16, then write
the scaled row x * inv * scale with non-temporal `_mm256_stream_ps` stores that
bypass the cache and skip the write-allocate read (~128 MiB per call). Stream
stores need 32-byte alignment: peel scalar stores up to the first aligned address
of the row, scalar tail after the last full vector, `_mm_sfence()` at the end.]=],
      kernels = { "stream_store", "stream_store_typo", "avx_notail" },
    },
    {
      id = "stream_rows_omp",
      title = "Streaming stores, rows over OpenMP",
      text = [=[Keep the streaming-store row kernel and split the rows over OpenMP
threads (`schedule(static, RB)`): a second core keeps more outstanding memory
requests in flight, which is what a bandwidth-bound loop needs. Fence each
thread's non-temporal stores before its row loop ends. Tune the chunk with
`// mk:tune RB 1 8 64`.]=],
      kernels = { "stream_omp" },
    },
    {
      id = "hw_rsqrt",
      title = "Hardware reciprocal square root",
      text = [=[Replace the sqrt and divide of the normaliser with the hardware
reciprocal square root `_mm_rsqrt_ss`, one instruction, and vectorise both row
passes with AVX2 (two accumulators for the sum of squares).]=],
      kernels = { "avx_rsqrt" },
    },
    {
      id = "separate_passes",
      title = "Separate single-purpose passes",
      text = [=[Split the work into three single-purpose passes over the matrix:
per-row inverse RMS into a rows-long array, then out = x * inv[r], then
out *= scale[c]. Each loop is trivial for the compiler to vectorise.]=],
      kernels = { "three_pass" },
    },
  },
  kernels = {
    stream_store = { file = "stream_store.c", expect = "fast" },
    stream_store_typo = { file = "stream_store_typo.c", expect = "compile_error", fix = "stream_store" },
    avx_notail = { file = "avx_notail.c", expect = "incorrect" },
    stream_omp = { file = "stream_omp.c", expect = "fast" },
    avx_rsqrt = { file = "avx_rsqrt.c", expect = "incorrect" },
    three_pass = { file = "three_pass.c", expect = "slow" },
  },
}
