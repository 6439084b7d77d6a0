//===- cuda_driver_abi.h - CUDA driver types, constants and symbol names --===//
//
// The subset of cuda.h the runtime uses, written out so that no CUDA header is needed
// at build time. The types are ABI-identical to cuda.h's (ints, opaque pointers, the
// same enum values); test/runtime/cuda_driver_abi_test.cpp checks the constants and
// the symbol names against cuda.h where a CUDA toolkit is installed. No LibTorch here.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_CUDA_DRIVER_ABI_H
#define ATTN_RUNTIME_CUDA_DRIVER_ABI_H

#include <cstdint>

namespace attn {
namespace detail {
namespace cu {

using Result = int;              // CUresult
using Device = int;              // CUdevice
using Context = struct Ctx_st *; // CUcontext
using Module = struct Mod_st *;  // CUmodule
using Function = struct Func_st *; // CUfunction
using Stream = struct Stream_st *; // CUstream

constexpr Result kSuccess = 0;                                   // CUDA_SUCCESS
constexpr int kAttrComputeCapabilityMajor = 75;                  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrComputeCapabilityMinor = 76;                  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr int kAttrMultiprocessorCount = 16;                     // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrMaxSharedMemoryPerBlockOptin = 97;            // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
constexpr int kFuncAttrMaxDynamicSharedSizeBytes = 8;            // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kJitErrorLogBuffer = 5;                            // CU_JIT_ERROR_LOG_BUFFER
constexpr int kJitErrorLogBufferSizeBytes = 6;                   // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
/// Dynamic shared memory above this needs cuFuncSetAttribute (opt-in).
constexpr int64_t kDefaultDynamicSharedLimit = 48 * 1024;

/// The exported names resolved from libcuda.so.1 (cuda.h maps e.g. cuCtxPushCurrent to
/// cuCtxPushCurrent_v2; these are the names the macros expand to).
constexpr const char *kSymInit = "cuInit";
constexpr const char *kSymDeviceGet = "cuDeviceGet";
constexpr const char *kSymDeviceGetAttribute = "cuDeviceGetAttribute";
constexpr const char *kSymDevicePrimaryCtxRetain = "cuDevicePrimaryCtxRetain";
constexpr const char *kSymCtxPushCurrent = "cuCtxPushCurrent_v2";
constexpr const char *kSymCtxPopCurrent = "cuCtxPopCurrent_v2";
constexpr const char *kSymModuleLoadDataEx = "cuModuleLoadDataEx";
constexpr const char *kSymModuleGetFunction = "cuModuleGetFunction";
constexpr const char *kSymFuncSetAttribute = "cuFuncSetAttribute";
constexpr const char *kSymLaunchKernel = "cuLaunchKernel";
constexpr const char *kSymGetErrorString = "cuGetErrorString";
constexpr const char *kSymGetErrorName = "cuGetErrorName";

/// PyTorch's stable C shim (torch/csrc/inductor/aoti_torch/c/shim.h, exported by
/// libtorch_cuda since PyTorch 2.3): AOTITorchError (int32, 0 = success)
/// aoti_torch_get_current_cuda_stream(int32_t device_index, void **ret_stream).
constexpr const char *kSymTorchCurrentStream = "aoti_torch_get_current_cuda_stream";

} // namespace cu
} // namespace detail
} // namespace attn

#endif
