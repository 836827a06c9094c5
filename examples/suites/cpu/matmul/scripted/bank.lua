-- Scripted-model bank for plain matmul (suite copy of examples/tasks/c/matmul).
return {
  plans = {
    {
      id = "register_block_4rows",
      title = "4-row register blocking",
      text = [=[The textbook loop keeps one c element in a register and walks b
down a column (stride n floats) with a serial double accumulator: one dependent
add per multiply and a new cache line per step. Switch to i-p-j order and block
four rows of c together: for each p, load a[i..i+3][p] as four scalars and the
b row b[p][0..n) once, and update the four c rows with unit-stride FMAs. Each b
load now feeds four FMAs instead of one, and the j loop vectorises with AVX2.
m is not always a multiple of 4 (37, 70 and 1 in the tests): finish the
remaining rows with a one-row version of the same loop. The signature order is
(a, b, c, m, n, k): n before k.]=],
      kernels = { "regblock4", "regblock4_typo", "regblock4_notail" },
    },
    {
      id = "ipj_order",
      title = "i-p-j loop order",
      text = [=[Minimal change with the largest effect: reorder the loops to i-p-j.
Zero the row of c, then for each p broadcast a[i][p] and add a[i][p] * b[p][:] to
it; both streams are unit stride so GCC vectorises the inner loop with restrict.]=],
      kernels = { "a_colmajor" },
    },
    {
      id = "column_panels_omp",
      title = "Column panels of b in L2, OpenMP rows",
      text = [=[Tile the columns: compute c in panels of NB columns so the k x NB
slab of b (64 KiB for NB = 64, k = 256) stays in L2 while every row of a is
multiplied against it, instead of streaming all of b once per row. Inside a
panel use the i-p-j order over the NB-wide slice. Split the rows over OpenMP
threads inside one parallel region: `omp for schedule(static) nowait` gives each
thread the same rows in every panel, so panels need no barrier. Tune the panel
width with `// mk:tune NB 32 64 128 256`.]=],
      kernels = { "tiled_omp" },
    },
    {
      id = "column_major_axpy",
      title = "Column-major axpy order",
      text = [=[Organise the computation by output columns as a column-major BLAS
would: for each column j of c and each p, apply the scalar b[p][j] to the whole
column, c[:][j] += a[:][p] * b[p][j]. Each b element is read exactly once.]=],
      kernels = { "jpi_order" },
    },
  },
  kernels = {
    regblock4 = { file = "regblock4.c", expect = "fast" },
    regblock4_typo = { file = "regblock4_typo.c", expect = "compile_error", fix = "regblock4" },
    regblock4_notail = { file = "regblock4_notail.c", expect = "incorrect" },
    a_colmajor = { file = "a_colmajor.c", expect = "incorrect" },
    tiled_omp = { file = "tiled_omp.c", expect = "fast" },
    jpi_order = { file = "jpi_order.c", expect = "slow" },
  },
}
