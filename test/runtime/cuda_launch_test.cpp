// The runtime's driver-API side of a GPU launch, against a fake libcuda.so.1
// (fake_cuda/fake_libcuda.c, found through LD_LIBRARY_PATH): no GPU and no CUDA
// tensors are needed, so this runs everywhere. It checks which image each device gets,
// that modules are loaded once per (artifact, device), the launch configuration and
// argument order handed to cuLaunchKernel, the opt-in for > 48 KiB dynamic shared
// memory, the stream (PyTorch's current one, through the shim symbol this executable
// exports in place of libtorch_cuda), balanced context push/pop and the error texts.
#include "attn/runtime.h"
#include "cuda_driver.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <functional>
#include <string>

// The stable C shim of libtorch_cuda, as the runtime looks it up (dlsym).
extern "C" __attribute__((visibility("default"))) int32_t
aoti_torch_get_current_cuda_stream(int32_t device_index, void **stream) {
  *stream = reinterpret_cast<void *>(static_cast<uintptr_t>(0x5000 + device_index));
  return 0;
}

namespace {

using attn::Library;
using attn::detail::cuda_launch;
using attn::detail::int_arg;
using attn::detail::KernelArg;

template <class Fn> Fn fake(const char *name) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(h, nullptr) << "fake libcuda.so.1 not loaded";
  void *sym = h ? dlsym(h, name) : nullptr;
  EXPECT_NE(sym, nullptr) << name;
  return reinterpret_cast<Fn>(sym);
}

std::string error_of(const std::function<void()> &f) {
  try {
    f();
  } catch (const c10::Error &e) {
    return e.what_without_backtrace();
  }
  return "(no error)";
}

class FakeDriver : public ::testing::Test {
protected:
  void SetUp() override {
    const auto &driver = attn::detail::CudaDriver::get(); // loads the fake
    (void)driver;
    ASSERT_NE(fake<int (*)()>("fake_module_loads"), nullptr)
        << "libcuda.so.1 is not the fake (run through ctest)";
    lib = Library::load(ATTN_FX_GPU_ONLY);
    fake<void (*)(int)>("fake_expect_args")(0);
  }
  const attn::CudaKernel &kernel(const char *role, torch::ScalarType t, int64_t d) {
    const attn::CudaKernel *k = lib->cuda_kernel(role, t, d);
    EXPECT_NE(k, nullptr);
    return *k;
  }
  std::shared_ptr<const Library> lib;
};

TEST_F(FakeDriver, LaunchConfigurationArgumentsAndStream) {
  const auto &fwd = kernel("forward", torch::kFloat, 64); // tile 64, 128 threads, smem 0
  std::vector<KernelArg> args;
  for (int i = 0; i < 12; ++i)
    args.push_back(int_arg(1000 + i));
  fake<void (*)(int)>("fake_expect_args")(12);
  cuda_launch(*lib, fwd, torch::Device(torch::kCUDA, 0), {3, 8, 2}, args);
  EXPECT_STREQ(fake<const char *(*)()>("fake_last_kernel")(), "attn_fwd_f32_d64");
  const unsigned *grid = fake<const unsigned *(*)()>("fake_last_grid")();
  const unsigned *block = fake<const unsigned *(*)()>("fake_last_block")();
  EXPECT_EQ(grid[0], 3u);
  EXPECT_EQ(grid[1], 8u);
  EXPECT_EQ(grid[2], 2u);
  EXPECT_EQ(block[0], 128u);
  EXPECT_EQ(block[1], 1u);
  EXPECT_EQ(block[2], 1u);
  EXPECT_EQ(fake<unsigned (*)()>("fake_last_smem")(), 0u);
  EXPECT_EQ(fake<void *(*)()>("fake_last_stream")(), reinterpret_cast<void *>(0x5000));
  const uint64_t *got = fake<const uint64_t *(*)()>("fake_last_args")();
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(got[i], uint64_t(1000 + i)) << "argument " << i;
  EXPECT_EQ(fake<int (*)()>("fake_ctx_depth")(), 0) << "context push/pop unbalanced";
}

TEST_F(FakeDriver, ImagePerDeviceLoadedOnce) {
  const auto &fwd = kernel("forward", torch::kFloat, 64);
  auto loads = fake<int (*)()>("fake_module_loads");
  auto image = fake<const void *(*)()>("fake_last_image");
  const int before = loads();
  // device 0 is sm_86: the sm_80 cubin (same major, lower minor) — unless an earlier
  // test loaded it already, in which case nothing is loaded again.
  cuda_launch(*lib, fwd, torch::Device(torch::kCUDA, 0), {1, 1, 1}, {});
  cuda_launch(*lib, fwd, torch::Device(torch::kCUDA, 0), {1, 1, 1}, {});
  EXPECT_LE(loads() - before, 1);
  if (loads() > before) {
    EXPECT_EQ(image(), lib->cuda_cubins()[0].data);
  }
  const int after0 = loads();
  cuda_launch(*lib, fwd, torch::Device(torch::kCUDA, 1), {1, 1, 1}, {}); // sm_90: exact
  EXPECT_EQ(loads(), after0 + 1);
  EXPECT_EQ(image(), lib->cuda_cubins()[1].data);
  EXPECT_EQ(fake<void *(*)()>("fake_last_stream")(), reinterpret_cast<void *>(0x5001));
  cuda_launch(*lib, fwd, torch::Device(torch::kCUDA, 1), {1, 1, 1}, {});
  EXPECT_EQ(loads(), after0 + 1);
}

TEST_F(FakeDriver, LargeDynamicSharedMemoryIsOptedIn) {
  cuda_launch(*lib, kernel("forward", torch::kHalf, 64), torch::Device(torch::kCUDA, 0),
              {1, 1, 1}, {});
  EXPECT_EQ(fake<int (*)()>("fake_last_attr")(), attn::detail::cu::kFuncAttrMaxDynamicSharedSizeBytes);
  EXPECT_EQ(fake<int (*)()>("fake_last_attr_value")(), 65536);
  EXPECT_EQ(fake<unsigned (*)()>("fake_last_smem")(), 65536u);
  std::string msg = error_of([&] {
    cuda_launch(*lib, kernel("backward_dq", torch::kHalf, 64), torch::Device(torch::kCUDA, 0),
                {1, 1, 1}, {});
  });
  EXPECT_NE(msg.find("needs 200000 bytes of dynamic shared memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at most 101376"), std::string::npos) << msg;
}

TEST_F(FakeDriver, DriverErrorsAreReportedWithTheirNames) {
  std::string msg = error_of([&] {
    cuda_launch(*lib, kernel("backward_prep", torch::kHalf, 64), torch::Device(torch::kCUDA, 0),
                {2, 3, 4}, {});
  });
  EXPECT_NE(msg.find("launching GPU kernel fail_launch (backward_prep f16 d=64, grid 2x3x4"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"), std::string::npos)
      << msg;
  msg = error_of([&] {
    cuda_launch(*lib, kernel("backward_dkdv", torch::kHalf, 64), torch::Device(torch::kCUDA, 0),
                {1, 1, 1}, {});
  });
  EXPECT_NE(msg.find("kernel missing (cuda-kernel backward_dkdv f16 64) not found"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA_ERROR_NOT_FOUND"), std::string::npos) << msg;
  msg = error_of([&] {
    cuda_launch(*lib, kernel("forward", torch::kFloat, 64), torch::Device(torch::kCUDA, 5),
                {1, 1, 1}, {});
  });
  EXPECT_NE(msg.find("cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE"), std::string::npos) << msg;
  msg = error_of([&] {
    cuda_launch(*lib, kernel("forward", torch::kFloat, 64), torch::Device(torch::kCUDA, 0),
                {1, 70000, 1}, {});
  });
  EXPECT_NE(msg.find("heads (H) = 70000 exceeds the CUDA grid limit 65535"), std::string::npos)
      << msg;
  EXPECT_EQ(fake<int (*)()>("fake_ctx_depth")(), 0) << "context push/pop unbalanced";
}

TEST_F(FakeDriver, EmptyGridLaunchesNothing) {
  cuda_launch(*lib, kernel("forward", torch::kBFloat16, 128), torch::Device(torch::kCUDA, 0),
              {1, 1, 1}, {});
  cuda_launch(*lib, kernel("forward", torch::kHalf, 128), torch::Device(torch::kCUDA, 0),
              {4, 0, 2}, {});
  EXPECT_STREQ(fake<const char *(*)()>("fake_last_kernel")(), "attn_fwd_bf16_d128");
}

} // namespace
