// The runtime's driver-API side of a GPU launch of the Triton kernels
// (fixtures/triton_gpu.c), against a fake libcuda.so.1
// (fake_cuda/fake_libcuda.c, found through LD_LIBRARY_PATH): no GPU and no CUDA
// tensors are needed, so this runs everywhere. It checks which image each device gets,
// that modules are loaded once per (artifact, device), the launch configuration and
// argument order handed to cuLaunchKernel, the opt-in for > 48 KiB dynamic shared
// memory, the stream (PyTorch's current one, through the shim symbol this executable
// exports in place of libtorch_cuda), balanced context push/pop and the error texts;
// and the kernels a call's forward and backward launch, in order, with their buffers
// (run_forward_triton, run_backward_triton on CPU tensors: fixtures/triton_rows_first.c).
#include "attn/runtime.h"
#include "cuda_driver.h"
#include "gpu_launch.h"

#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstring>
#include <functional>
#include <map>
#include <string>

// The stable C shim of libtorch_cuda, as the runtime looks it up (dlsym).
extern "C" __attribute__((visibility("default"))) int32_t
aoti_torch_get_current_cuda_stream(int32_t device_index, void **stream) {
  *stream = reinterpret_cast<void *>(static_cast<uintptr_t>(0x5000 + device_index));
  return 0;
}

namespace {

using attn::Library;
using attn::detail::triton_float;
using attn::detail::triton_int;
using attn::detail::triton_launch;
using attn::detail::TritonArgs;
using attn::detail::TritonSizes;

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

// attn_triton_launch describes one cubin per kernel.
class TritonFakeDriver : public ::testing::Test {
protected:
  void SetUp() override {
    (void)attn::detail::CudaDriver::get(); // loads the fake
    ASSERT_NE(fake<int (*)()>("fake_module_loads"), nullptr)
        << "libcuda.so.1 is not the fake (run through ctest)";
    lib = Library::load(ATTN_FX_TRITON_GPU);
    ASSERT_NE(lib->triton(), nullptr);
  }
  const attn::TritonImage &image(const std::string &symbol) {
    for (const auto &image : lib->triton()->images)
      if (image.symbol == symbol)
        return image;
    ADD_FAILURE() << "no image " << symbol;
    return lib->triton()->images.front();
  }
  /// A pointer argument with a recognisable address.
  static attn::detail::TritonArg address(uint64_t a) {
    return {attn::detail::TritonArg::Pointer, a, 0, 0};
  }
  std::shared_ptr<const Library> lib;
};

TEST_F(TritonFakeDriver, ReadsTheLaunchDescription) {
  const auto &launch = *lib->triton();
  EXPECT_EQ(launch.ptxas_version, "Cuda compilation tools, release 13.0, V13.0.88");
  ASSERT_EQ(launch.images.size(), 14u);
  const auto &fwd = image("attn_triton_sm_90_bf16_d64_causal_attn_fwd");
  EXPECT_EQ(fwd.block_m, 128);
  EXPECT_EQ(fwd.block_n, 32);
  EXPECT_EQ(fwd.num_warps, 8);
  EXPECT_EQ(fwd.shared_bytes, 65536);
  EXPECT_EQ(fwd.parameters.size(), 5u);
  EXPECT_EQ(fwd.parameters[4], std::make_pair(std::string("scale"), std::string("fp32")));
  EXPECT_DOUBLE_EQ(fwd.scale, 0.125);
  EXPECT_STREQ(static_cast<const char *>(fwd.data), "sm_90 causal attn_fwd");
  EXPECT_TRUE(lib->manifest().triton);
  ASSERT_EQ(lib->manifest().triton_kernels.size(), 1u);
  EXPECT_EQ(lib->manifest().triton_kernels[0].first, "bf16");
}

TEST_F(TritonFakeDriver, CubinPerChipArgumentsInDescribedOrderGridAndStream) {
  auto last_image = fake<const void *(*)()>("fake_last_image");
  auto args = fake<const uint64_t *(*)()>("fake_last_args");
  auto grid = fake<const unsigned *(*)()>("fake_last_grid");
  auto block = fake<const unsigned *(*)()>("fake_last_block");
  // Given in another order than the cubin's parameters, with extras it does not take.
  TritonArgs given{{"scale", triton_float(0.125)}, {"NQ", triton_int(130)},
                   {"Out", address(0xB000)},       {"Q", address(0xA000)},
                   {"stride_qm", triton_int(-64)}, {"NK", triton_int(99)}};
  const TritonSizes sizes{2, 8, 2, 130, 96}; // B, H, H_KV, NQ, NK
  fake<void (*)(int)>("fake_expect_args")(7); // 5 parameters + 2 scratch pointers
  // cuda:1 is sm_90: its own cubin, 8 warps, 64 KiB shared (opted in).
  triton_launch(*lib, torch::Device(torch::kCUDA, 1), attn::TritonKernel::Forward, torch::kBFloat16, 64,
                /*causal=*/true, sizes, given);
  EXPECT_EQ(last_image(), image("attn_triton_sm_90_bf16_d64_causal_attn_fwd").data);
  EXPECT_STREQ(fake<const char *(*)()>("fake_last_kernel")(), "attn_fwd");
  EXPECT_EQ(args()[0], 0xA000u); // Q
  EXPECT_EQ(args()[1], 0xB000u); // Out
  EXPECT_EQ(static_cast<int32_t>(args()[2] & 0xffffffffu), -64); // stride_qm as i32
  EXPECT_EQ(args()[3] & 0xffffffffu, 130u);                      // NQ
  float scale = 0;
  const uint32_t bits = static_cast<uint32_t>(args()[4]);
  std::memcpy(&scale, &bits, sizeof scale);
  EXPECT_EQ(scale, 0.125f);
  EXPECT_EQ(args()[5], 0u); // global scratch: none asked for
  EXPECT_EQ(args()[6], 0u); // profile scratch
  EXPECT_EQ(grid()[0], 2u);  // cdiv(130, BLOCK_M = 128)
  EXPECT_EQ(grid()[1], 16u); // B * H
  EXPECT_EQ(grid()[2], 1u);
  EXPECT_EQ(block()[0], 256u); // 8 warps
  EXPECT_EQ(fake<unsigned (*)()>("fake_last_smem")(), 65536u);
  EXPECT_EQ(fake<int (*)()>("fake_last_attr_value")(), 65536);
  EXPECT_EQ(fake<void *(*)()>("fake_last_stream")(), reinterpret_cast<void *>(0x5001));

  // cuda:0 is sm_86: the sm_80 cubins; the dK/dV grid runs over key tiles of BLOCK_N
  // and the key/value heads.
  fake<void (*)(int)>("fake_expect_args")(4);
  triton_launch(*lib, torch::Device(torch::kCUDA, 0), attn::TritonKernel::BackwardKeys, torch::kBFloat16, 64,
                /*causal=*/false, sizes, {{"DOut", address(0xD000)}, {"NK", triton_int(96)}});
  EXPECT_EQ(last_image(), image("attn_triton_sm_80_bf16_d64_full_attn_bwd_dkdv").data);
  EXPECT_EQ(args()[0], 0xD000u);
  EXPECT_EQ(args()[1] & 0xffffffffu, 96u);
  EXPECT_EQ(grid()[0], 3u); // cdiv(96, BLOCK_N = 32)
  EXPECT_EQ(grid()[1], 4u); // B * H_KV
  EXPECT_EQ(block()[0], 128u);
  // The preprocess kernel does not depend on is_causal: one cubin for both.
  triton_launch(*lib, torch::Device(torch::kCUDA, 0), attn::TritonKernel::BackwardPreprocess, torch::kBFloat16,
                64, /*causal=*/true, sizes, {{"DOut", address(0xD000)}, {"NK", triton_int(96)}});
  EXPECT_EQ(last_image(), image("attn_triton_sm_80_bf16_d64_any_attn_bwd_preprocess").data);
  EXPECT_EQ(grid()[0], 3u); // cdiv(130, BLOCK_M = 64): the backward's tiles
  EXPECT_EQ(fake<int (*)()>("fake_ctx_depth")(), 0) << "context push/pop unbalanced";
}

TEST_F(TritonFakeDriver, DecodeGridAndSmCount) {
  // attn_fwd_split's programs: row tiles of the GQA group's packed rows, B * H_KV, chunks.
  attn::TritonImage split = image("attn_triton_sm_90_bf16_d64_full_attn_fwd");
  split.kernel = attn::TritonKernel::ForwardSplit;
  split.block_m = 16;
  split.grid = "(cdiv(H / H_KV * NQ, BLOCK_M), B * H_KV, SPLITS)";
  TritonSizes sizes{2, 8, 2, 5, 4096}; // B, H, H_KV, NQ, NK
  sizes.SPLITS = 33;
  const std::array<int64_t, 3> grid = attn::detail::triton_grid(*lib, split, sizes);
  EXPECT_EQ(grid, (std::array<int64_t, 3>{2, 4, 33})); // cdiv(4 * 5, 16), 2 * 2, 33
  EXPECT_EQ(attn::detail::triton_sm_count(1), 132); // fake_libcuda.c's cuda:1
  EXPECT_EQ(attn::detail::triton_sm_count(0), 108);
}

TEST_F(TritonFakeDriver, CubinLoadedOncePerDevice) {
  auto loads = fake<int (*)()>("fake_module_loads");
  const TritonSizes sizes{1, 1, 1, 16, 16};
  const TritonArgs args{{"DOut", address(1)}, {"NK", triton_int(16)}};
  fake<void (*)(int)>("fake_expect_args")(4);
  triton_launch(*lib, torch::Device(torch::kCUDA, 0), attn::TritonKernel::BackwardQueries, torch::kBFloat16, 64,
                false, sizes, args);
  const int after = loads();
  triton_launch(*lib, torch::Device(torch::kCUDA, 0), attn::TritonKernel::BackwardQueries, torch::kBFloat16, 64,
                false, sizes, args);
  EXPECT_EQ(loads(), after);
  triton_launch(*lib, torch::Device(torch::kCUDA, 1), attn::TritonKernel::BackwardQueries, torch::kBFloat16, 64,
                false, sizes, args);
  EXPECT_EQ(loads(), after + 1); // sm_90's own cubin
  EXPECT_EQ(fake<const void *(*)()>("fake_last_image")(),
            image("attn_triton_sm_90_bf16_d64_full_attn_bwd_dq").data);
}

TEST_F(TritonFakeDriver, DriverErrorsAndSharedMemoryLimitsAreNamed) {
  const TritonSizes sizes{1, 1, 1, 16, 16};
  const TritonArgs args{{"DOut", address(1)}, {"NK", triton_int(16)}};
  fake<void (*)(int)>("fake_expect_args")(4);
  std::string msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 1), attn::TritonKernel::BackwardKeys, torch::kBFloat16, 64,
                  false, sizes, args);
  });
  EXPECT_NE(msg.find("launching GPU kernel fail_launch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"), std::string::npos)
      << msg;
  msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 1), attn::TritonKernel::BackwardKeys, torch::kBFloat16, 64,
                  true, sizes, args);
  });
  EXPECT_NE(msg.find("kernel missing (attn_triton_sm_90_bf16_d64_causal_attn_bwd_dkdv) not "
                     "found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA_ERROR_NOT_FOUND"), std::string::npos) << msg;
  msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 1), attn::TritonKernel::BackwardQueries, torch::kBFloat16, 64,
                  true, sizes, args);
  });
  EXPECT_NE(msg.find("needs 300000 bytes of dynamic shared memory, the device allows at most "
                     "232448"), std::string::npos) << msg;
  msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 5), attn::TritonKernel::BackwardQueries, torch::kBFloat16, 64,
                  false, sizes, args);
  });
  EXPECT_NE(msg.find("cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE"), std::string::npos) << msg;
  EXPECT_EQ(fake<int (*)()>("fake_ctx_depth")(), 0) << "context push/pop unbalanced";
}

TEST_F(TritonFakeDriver, MissingCubinsAndArgumentsAreNamed) {
  const TritonSizes sizes{1, 2, 2, 16, 16};
  TritonArgs fwd{{"Q", address(1)}, {"Out", address(2)}, {"stride_qm", triton_int(64)},
                 {"NQ", triton_int(16)}, {"scale", triton_float(0.125)}};
  std::string msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 1), attn::TritonKernel::Forward, torch::kHalf, 64, false,
                  sizes, fwd);
  });
  EXPECT_NE(msg.find("has no Triton cubin of attn_fwd (full) for device cuda:1 (sm_90), f16 and "
                     "head dim 64; its cubins are for sm_80 bf16 d64, sm_90 bf16 d64"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("--cuda-dtypes=f16"), std::string::npos) << msg;
  msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 0), attn::TritonKernel::Forward, torch::kBFloat16, 128, false,
                  sizes, fwd);
  });
  EXPECT_NE(msg.find("(sm_86), bf16 and head dim 128; its cubins are for sm_80 bf16 d64"),
            std::string::npos) << msg;
  // cuda:2 is sm_120: no cubin of its major.
  msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 2), attn::TritonKernel::Forward, torch::kBFloat16, 64, false,
                  sizes, fwd);
  });
  EXPECT_NE(msg.find("has no GPU code for device cuda:2 (sm_120, compute capability 12.0): its "
                     "cubins are for sm_80 sm_90"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--cuda-targets=sm_120"), std::string::npos) << msg;
  fwd.erase("stride_qm");
  msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 1), attn::TritonKernel::Forward, torch::kBFloat16, 64, false,
                  sizes, fwd);
  });
  EXPECT_NE(msg.find("takes a parameter stride_qm (i32) that this runtime does not provide"),
            std::string::npos) << msg;
  fwd["stride_qm"] = triton_int(int64_t{1} << 31);
  msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 1), attn::TritonKernel::Forward, torch::kBFloat16, 64, false,
                  sizes, fwd);
  });
  EXPECT_NE(msg.find("argument stride_qm = 2147483648 does not fit its type i32"),
            std::string::npos) << msg;
  fwd["stride_qm"] = address(3);
  msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 1), attn::TritonKernel::Forward, torch::kBFloat16, 64, false,
                  sizes, fwd);
  });
  EXPECT_NE(msg.find("declares parameter stride_qm as i32, which this runtime passes as a "
                     "pointer"), std::string::npos) << msg;
  msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 0), attn::TritonKernel::BackwardQueries, torch::kBFloat16, 64,
                  /*causal=*/true, sizes, {{"DOut", address(1)}, {"NK", triton_int(16)}});
  });
  EXPECT_NE(msg.find("has the grid rule '(NQ, B)', which this runtime does not compute"),
            std::string::npos) << msg;
  // B * H beyond the grid's y limit.
  msg = error_of([&] {
    triton_launch(*lib, torch::Device(torch::kCUDA, 0), attn::TritonKernel::BackwardQueries, torch::kBFloat16, 64,
                  false, TritonSizes{2, 40000, 40000, 16, 16},
                  {{"DOut", address(1)}, {"NK", triton_int(16)}});
  });
  EXPECT_NE(msg.find("batch x heads = 80000 exceeds the CUDA grid limit 65535"),
            std::string::npos) << msg;
  EXPECT_EQ(fake<int (*)()>("fake_ctx_depth")(), 0) << "context push/pop unbalanced";
}

// ---- A backward that runs rows first (fixtures/triton_rows_first.c) -----------------
// run_forward_triton and run_backward_triton as a CUDA call runs them, with CPU tensors:
// the fake driver records each launch (kernel, grid, the five parameters' values).

/// Records the size of every CPU allocation while installed (the tile states' sizes).
class RecordingAllocator final : public c10::Allocator {
public:
  RecordingAllocator() : inner_(c10::GetCPUAllocator()) {
    c10::SetCPUAllocator(this, /*priority=*/UINT8_MAX);
  }
  ~RecordingAllocator() override { c10::SetCPUAllocator(inner_, UINT8_MAX); }
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr data = inner_->allocate(n);
    bytes_[reinterpret_cast<uint64_t>(data.get())] = n;
    return data;
  }
  void copy_data(void *dest, const void *src, std::size_t count) const override {
    inner_->copy_data(dest, src, count);
  }
  /// The size of the allocation at `address`; 0 if none was made there.
  size_t bytes_at(uint64_t address) const {
    auto it = bytes_.find(address);
    return it == bytes_.end() ? 0 : it->second;
  }

private:
  c10::Allocator *inner_;
  std::map<uint64_t, size_t> bytes_;
};

struct Launch {
  std::string kernel;
  std::array<unsigned, 3> grid;
  std::array<uint64_t, 5> args; // the kernel's five parameters (the fixture's)
};

class TritonRowsFirst : public ::testing::Test {
protected:
  void SetUp() override {
    (void)attn::detail::CudaDriver::get();
    ASSERT_NE(fake<int (*)()>("fake_module_loads"), nullptr)
        << "libcuda.so.1 is not the fake (run through ctest)";
    fake<void (*)(int)>("fake_expect_args")(5);
  }
  /// The launches since the last call.
  static std::vector<Launch> launches() {
    std::vector<Launch> out;
    for (int i = 0; i < fake<int (*)()>("fake_launches")(); ++i) {
      Launch l;
      l.kernel = fake<const char *(*)(int)>("fake_launch_kernel")(i);
      const unsigned *grid = fake<const unsigned *(*)(int)>("fake_launch_grid")(i);
      std::copy(grid, grid + 3, l.grid.begin());
      const uint64_t *args = fake<const uint64_t *(*)(int)>("fake_launch_args")(i);
      std::copy(args, args + 5, l.args.begin());
      out.push_back(l);
    }
    fake<void (*)()>("fake_clear_launches")();
    return out;
  }
  /// A bf16 call on cuda:1 (sm_90) of B = 2, H = 4 over H_KV = 2, d = 64, tensors on
  /// the CPU.
  void shapes(int64_t Nq, int64_t Nk, int64_t B = 2, int64_t H = 4, int64_t H_KV = 2) {
    auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16);
    q = torch::zeros({B, H, Nq, 64}, bf16);
    k = torch::zeros({B, H_KV, Nk, 64}, bf16);
    v = torch::zeros({B, H_KV, Nk, 64}, bf16);
    p = attn::detail::Problem::of(q, k, v);
    p.device = torch::Device(torch::kCUDA, 1);
    p.kv_len.assign(B, Nk);
    p.query_start.assign(B, 0);
    p.key_start.assign(B, 0);
    p.key_lengths = torch::full({B}, Nk, torch::kLong);
    p.query_starts = p.key_starts = torch::zeros({B}, torch::kLong);
  }
  std::vector<Launch> backward(const Library &lib) {
    launches();
    auto f32 = torch::TensorOptions().dtype(torch::kFloat);
    const torch::Tensor out = torch::zeros_like(q), grad_out = torch::zeros_like(q);
    const torch::Tensor row_max = torch::zeros({p.B, p.H, p.Nq}, f32);
    const torch::Tensor row_sum = torch::zeros({p.B, p.H, p.Nq}, f32);
    auto grads = attn::detail::run_backward_triton(lib, p, q, k, v, torch::empty({0}, f32), {},
                                                   out, row_max, row_sum, grad_out);
    dq_address = reinterpret_cast<uint64_t>(std::get<0>(grads).data_ptr());
    dk_address = reinterpret_cast<uint64_t>(std::get<1>(grads).data_ptr());
    return launches();
  }
  std::vector<Launch> forward(const Library &lib) {
    launches();
    attn::detail::run_forward_triton(lib, p, q, k, v, torch::empty({0}, torch::kFloat), {});
    return launches();
  }
  static std::vector<std::string> kernels(const std::vector<Launch> &ls) {
    std::vector<std::string> names;
    for (const Launch &l : ls)
      names.push_back(l.kernel);
    return names;
  }
  torch::Tensor q, k, v;
  attn::detail::Problem p;
  uint64_t dq_address = 0, dk_address = 0;
};

using Names = std::vector<std::string>;

TEST_F(TritonRowsFirst, ScanRunsDqFirstWithTileStatesAndNoPreprocess) {
  auto lib = Library::load(ATTN_FX_TRITON_SCAN);
  EXPECT_TRUE(lib->triton()->backward.rows_first);
  EXPECT_EQ(lib->triton()->backward.tile_states, (Names{"TileLogSurvival", "TileSuffix"}));
  shapes(/*Nq=*/40, /*Nk=*/50);
  RecordingAllocator allocations;
  const std::vector<Launch> ls = backward(*lib);
  ASSERT_EQ(kernels(ls), (Names{"attn_bwd_dq", "attn_bwd_dkdv"}));
  const Launch &dq = ls[0], &dkdv = ls[1];
  EXPECT_EQ(dq.grid, (std::array<unsigned, 3>{2, 8, 1}));   // cdiv(40, 32), B * H
  EXPECT_EQ(dkdv.grid, (std::array<unsigned, 3>{4, 4, 1})); // cdiv(50, 16), B * H_KV
  EXPECT_EQ(dq.args[0], dq_address);
  EXPECT_EQ(dkdv.args[0], dk_address);
  EXPECT_NE(dq.args[1], 0u);
  EXPECT_EQ(dq.args[1], dkdv.args[1]) << "dkdv reads the Delta dq wrote";
  // TileLogSurvival and TileSuffix: two buffers, the same ones for both kernels, each
  // float32 [B * H, key tiles, Nq].
  EXPECT_NE(dq.args[2], dq.args[3]);
  EXPECT_EQ(dq.args[2], dkdv.args[2]);
  EXPECT_EQ(dq.args[3], dkdv.args[3]);
  for (int state : {2, 3})
    EXPECT_EQ(allocations.bytes_at(dq.args[state]), sizeof(float) * 8 * 4 * 40) << state;
  EXPECT_EQ(dq.args[4] & 0xffffffffu, 40u);
  EXPECT_EQ(dkdv.args[4] & 0xffffffffu, 50u);
}

TEST_F(TritonRowsFirst, ScanForwardSplitsKeysForFewRows) {
  auto lib = Library::load(ATTN_FX_TRITON_SCAN);
  shapes(/*Nq=*/40, /*Nk=*/50);
  EXPECT_EQ(kernels(forward(*lib)), (Names{"attn_fwd"}));
  shapes(/*Nq=*/1, /*Nk=*/4096, /*B=*/1, /*H=*/2, /*H_KV=*/1);
  EXPECT_EQ(kernels(forward(*lib)), (Names{"attn_fwd_split", "attn_fwd_merge"}));
}

TEST_F(TritonRowsFirst, ImplicitRunsDqFirstAndNeverTheDecodeForward) {
  auto lib = Library::load(ATTN_FX_TRITON_IMPLICIT);
  EXPECT_FALSE(lib->triton()->decode.has_value());
  EXPECT_TRUE(lib->triton()->backward.rows_first);
  EXPECT_TRUE(lib->triton()->backward.tile_states.empty());
  shapes(/*Nq=*/40, /*Nk=*/50);
  const std::vector<Launch> ls = backward(*lib);
  ASSERT_EQ(kernels(ls), (Names{"attn_bwd_dq", "attn_bwd_dkdv"}));
  EXPECT_EQ(ls[0].args[1], ls[1].args[1]) << "dkdv reads the Delta dq wrote";
  EXPECT_EQ(ls[0].grid, (std::array<unsigned, 3>{2, 8, 1}));
  EXPECT_EQ(ls[1].grid, (std::array<unsigned, 3>{4, 4, 1}));
  // A decoder step that a decode forward would split: attn_fwd alone.
  shapes(/*Nq=*/1, /*Nk=*/4096, /*B=*/1, /*H=*/2, /*H_KV=*/1);
  const std::vector<Launch> fwd = forward(*lib);
  ASSERT_EQ(kernels(fwd), (Names{"attn_fwd"}));
  EXPECT_EQ(fwd[0].grid, (std::array<unsigned, 3>{1, 2, 1}));
}

TEST_F(TritonRowsFirst, WithoutThePlanThePreprocessCubinIsRequired) {
  // The implicit fixture's cubins without "backward": a backward that is not rows first
  // needs attn_bwd_preprocess, which the artifact lacks.
  const std::string msg = error_of([] { Library::load(ATTN_FX_TRITON_NO_PLAN); });
  EXPECT_NE(msg.find("manifest lists the Triton kernel (cuda.kernels) bf16 64 for sm_90 but "
                     "attn_triton_launch describes no any attn_bwd_preprocess cubin for it"),
            std::string::npos) << msg;
}

TEST_F(TritonRowsFirst, ALaunchDescriptionWithoutBackwardRunsPreprocessFirst) {
  // triton_gpu.c's launch description has no "backward": preprocess, dkdv, dq.
  auto lib = Library::load(ATTN_FX_TRITON_GPU);
  EXPECT_FALSE(lib->triton()->backward.rows_first);
  shapes(/*Nq=*/16, /*Nk=*/16, /*B=*/1, /*H=*/1, /*H_KV=*/1);
  fake<void (*)(int)>("fake_expect_args")(4); // its backward kernels take two parameters
  launches();
  auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  const torch::Tensor stats = torch::zeros({1, 1, 16}, f32);
  p.device = torch::Device(torch::kCUDA, 0); // sm_86: the sm_80 cubins
  attn::detail::run_backward_triton(*lib, p, q, k, v, torch::empty({0}, f32), {},
                                    torch::zeros_like(q), stats, stats, torch::zeros_like(q));
  EXPECT_EQ(kernels(launches()), (Names{"attn_bwd_preprocess", "attn_bwd_dkdv", "attn_bwd_dq"}));
}

} // namespace
