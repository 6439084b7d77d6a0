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
#include <initializer_list>
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

/// One kernel argument: a device pointer or an i64 scalar (both 8 bytes, as the
/// kernels' parameters are).
using KernelArg = uint64_t;
inline KernelArg ptr_arg(const torch::Tensor &t) {
  return static_cast<KernelArg>(reinterpret_cast<uintptr_t>(t.defined() ? t.data_ptr() : nullptr));
}
inline KernelArg int_arg(int64_t v) { return static_cast<KernelArg>(v); }

/// The `count` arguments of a kernel, each given with its position (the
/// ATTN_CUDA_* constants of attn/abi.h), every position exactly once.
inline std::vector<KernelArg> cuda_args(int count,
                                        std::initializer_list<std::pair<int, KernelArg>> given) {
  std::vector<KernelArg> args(count);
  std::vector<bool> set(count, false);
  for (const auto &[position, value] : given) {
    TORCH_CHECK(position >= 0 && position < count && !set[position],
                "attn: internal error: CUDA kernel argument ", position, " given twice or out of range");
    set[position] = true;
    args[position] = value;
  }
  TORCH_CHECK(given.size() == static_cast<size_t>(count), "attn: internal error: ", given.size(),
              " of ", count, " CUDA kernel arguments given");
  return args;
}

/// Launch the artifact's kernel `k` on `device` (a CUDA device) over `grid` blocks of
/// k.threads threads and k.smem_bytes dynamic shared memory, on PyTorch's current
/// stream for that device. Loads the artifact's image for the device at first use.
void cuda_launch(const Library &lib, const CudaKernel &k, const torch::Device &device,
                 std::array<int64_t, 3> grid, std::vector<KernelArg> args);

} // namespace detail
} // namespace attn

#endif
