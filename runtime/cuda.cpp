//===- cuda.cpp - loading GPU images and launching kernels via the driver -===//
//
// No attention math here: the kernels are the compiler's (the cuda-kernel lines of
// the manifest); this file only finds the driver, loads the right image per device
// and launches on PyTorch's current stream.
//
//===----------------------------------------------------------------------===//
#include "cuda_driver.h"
#include "internal.h"

#include <dlfcn.h>

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

struct LoadedModule {
  cu::Module module = nullptr;
  std::string image; // which image was loaded ("sm_90", "ptx")
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

std::string join(const std::vector<std::string> &items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? " " : "") + items[i];
  return out;
}

/// The artifact's module on a device (the context must be current).
LoadedModule &module_for(const Library &lib, int ordinal, const DeviceInfo &info) {
  static auto *modules = new std::map<std::pair<std::string, int>, LoadedModule>();
  auto key = std::make_pair(lib.path(), ordinal);
  auto it = modules->find(key);
  if (it != modules->end())
    return it->second;

  const std::string sm = "sm_" + std::to_string(info.major) + std::to_string(info.minor);
  const std::string chosen = choose_cuda_image(lib.manifest().cuda_targets,
                                               lib.cuda_ptx().data != nullptr, info.major,
                                               info.minor);
  TORCH_CHECK(!chosen.empty(), "attn: artifact ", lib.path(), " has no GPU code for device cuda:",
              ordinal, " (", sm, ", compute capability ", info.major, ".", info.minor,
              "): it has cubins for ", join(lib.manifest().cuda_targets),
              " and no PTX; recompile with attn-compile --cuda-targets=", sm);
  const Library::CudaImage *image = &lib.cuda_ptx();
  for (const auto &c : lib.cuda_cubins())
    if (c.target == chosen)
      image = &c;

  const CudaDriver &d = CudaDriver::get();
  std::vector<char> log(8192, '\0');
  int options[] = {cu::kJitErrorLogBuffer, cu::kJitErrorLogBufferSizeBytes};
  void *values[] = {log.data(), reinterpret_cast<void *>(static_cast<uintptr_t>(log.size()))};
  LoadedModule m;
  m.image = chosen;
  cu::Result r = d.module_load_data_ex(&m.module, image->data, 2, options, values);
  TORCH_CHECK(r == cu::kSuccess, "attn: loading the ", chosen == "ptx" ? "PTX" : chosen,
              " image of artifact ", lib.path(), " on cuda:", ordinal, " (", sm,
              ") failed: ", d.describe(r), log[0] ? "; JIT log: " : "", log.data());
  return modules->emplace(key, std::move(m)).first->second;
}

cu::Function function_for(const Library &lib, LoadedModule &m, const CudaKernel &k,
                          const DeviceInfo &info) {
  auto it = m.functions.find(k.symbol);
  if (it != m.functions.end())
    return it->second;
  const CudaDriver &d = CudaDriver::get();
  cu::Function fn = nullptr;
  cu::Result r = d.module_get_function(&fn, m.module, k.symbol.c_str());
  TORCH_CHECK(r == cu::kSuccess, "attn: artifact ", lib.path(), ": kernel ", k.symbol,
              " (cuda-kernel ", k.role, " ", k.dtype, " ", k.head_dim, ") not found in its ",
              m.image, " image: ", d.describe(r));
  if (k.smem_bytes > cu::kDefaultDynamicSharedLimit) {
    TORCH_CHECK(k.smem_bytes <= info.max_shared_optin, "attn: kernel ", k.symbol,
                " of artifact ", lib.path(), " needs ", k.smem_bytes,
                " bytes of dynamic shared memory, the device allows at most ",
                info.max_shared_optin, " per block");
    check(d.func_set_attribute(fn, cu::kFuncAttrMaxDynamicSharedSizeBytes,
                               static_cast<int>(k.smem_bytes)),
          "cuFuncSetAttribute(max dynamic shared memory)");
  }
  m.functions.emplace(k.symbol, fn);
  return fn;
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

void cuda_launch(const Library &lib, const CudaKernel &k, const torch::Device &device,
                 std::array<int64_t, 3> grid, std::vector<KernelArg> args) {
  TORCH_CHECK(device.is_cuda() && device.has_index(), "attn: internal error: launch on ",
              device);
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
    return; // an empty batch or head dimension: nothing to compute
  const int64_t limits[3] = {(int64_t{1} << 31) - 1, 65535, 65535};
  const char *dims[3] = {"row tiles", "heads (H)", "batch (B)"};
  for (int i = 0; i < 3; ++i)
    TORCH_CHECK(grid[i] <= limits[i], "attn: GPU kernel ", k.symbol, ": ", dims[i], " = ",
                grid[i], " exceeds the CUDA grid limit ", limits[i]);

  const int ordinal = device.index();
  const CudaDriver &d = CudaDriver::get();
  cu::Function fn = nullptr;
  cu::Context context = nullptr;
  {
    std::lock_guard<std::mutex> lock(cuda_mutex());
    const DeviceInfo &info = device_info(ordinal);
    context = info.context;
    ContextScope scope(context);
    fn = function_for(lib, module_for(lib, ordinal, info), k, info);
  }
  cu::Stream stream = current_stream(ordinal);
  std::vector<void *> params(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    params[i] = &args[i];
  ContextScope scope(context);
  cu::Result r = d.launch_kernel(fn, static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
                                 static_cast<unsigned>(grid[2]), static_cast<unsigned>(k.threads),
                                 1, 1, static_cast<unsigned>(k.smem_bytes), stream,
                                 params.data(), nullptr);
  TORCH_CHECK(r == cu::kSuccess, "attn: launching GPU kernel ", k.symbol, " (", k.role, " ",
              k.dtype, " d=", k.head_dim, ", grid ", grid[0], "x", grid[1], "x", grid[2],
              ", ", k.threads, " threads, ", k.smem_bytes, " bytes shared) of artifact ",
              lib.path(), " on cuda:", ordinal, " failed: ", d.describe(r));
}

} // namespace detail
} // namespace attn
