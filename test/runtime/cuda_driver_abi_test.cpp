// The runtime declares the CUDA driver API it uses itself (runtime/cuda_driver_abi.h)
// so that it builds without CUDA headers. This test, built where cuda.h exists,
// checks those declarations against cuda.h: enum values at compile time, and the
// exported symbol names (cuda.h maps e.g. cuCtxPushCurrent to cuCtxPushCurrent_v2)
// by expanding cuda.h's macros.
#include <cuda.h>

#include "cuda_driver_abi.h"

#include <cstdio>
#include <cstring>

namespace cu = attn::detail::cu;

static_assert(cu::kSuccess == CUDA_SUCCESS, "CUDA_SUCCESS");
static_assert(cu::kAttrComputeCapabilityMajor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc major");
static_assert(cu::kAttrComputeCapabilityMinor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc minor");
static_assert(cu::kAttrMultiprocessorCount == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SMs");
static_assert(cu::kAttrMaxSharedMemoryPerBlockOptin ==
                  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "smem opt-in");
static_assert(cu::kFuncAttrMaxDynamicSharedSizeBytes ==
                  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, "dynamic smem attribute");
static_assert(cu::kJitErrorLogBuffer == CU_JIT_ERROR_LOG_BUFFER, "jit log");
static_assert(cu::kJitErrorLogBufferSizeBytes == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, "jit log size");
static_assert(sizeof(cu::Result) == sizeof(CUresult) && sizeof(cu::Device) == sizeof(CUdevice) &&
                  sizeof(cu::Context) == sizeof(CUcontext) && sizeof(cu::Stream) == sizeof(CUstream),
              "type sizes");

#define ATTN_STR2(x) #x
#define ATTN_STR(x) ATTN_STR2(x)

int main() {
  struct {
    const char *ours, *cuda_h;
  } names[] = {
      {cu::kSymInit, ATTN_STR(cuInit)},
      {cu::kSymDeviceGet, ATTN_STR(cuDeviceGet)},
      {cu::kSymDeviceGetAttribute, ATTN_STR(cuDeviceGetAttribute)},
      {cu::kSymDevicePrimaryCtxRetain, ATTN_STR(cuDevicePrimaryCtxRetain)},
      {cu::kSymCtxPushCurrent, ATTN_STR(cuCtxPushCurrent)},
      {cu::kSymCtxPopCurrent, ATTN_STR(cuCtxPopCurrent)},
      {cu::kSymModuleLoadDataEx, ATTN_STR(cuModuleLoadDataEx)},
      {cu::kSymModuleGetFunction, ATTN_STR(cuModuleGetFunction)},
      {cu::kSymFuncSetAttribute, ATTN_STR(cuFuncSetAttribute)},
      {cu::kSymLaunchKernel, ATTN_STR(cuLaunchKernel)},
      {cu::kSymGetErrorString, ATTN_STR(cuGetErrorString)},
      {cu::kSymGetErrorName, ATTN_STR(cuGetErrorName)},
  };
  int failures = 0;
  for (const auto &n : names)
    if (std::strcmp(n.ours, n.cuda_h) != 0) {
      std::printf("FAIL: the runtime resolves %s, cuda.h calls it %s\n", n.ours, n.cuda_h);
      ++failures;
    }
  std::printf("%s: %zu driver symbol names checked against cuda.h %d\n",
              failures ? "FAILED" : "OK", sizeof(names) / sizeof(names[0]), CUDA_VERSION);
  return failures ? 1 : 0;
}
