--- Per-generation TPU figures the Pallas prompts state (VMEM and SMEM per
--- TensorCore, the scoped VMEM limit Mosaic uses unless vmem_limit_bytes
--- raises it, the MXU shape), each with where it comes from. `match` is a
--- Lua pattern tried against the lower-cased jax device_kind ("TPU v5 lite",
--- "TPU v6 lite", ...). A generation without a sourced figure is left out
--- rather than guessed: the prompt then says "not in the table".
--- `device_kind` is JAX's name for the chip: in TPU interpret mode the
--- harness shows it to kernels that ask (`--chip`; targets/pallas/args.lua
--- M.chip picks the entry, v6e by default).
local CLOUD_V5E = "Cloud TPU v5e documentation (cloud.google.com/tpu/docs/v5e), as noted in kb/tpu-profiling-roofline.md"
local CLOUD_V6E = "Cloud TPU v6e documentation (cloud.google.com/tpu/docs/v6e), as noted in kb/tpu-profiling-roofline.md"
local SCOPED = "JAX Pallas TPU docs on vmem_limit_bytes; default depends on chip and libtpu (kb/tpu-vmem-budget.md)"
local MXU = "kb/tpu-matmul-tiling.md (systolic array size per generation)"

return {
  {
    name = "TPU v5e", match = "v5 ?lite", alt = "v5e", device_kind = "TPU v5 lite",
    vmem = { "128 MiB per TensorCore", CLOUD_V5E },
    smem = { "about 1 MiB per TensorCore", CLOUD_V5E },
    scoped_vmem = { "16 MiB by default", SCOPED },
    mxu = { "128 x 128 (four MXUs per TensorCore)", MXU },
  },
  {
    name = "TPU v6e", match = "v6", alt = "trillium", device_kind = "TPU v6 lite",
    vmem = { "128 MiB per TensorCore", CLOUD_V6E },
    smem = { "about 1 MiB per TensorCore", CLOUD_V6E },
    scoped_vmem = { "32 MiB by default", SCOPED },
    mxu = { "256 x 256", MXU },
  },
}
