//===- cuda_driver.h - the CUDA driver API subset the runtime uses --------===//
//
// The runtime needs no CUDA headers or libraries at build time: it dlopen()s
// libcuda.so.1 at the first CUDA call and resolves the functions of
// cuda_driver_abi.h by name.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_CUDA_DRIVER_H
#define ATTN_RUNTIME_CUDA_DRIVER_H

#include "attn/runtime.h"
#include "cuda_driver_abi.h"

#include <array>
#include <map>
#include <utility>
#include <cstdint>
#include <string>
#include <vector>

namespace attn {
namespace detail {

/// The libcuda.so.1 functions, resolved once. get() throws c10::Error when no driver
/// can be loaded, a symbol is missing or cuInit fails.
struct CudaDriver {
  cu::Result (*init)(unsigned int flags);
  cu::Result (*device_get)(cu::Device *device, int ordinal);
  cu::Result (*device_get_attribute)(int *value, int attribute, cu::Device device);
  cu::Result (*primary_ctx_retain)(cu::Context *ctx, cu::Device device);
  cu::Result (*ctx_push_current)(cu::Context ctx);
  cu::Result (*ctx_pop_current)(cu::Context *ctx);
  cu::Result (*module_load_data_ex)(cu::Module *module, const void *image,
                                    unsigned int num_options, int *options, void **values);
  cu::Result (*module_get_function)(cu::Function *fn, cu::Module module, const char *name);
  cu::Result (*func_set_attribute)(cu::Function fn, int attribute, int value);
  cu::Result (*launch_kernel)(cu::Function fn, unsigned int grid_x, unsigned int grid_y,
                              unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                              unsigned int block_z, unsigned int shared_bytes, cu::Stream stream,
                              void **params, void **extra);
  cu::Result (*get_error_string)(cu::Result error, const char **text);
  cu::Result (*get_error_name)(cu::Result error, const char **text);

  static const CudaDriver &get();
  /// "CUDA_ERROR_X: description" for a driver result.
  std::string describe(cu::Result r) const;
};

/// A device pointer as a kernel argument.
inline uint64_t ptr_arg(const torch::Tensor &t) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.defined() ? t.data_ptr() : nullptr));
}

/// The value of one parameter of a Triton kernel: a device pointer (its types *bf16,
/// *fp32, ...), an integer (i32 or i64) or a float (fp32).
struct TritonArg {
  enum Kind { Pointer, Int, Float } kind = Int;
  uint64_t pointer = 0;
  int64_t integer = 0;
  double real = 0;
  /// An integer tensor's Triton pointer type (*i32, *i64, ...), which the kernel's
  /// parameter must have: an artifact that reads it at another width is refused.
  std::string integer_pointer = {};
};
inline TritonArg triton_ptr(const torch::Tensor &t) {
  std::string integer_pointer;
  if (t.defined() && c10::isIntegralType(t.scalar_type(), /*includeBool=*/false))
    integer_pointer = "*i" + std::to_string(t.element_size() * 8);
  return {TritonArg::Pointer, ptr_arg(t), 0, 0, integer_pointer};
}
inline TritonArg triton_int(int64_t v) { return {TritonArg::Int, 0, v, 0}; }
inline TritonArg triton_float(double v) { return {TritonArg::Float, 0, 0, v}; }
/// A kernel's arguments by parameter name (the launch description orders them).
using TritonArgs = std::map<std::string, TritonArg>;

/// What the Triton kernels' grid rules read: batch, query heads, key/value heads, Nq, Nk,
/// and the decode forward's key chunks.
struct TritonSizes {
  int64_t B = 0, H = 0, H_KV = 0, NQ = 0, NK = 0, SPLITS = 1;
};

/// The number of streaming multiprocessors of CUDA device `ordinal`.
int64_t triton_sm_count(int ordinal);

/// The grid of `image`'s rule (GRID_RULES of attn.triton_aot) for `sizes` and its
/// tiles; an unknown rule is an error naming it.
std::array<int64_t, 3> triton_grid(const Library &lib, const TritonImage &image,
                                   const TritonSizes &sizes);

/// The artifact's cubin of Triton kernel `kernel` for `device`: the device's chip (as
/// for cuda-targets: the exact sm_XY, else the highest same-major one with a lower
/// minor), storage `dtype`, `head_dim` and `causal` variant. An error naming the
/// device's chip and the cubins the artifact has when none fits.
const TritonImage &triton_image(const Library &lib, const torch::Device &device,
                                TritonKernel kernel, torch::ScalarType dtype,
                                int64_t head_dim, bool causal);

/// Launches the artifact's Triton kernel `kernel` (attn_fwd, attn_bwd_preprocess,
/// attn_bwd_dkdv, attn_bwd_dq) on `device`: the cubin triton_image chooses; the grid of
/// its rule; `args` in the
/// order of its parameters, then Triton's global and profile scratch pointers (a buffer
/// per launch where the cubin asks for scratch, else null); num_warps · 32 threads and
/// its shared memory, on PyTorch's current stream. A missing cubin or argument is an
/// error naming what the artifact has.
void triton_launch(const Library &lib, const torch::Device &device, TritonKernel kernel,
                   torch::ScalarType dtype, int64_t head_dim, bool causal,
                   const TritonSizes &sizes, const TritonArgs &args);

} // namespace detail
} // namespace attn

#endif
