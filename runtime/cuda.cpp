//===- cuda.cpp - loading GPU images and launching kernels via the driver -===//
//
// No attention math here: the kernels are the compiler's (the Triton cubins the
// artifact's attn_triton_launch describes); this file only finds the driver, loads the
// right cubin per device and launches on PyTorch's current stream.
//
//===----------------------------------------------------------------------===//
#include "cuda_driver.h"
#include "internal.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include <map>
#include <mutex>
#include <tuple>
#include <utility>

namespace attn {
namespace detail {

namespace {

std::string dl_error() {
  const char *e = dlerror();
  return e ? e : "(no error message)";
}

template <class Fn> void resolve(void *handle, const char *name, Fn &fn) {
  dlerror();
  void *sym = dlsym(handle, name);
  TORCH_CHECK(sym, "attn: the CUDA driver libcuda.so.1 has no symbol ", name,
              " (driver too old?): ", dl_error());
  fn = reinterpret_cast<Fn>(sym);
}

struct DriverState {
  CudaDriver driver{};
  std::string error; // nonempty: loading failed, reported on every use
};

DriverState load_driver() {
  DriverState s;
  try {
    dlerror();
    void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    TORCH_CHECK(handle, "attn: no CUDA driver found: dlopen(\"libcuda.so.1\") failed: ",
                dl_error(), "; CUDA tensors need the NVIDIA driver installed");
    CudaDriver &d = s.driver;
    resolve(handle, cu::kSymInit, d.init);
    resolve(handle, cu::kSymDeviceGet, d.device_get);
    resolve(handle, cu::kSymDeviceGetAttribute, d.device_get_attribute);
    resolve(handle, cu::kSymDevicePrimaryCtxRetain, d.primary_ctx_retain);
    resolve(handle, cu::kSymCtxPushCurrent, d.ctx_push_current);
    resolve(handle, cu::kSymCtxPopCurrent, d.ctx_pop_current);
    resolve(handle, cu::kSymModuleLoadDataEx, d.module_load_data_ex);
    resolve(handle, cu::kSymModuleGetFunction, d.module_get_function);
    resolve(handle, cu::kSymFuncSetAttribute, d.func_set_attribute);
    resolve(handle, cu::kSymLaunchKernel, d.launch_kernel);
    resolve(handle, cu::kSymGetErrorString, d.get_error_string);
    resolve(handle, cu::kSymGetErrorName, d.get_error_name);
    cu::Result r = d.init(0);
    TORCH_CHECK(r == cu::kSuccess, "attn: cuInit failed: ", d.describe(r));
  } catch (const c10::Error &e) {
    s.error = e.what_without_backtrace();
  }
  return s;
}

void check(cu::Result r, const char *what) {
  if (r != cu::kSuccess)
    TORCH_CHECK(false, "attn: ", what, " failed: ", CudaDriver::get().describe(r));
}

/// PyTorch's current stream for a device, through the stable C shim of libtorch_cuda
/// (no c10/cuda headers: the runtime builds against CPU-only LibTorch too).
cu::Stream current_stream(int device_index) {
  using Fn = int32_t (*)(int32_t, void **);
  static Fn fn = [] {
    void *sym = nullptr;
    // libtorch_cuda is a dependency of an already loaded library, maybe in a local
    // scope (Python loads torch._C with RTLD_LOCAL): look it up by name first.
    if (void *h = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD))
      sym = dlsym(h, cu::kSymTorchCurrentStream);
    if (!sym)
      sym = dlsym(RTLD_DEFAULT, cu::kSymTorchCurrentStream);
    return reinterpret_cast<Fn>(sym);
  }();
  TORCH_CHECK(fn, "attn: cannot find PyTorch's current CUDA stream: symbol ",
              cu::kSymTorchCurrentStream, " not found in libtorch_cuda.so; launching attn GPU "
              "kernels needs a CUDA-enabled PyTorch >= 2.3");
  void *stream = nullptr;
  TORCH_CHECK(fn(device_index, &stream) == 0, "attn: ", cu::kSymTorchCurrentStream, "(",
              device_index, ") failed");
  return static_cast<cu::Stream>(stream);
}

/// Makes a context current for a scope (the device's primary context: the one the
/// CUDA runtime, and so PyTorch, uses).
class ContextScope {
public:
  explicit ContextScope(cu::Context ctx) {
    check(CudaDriver::get().ctx_push_current(ctx), "cuCtxPushCurrent");
  }
  ~ContextScope() {
    cu::Context popped = nullptr;
    CudaDriver::get().ctx_pop_current(&popped);
  }
  ContextScope(const ContextScope &) = delete;
  ContextScope &operator=(const ContextScope &) = delete;
};

struct DeviceInfo {
  cu::Context context = nullptr;
  int major = 0, minor = 0;
  int max_shared_optin = 0;
};

std::string sm_of(const DeviceInfo &info) {
  return "sm_" + std::to_string(info.major) + std::to_string(info.minor);
}

struct LoadedModule {
  cu::Module module = nullptr;
  std::string image; // which cubin was loaded, for messages
  std::map<std::string, cu::Function> functions;
};

std::mutex &cuda_mutex() {
  static std::mutex m;
  return m;
}

// Never released: modules and retained contexts live as long as the artifacts (the
// process), and unloading them during static destruction could run after the driver
// shut down.
const DeviceInfo &device_info(int ordinal) {
  static auto *infos = new std::map<int, DeviceInfo>();
  auto it = infos->find(ordinal);
  if (it != infos->end())
    return it->second;
  const CudaDriver &d = CudaDriver::get();
  cu::Device dev = 0;
  check(d.device_get(&dev, ordinal), "cuDeviceGet");
  DeviceInfo info;
  check(d.device_get_attribute(&info.major, cu::kAttrComputeCapabilityMajor, dev),
        "cuDeviceGetAttribute(compute capability major)");
  check(d.device_get_attribute(&info.minor, cu::kAttrComputeCapabilityMinor, dev),
        "cuDeviceGetAttribute(compute capability minor)");
  check(d.device_get_attribute(&info.max_shared_optin, cu::kAttrMaxSharedMemoryPerBlockOptin,
                               dev),
        "cuDeviceGetAttribute(max shared memory per block, opt-in)");
  check(d.primary_ctx_retain(&info.context, dev), "cuDevicePrimaryCtxRetain");
  return infos->emplace(ordinal, info).first->second;
}

/// The module of the image `data` (called `image_name` in messages; `key` names it
/// within the artifact) on a device, loaded at first use (the context must be current).
LoadedModule &load_module(const Library &lib, int ordinal, const DeviceInfo &info,
                          const std::string &key, const void *data,
                          const std::string &image_name) {
  static auto *modules = new std::map<std::tuple<std::string, int, std::string>, LoadedModule>();
  auto cache_key = std::make_tuple(lib.path(), ordinal, key);
  auto it = modules->find(cache_key);
  if (it != modules->end())
    return it->second;
  const CudaDriver &d = CudaDriver::get();
  std::vector<char> log(8192, '\0');
  int options[] = {cu::kJitErrorLogBuffer, cu::kJitErrorLogBufferSizeBytes};
  void *values[] = {log.data(), reinterpret_cast<void *>(static_cast<uintptr_t>(log.size()))};
  LoadedModule m;
  m.image = image_name;
  cu::Result r = d.module_load_data_ex(&m.module, data, 2, options, values);
  TORCH_CHECK(r == cu::kSuccess, "attn: loading the ", image_name, " image of artifact ",
              lib.path(), " on cuda:", ordinal, " (", sm_of(info), ") failed: ", d.describe(r),
              log[0] ? "; JIT log: " : "", log.data());
  return modules->emplace(cache_key, std::move(m)).first->second;
}

/// `name` in the loaded module `m`, with `smem_bytes` of dynamic shared memory opted
/// in where it is above the default limit. `what` names the kernel in messages.
cu::Function function_for(const Library &lib, LoadedModule &m, const std::string &name,
                          int64_t smem_bytes, const DeviceInfo &info, const std::string &what) {
  auto it = m.functions.find(name);
  if (it != m.functions.end())
    return it->second;
  const CudaDriver &d = CudaDriver::get();
  cu::Function fn = nullptr;
  cu::Result r = d.module_get_function(&fn, m.module, name.c_str());
  TORCH_CHECK(r == cu::kSuccess, "attn: artifact ", lib.path(), ": kernel ", what,
              " not found in its ", m.image, " image: ", d.describe(r));
  if (smem_bytes > cu::kDefaultDynamicSharedLimit) {
    TORCH_CHECK(smem_bytes <= info.max_shared_optin, "attn: kernel ", name, " of artifact ",
                lib.path(), " needs ", smem_bytes,
                " bytes of dynamic shared memory, the device allows at most ",
                info.max_shared_optin, " per block");
    check(d.func_set_attribute(fn, cu::kFuncAttrMaxDynamicSharedSizeBytes,
                               static_cast<int>(smem_bytes)),
          "cuFuncSetAttribute(max dynamic shared memory)");
  }
  m.functions.emplace(name, fn);
  return fn;
}

/// What one launch is, for messages: "<name> (<details>, grid XxYxZ, T threads, S bytes
/// shared) of artifact A on cuda:N".
struct LaunchDescription {
  std::string name, details;
};

/// Launches `fn` over `grid` on PyTorch's current stream of the device; `params` point
/// at the arguments.
void launch_on_stream(const Library &lib, int ordinal, cu::Context context, cu::Function fn,
                      std::array<int64_t, 3> grid, int64_t threads,
                      int64_t smem_bytes, std::vector<void *> &params,
                      const LaunchDescription &what) {
  const CudaDriver &d = CudaDriver::get();
  cu::Stream stream = current_stream(ordinal);
  ContextScope scope(context);
  cu::Result r = d.launch_kernel(fn, static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
                                 static_cast<unsigned>(grid[2]), static_cast<unsigned>(threads), 1,
                                 1, static_cast<unsigned>(smem_bytes), stream, params.data(),
                                 nullptr);
  TORCH_CHECK(r == cu::kSuccess, "attn: launching GPU kernel ", what.name, " (", what.details,
              ", grid ", grid[0], "x", grid[1], "x", grid[2], ", ", threads, " threads, ",
              smem_bytes, " bytes shared) of artifact ", lib.path(), " on cuda:", ordinal,
              " failed: ", d.describe(r));
}

/// Whether `grid` is empty (nothing to launch); refuses one beyond CUDA's limits.
bool empty_grid(std::array<int64_t, 3> grid, const char *const dims[3], const std::string &name) {
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
    return true; // an empty batch or head dimension: nothing to compute
  const int64_t limits[3] = {(int64_t{1} << 31) - 1, 65535, 65535};
  for (int i = 0; i < 3; ++i)
    TORCH_CHECK(grid[i] <= limits[i], "attn: GPU kernel ", name, ": ", dims[i], " = ", grid[i],
                " exceeds the CUDA grid limit ", limits[i]);
  return false;
}

} // namespace

const CudaDriver &CudaDriver::get() {
  static const DriverState state = load_driver();
  TORCH_CHECK(state.error.empty(), state.error);
  return state.driver;
}

std::string CudaDriver::describe(cu::Result r) const {
  const char *name = nullptr, *text = nullptr;
  get_error_name(r, &name);
  get_error_string(r, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(r)) + ": " +
         (text ? text : "(no description)");
}

namespace {

/// "sm_80 bf16 d64, sm_90 bf16 d64": the (chip, dtype, head dim) of the artifact's Triton
/// cubins of `kernel`.
std::string triton_cubins(const TritonLaunch &launch, TritonKernel kernel) {
  std::vector<std::string> seen;
  for (const TritonImage &image : launch.images) {
    std::string entry = image.chip + " " + image.dtype + " d" + std::to_string(image.head_dim);
    if (image.kernel == kernel && std::find(seen.begin(), seen.end(), entry) == seen.end())
      seen.push_back(entry);
  }
  return seen.empty() ? "none" : join(seen, ", ");
}

const TritonImage &select_triton_image(const Library &lib, const DeviceInfo &info, int ordinal,
                                       TritonKernel kernel, torch::ScalarType dtype,
                                       int64_t head_dim, bool causal) {
  const TritonLaunch &launch = *lib.triton();
  const std::string chip = choose_cuda_image(lib.manifest().cuda_targets, info.major, info.minor);
  TORCH_CHECK(!chip.empty(), "attn: artifact ", lib.path(), " has no GPU code for device cuda:",
              ordinal, " (", sm_of(info), ", compute capability ", info.major, ".", info.minor,
              "): its cubins are for ", join(lib.manifest().cuda_targets),
              "; recompile with attn-compile --cuda-targets=", sm_of(info),
              " (or, from Python with Triton installed, the embedded Triton source is "
              "compiled for it on first use)");
  const char *tag = cuda_dtype_tag(dtype);
  const std::string variant = triton_variant(kernel, causal);
  for (const TritonImage &image : launch.images)
    if (image.chip == chip && tag && image.dtype == tag && image.head_dim == head_dim &&
        image.kernel == kernel && image.variant == variant)
      return image;
  TORCH_CHECK(false, "attn: artifact ", lib.path(), " has no Triton cubin of ", triton_kernel_name(kernel), " (",
              variant, ") for device cuda:", ordinal, " (", sm_of(info), "), ",
              tag ? tag : c10::toString(dtype), " and head dim ", head_dim,
              "; its cubins are for ", triton_cubins(launch, kernel),
              "; recompile with attn-compile --cuda-targets=", sm_of(info),
              " --cuda-dtypes=", tag ? tag : "bf16", " --cuda-head-dims=", head_dim);
}

/// The arguments of `image` in launch order, each in an 8-byte slot whose low bytes
/// hold the parameter's value (pointers and i64 8 bytes, i32 and fp32 4: cuLaunchKernel
/// reads as many bytes as the kernel's parameter has).
std::vector<uint64_t> triton_slots(const Library &lib, const TritonImage &image,
                                   const TritonArgs &args) {
  std::vector<uint64_t> slots;
  for (const auto &[name, type] : image.parameters) {
    auto it = args.find(name);
    TORCH_CHECK(it != args.end(), "attn: artifact ", lib.path(), ": Triton kernel ",
                triton_kernel_name(image.kernel), " (", image.symbol, ") takes a parameter ", name, " (", type,
                ") that this runtime does not provide; recompile the artifact with the "
                "attn-compile of this runtime");
    const TritonArg &arg = it->second;
    uint64_t slot = 0;
    const bool pointer = !type.empty() && type[0] == '*';
    if (pointer && arg.kind == TritonArg::Pointer &&
        (arg.integer_pointer.empty() || arg.integer_pointer == type)) {
      slot = arg.pointer;
    } else if (type == "i32" && arg.kind == TritonArg::Int) {
      TORCH_CHECK(arg.integer >= INT32_MIN && arg.integer <= INT32_MAX, "attn: Triton kernel ",
                  triton_kernel_name(image.kernel), ": argument ", name, " = ", arg.integer,
                  " does not fit its type i32 (a tensor too large for these kernels)");
      const int32_t value = static_cast<int32_t>(arg.integer);
      std::memcpy(&slot, &value, sizeof value);
    } else if (type == "i64" && arg.kind == TritonArg::Int) {
      std::memcpy(&slot, &arg.integer, sizeof arg.integer);
    } else if (type == "fp32" && arg.kind == TritonArg::Float) {
      const float value = static_cast<float>(arg.real);
      std::memcpy(&slot, &value, sizeof value);
    } else {
      const std::string passed = arg.kind == TritonArg::Pointer
                                     ? (arg.integer_pointer.empty() ? "a pointer" : arg.integer_pointer)
                                 : arg.kind == TritonArg::Int ? "an integer"
                                                              : "an fp32";
      TORCH_CHECK(false, "attn: artifact ", lib.path(), ": Triton kernel ",
                  triton_kernel_name(image.kernel), " declares parameter ", name, " as ", type,
                  ", which this runtime passes as ", passed,
                  "; recompile the artifact with the attn-compile of this runtime");
    }
    slots.push_back(slot);
  }
  return slots;
}

} // namespace

std::array<int64_t, 3> triton_grid(const Library &lib, const TritonImage &image,
                                   const TritonSizes &s) {
  auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  if (image.grid == "(cdiv(NQ, BLOCK_M), B * H)")
    return {cdiv(s.NQ, image.block_m), s.B * s.H, 1};
  if (image.grid == "(cdiv(NK, BLOCK_N), B * H_KV)")
    return {cdiv(s.NK, image.block_n), s.B * s.H_KV, 1};
  if (image.grid == "(cdiv(H / H_KV * NQ, BLOCK_M), B * H_KV, SPLITS)")
    return {cdiv(s.H / s.H_KV * s.NQ, image.block_m), s.B * s.H_KV, s.SPLITS};
  TORCH_CHECK(false, "attn: artifact ", lib.path(), ": Triton kernel ",
              triton_kernel_name(image.kernel), " has the grid rule '", image.grid, "', which this runtime does not compute (it knows (cdiv(NQ, BLOCK_M), B * H), "
              "(cdiv(NK, BLOCK_N), B * H_KV) and (cdiv(H / H_KV * NQ, BLOCK_M), B * H_KV, SPLITS)); recompile the artifact with the attn-compile "
              "of this runtime");
}

int64_t triton_sm_count(int ordinal) {
  std::lock_guard<std::mutex> lock(cuda_mutex());
  const CudaDriver &d = CudaDriver::get();
  cu::Device dev = 0;
  check(d.device_get(&dev, ordinal), "cuDeviceGet");
  int count = 0;
  check(d.device_get_attribute(&count, cu::kAttrMultiprocessorCount, dev),
        "cuDeviceGetAttribute(multiprocessor count)");
  return count;
}

const TritonImage &triton_image(const Library &lib, const torch::Device &device,
                                TritonKernel kernel, torch::ScalarType dtype,
                                int64_t head_dim, bool causal) {
  TORCH_CHECK(device.is_cuda() && device.has_index() && lib.triton(),
              "attn: internal error: Triton cubin for ", device);
  std::lock_guard<std::mutex> lock(cuda_mutex());
  return select_triton_image(lib, device_info(device.index()), device.index(), kernel, dtype,
                             head_dim, causal);
}

void triton_launch(const Library &lib, const torch::Device &device, TritonKernel kernel,
                   torch::ScalarType dtype, int64_t head_dim, bool causal,
                   const TritonSizes &sizes, const TritonArgs &args) {
  TORCH_CHECK(device.is_cuda() && device.has_index() && lib.triton(),
              "attn: internal error: Triton launch on ", device);
  const int ordinal = device.index();
  const TritonImage *image = nullptr;
  cu::Function fn = nullptr;
  cu::Context context = nullptr;
  {
    std::lock_guard<std::mutex> lock(cuda_mutex());
    const DeviceInfo &info = device_info(ordinal);
    image = &select_triton_image(lib, info, ordinal, kernel, dtype, head_dim, causal);
    context = info.context;
    ContextScope scope(context);
    LoadedModule &m = load_module(lib, ordinal, info, image->symbol, image->data,
                                  image->chip + " cubin " + image->symbol);
    fn = function_for(lib, m, image->function, image->shared_bytes, info,
                      image->function + " (" + image->symbol + ")");
  }
  const std::array<int64_t, 3> grid = triton_grid(lib, *image, sizes);
  static const char *const dims[3] = {"row or key tiles", "batch x heads", "z"};
  if (empty_grid(grid, dims, image->symbol))
    return;
  std::vector<uint64_t> slots = triton_slots(lib, *image, args);
  // Triton's scratch: one buffer of size · programs per launch where the cubin uses it,
  // kept alive until the launch is queued (the caching allocator orders reuse by stream).
  const int64_t programs = grid[0] * grid[1] * grid[2];
  std::vector<torch::Tensor> scratch;
  for (auto [size, align] : {std::pair(image->global_scratch_size, image->global_scratch_align),
                             std::pair(image->profile_scratch_size, int64_t{1})}) {
    uint64_t address = 0;
    if (size > 0) {
      scratch.push_back(torch::empty({programs * size + align},
                                     torch::TensorOptions().dtype(torch::kByte).device(device)));
      address = ptr_arg(scratch.back());
      address = (address + align - 1) / align * align;
    }
    slots.push_back(address);
  }
  std::vector<void *> params(slots.size());
  for (size_t i = 0; i < slots.size(); ++i)
    params[i] = &slots[i];
  launch_on_stream(lib, ordinal, context, fn, grid, image->num_warps * 32, image->shared_bytes,
                   params,
                   {image->function, image->symbol + " " + triton_kernel_name(image->kernel) + " " + image->dtype +
                                         " d=" + std::to_string(image->head_dim)});
}

} // namespace detail
} // namespace attn
