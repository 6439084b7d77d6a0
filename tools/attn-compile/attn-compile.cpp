//===- attn-compile.cpp - one-shot driver: attn IR -> artifact .so --------===//
//
//   attn-compile tanhmax.mlir -o tanhmax.so [--kernel=name] [--dtypes=f32,f64]
//                [--cpu=native|<llvm cpu name>] [--emit=so|obj|llvm|mlir|manifest|triton]
//                [--jobs=N]
//                [--attn-mask=bool|additive|learnable-additive]
//                [--cuda-targets=sm_80,sm_90 [--cuda-dtypes=f16,bf16,f32]
//                 [--cuda-head-dims=32,64,128] [--triton-python=PYTHON]]
//
// With --attn-mask, attn-add-mask-input first gives the kernel torch's attn_mask as
// the tensor input @attn_mask. Then runs the registered attn pipeline (attn-cpu-pipeline, or attn-cuda-pipeline
// when CUDA targets are requested: the same plus the GPU schedule; passes/Passes.h), the upstream lowering to
// the LLVM dialect (attn-host-to-llvm), LLVM's O3 pipeline for the target CPU,
// emits object files and links them into a shared object with `cc`. The entry
// points share no code, so for a shared object the LLVM module is split into
// groups of definitions that share no internal symbol, each optimised and compiled
// on one of --jobs threads in its own LLVMContext, largest first. The GPU
// kernels are the emitted Triton module's (lib/Codegen/Triton), compiled ahead of
// time per entry of the kernel's gpu_schedule by `python -m attn.triton_aot` and
// embedded in the same object as the globals of the CUDA ABI
// (runtime/include/attn/abi.h).
//
//===----------------------------------------------------------------------===//
#include "dialect/AttnDialect.h"
#include "passes/Passes.h"

#include "lib/Analysis/KernelSignature.h"
#include "lib/Analysis/Schedules.h"
#include "lib/Codegen/Manifest.h"
#include "lib/Codegen/Triton/TritonEmitter.h"
#include "passes/PassOptions.h"
#include "runtime/include/attn/abi.h"
#include "tools/ParserGuards.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

using namespace mlir;

namespace cl = llvm::cl;

static cl::opt<std::string> inputFilename(cl::Positional, cl::desc("<input .mlir>"),
                                          cl::Required);
static cl::opt<std::string> outputFilename("o", cl::desc("Output artifact"),
                                           cl::value_desc("file"), cl::Required);
static cl::opt<std::string> kernelName("kernel", cl::desc("attn.kernel to compile when the "
                                                          "file holds several"),
                                       cl::init(""));
static cl::opt<std::string> dtypes("dtypes", cl::desc("Element types to instantiate"),
                                   cl::init("f32,f64"));
static cl::opt<std::string> cpu("cpu", cl::desc("Target CPU (LLVM name) or 'native'"),
                                cl::init("native"));
enum class Emit { SharedObject, Object, LLVMIR, MLIR, Manifest, Triton };
static cl::opt<Emit> emit(
    "emit", cl::desc("What to write"), cl::init(Emit::SharedObject),
    cl::values(clEnumValN(Emit::SharedObject, "so", "linked shared object (default)"),
               clEnumValN(Emit::Object, "obj", "object file"),
               clEnumValN(Emit::LLVMIR, "llvm", "optimised LLVM IR"),
               clEnumValN(Emit::MLIR, "mlir", "MLIR after the attn passes (loops)"),
               clEnumValN(Emit::Manifest, "manifest",
                          "the artifact's manifest text (runtime/include/attn/abi.h)"),
               clEnumValN(Emit::Triton, "triton",
                          "the kernel as a Python module of Triton kernels (the GPU backend)")));
static cl::opt<unsigned> jobs(
    "jobs",
    cl::desc("Threads that optimise and compile a shared object's entry points (--emit=so); "
             "0 (default): one per core"),
    cl::init(0));
enum class MaskInput { None, Bool, Additive, LearnableAdditive };
static cl::opt<MaskInput> attnMask(
    "attn-mask",
    cl::desc("Give the kernel torch's attn_mask as the tensor input @attn_mask [B, H, Nq, Nk] "
             "(attn-add-mask-input)"),
    cl::init(MaskInput::None),
    cl::values(clEnumValN(MaskInput::Bool, "bool", "i8 keep table, and-ed into the mask"),
               clEnumValN(MaskInput::Additive, "additive", "score bias in the kernel's float type"),
               clEnumValN(MaskInput::LearnableAdditive, "learnable-additive",
                          "a score bias that gets a gradient")));
static cl::list<std::string> cudaTargets(
    "cuda-targets", cl::desc("CUDA chips to build the Triton kernels for (sm_80,sm_90,...); "
                             "default none: a CPU-only artifact (--emit=triton: sm_80,sm_90)"),
    cl::CommaSeparated);
static cl::opt<std::string> cudaDtypes(
    "cuda-dtypes", cl::desc("Storage types of the GPU kernels (f16,bf16,f32); default bf16"),
    cl::init(""));
/// Every head dim the GPU kernels support, as --cuda-head-dims spells it.
static std::string allGpuHeadDims() {
  return llvm::join(llvm::map_range(attn::kGpuHeadDims,
                                    [](int64_t dim) { return std::to_string(dim); }),
                    ",");
}
// Each (dtype, head dim) is a set of cubins per target, about 10 s of Triton each: the
// Python package builds the one a CUDA call needs on first use.
static cl::opt<std::string> cudaHeadDims(
    "cuda-head-dims", cl::desc("Head dims of the GPU kernels (16,32,64,96,128,256); default 64"),
    cl::init(""));
static cl::opt<std::string> tritonPython(
    "triton-python",
    cl::desc("The Python (with torch and Triton) that runs attn.triton_aot; default "
             "$ATTN_PYTHON, else python3 on PATH"),
    cl::init(""));
/// --cuda-dtypes as a list (empty when not given: attn-select-gpu-schedule's default).
static SmallVector<std::string> cudaDtypeList() {
  SmallVector<std::string> types;
  if (cudaDtypes.getNumOccurrences())
    for (StringRef type : llvm::split(cudaDtypes, ','))
      types.push_back(type.trim().str());
  return types;
}

/// The attn pipeline of this invocation (attn-cpu-pipeline or attn-cuda-pipeline).
static void buildAttnPipeline(OpPassManager &pm, int64_t vectorBits,
                              ArrayRef<int64_t> headDims) {
  SmallVector<std::string> types;
  for (StringRef type : llvm::split(dtypes, ','))
    types.push_back(type.str());
  if (cudaTargets.empty()) {
    attn::CpuPipelineOptions options;
    options.kernel = kernelName;
    options.elementTypes = types;
    options.vectorBits = vectorBits;
    attn::buildCpuPipeline(pm, options);
    return;
  }
  attn::CudaPipelineOptions options;
  options.kernel = kernelName;
  options.elementTypes = types;
  options.vectorBits = vectorBits;
  options.gpuElementTypes = cudaDtypeList();
  options.headDims = SmallVector<int64_t>(headDims);
  options.targets = SmallVector<std::string>(cudaTargets.begin(), cudaTargets.end());
  attn::buildCudaPipeline(pm, options);
}

/// Sets the Triton pipeline's options: the kernel and what its GPU schedule covers.
static void setTritonOptions(attn::TritonPipelineOptions &options, ArrayRef<int64_t> headDims) {
  options.kernel = kernelName;
  options.targets = SmallVector<std::string>(cudaTargets.begin(), cudaTargets.end());
  options.gpuElementTypes = cudaDtypeList();
  options.headDims = SmallVector<int64_t>(headDims);
}

/// Runs the passes `build` adds to a pass manager on `module`.
static LogicalResult runPipeline(ModuleOp module, function_ref<void(OpPassManager &)> build) {
  PassManager pm(module.getContext());
  build(pm);
  return pm.run(module);
}

/// The Triton kernels of an artifact (--cuda-targets): the emitted module, the
/// launch description attn.triton_aot wrote (launch.json) and its cubins by symbol.
struct TritonImages {
  std::string source, launch;
  SmallVector<std::pair<std::string, std::string>> cubins; // (symbol, bytes)
};

/// Emits the Triton module of the kernel and compiles every entry of its SCHEDULES
/// (the kernel's gpu_schedule for --cuda-targets) with `python -m attn.triton_aot`
/// (the attn package of this source tree first on its path).
static FailureOr<TritonImages> compileTritonImages(ModuleOp module,
                                                   const attn::TritonPipelineOptions &options) {
  OwningOpRef<ModuleOp> copy = module.clone();
  if (failed(runPipeline(*copy, [&](OpPassManager &pm) {
        attn::buildTritonAnalysisPipeline(pm, options);
      })))
    return failure();
  FailureOr<attn::KernelOp> kernel = attn::selectKernel(*copy, kernelName);
  TritonImages images;
  llvm::raw_string_ostream source(images.source);
  if (failed(kernel) || failed(attn::emitTritonModule(*kernel, source)))
    return failure();
  SmallString<128> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("attn-triton", dir)) {
    llvm::WithColor::error(llvm::errs(), "attn-compile") << "cannot create a temporary directory: " << ec.message() << "\n";
    return failure();
  }
  auto cleanup = llvm::make_scope_exit([&] { llvm::sys::fs::remove_directories(dir); });
  SmallString<128> modulePath(dir);
  llvm::sys::path::append(modulePath, "kernel.py");
  {
    std::error_code ec;
    llvm::raw_fd_ostream file(modulePath, ec);
    if (ec) {
      llvm::WithColor::error(llvm::errs(), "attn-compile") << "cannot write " << modulePath << ": " << ec.message() << "\n";
      return failure();
    }
    file << images.source;
  }
  std::string python = tritonPython;
  if (python.empty())
    if (const char *fromEnv = std::getenv("ATTN_PYTHON"))
      python = fromEnv;
  if (python.empty()) {
    llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName("python3");
    if (!found) {
      llvm::WithColor::error(llvm::errs(), "attn-compile") << "--cuda-targets needs a Python with torch and Triton: "
                      "none on PATH; give --triton-python or ATTN_PYTHON\n";
      return failure();
    }
    python = *found;
  }
  std::vector<std::string> environment;
  std::string pythonPath = ATTN_PYTHON_PACKAGE_DIR;
  if (const char *existing = std::getenv("PYTHONPATH"))
    pythonPath += std::string(":") + existing;
  environment.push_back("PYTHONPATH=" + pythonPath);
  for (char **entry = environ; *entry; ++entry)
    if (!StringRef(*entry).starts_with("PYTHONPATH="))
      environment.push_back(*entry);
  SmallVector<StringRef> args{python, "-m", "attn.triton_aot", modulePath, "--out", dir};
  SmallVector<StringRef> env(environment.begin(), environment.end());
  std::string error;
  int status = llvm::sys::ExecuteAndWait(python, args, ArrayRef<StringRef>(env), {}, 0, 0, &error);
  if (status != 0) {
    llvm::WithColor::error(llvm::errs(), "attn-compile") << "" << python << " -m attn.triton_aot failed"
                 << (error.empty() ? "" : ": " + error) << " (exit status " << status << ")\n";
    return failure();
  }
  auto read = [&](StringRef name) -> FailureOr<std::string> {
    SmallString<128> path(dir);
    llvm::sys::path::append(path, name);
    auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
    if (!buffer) {
      llvm::WithColor::error(llvm::errs(), "attn-compile") << "attn.triton_aot wrote no " << path << "\n";
      return failure();
    }
    return (*buffer)->getBuffer().str();
  };
  FailureOr<std::string> launch = read("launch.json"), list = read("images.txt");
  if (failed(launch) || failed(list))
    return failure();
  images.launch = *launch;
  for (StringRef entry : llvm::split(StringRef(*list).trim(), '\n')) {
    auto [symbol, file] = entry.split('\t');
    FailureOr<std::string> cubin = read(file);
    if (failed(cubin))
      return failure();
    images.cubins.push_back({symbol.str(), *cubin});
  }
  return images;
}

/// Adds `name` (a constant i8 array holding `bytes`, plus a NUL when
/// `nulTerminated`) and `name`_size (its size in bytes, an i64) to `module`,
/// both exported.
static void embedImage(llvm::Module &module, StringRef name, StringRef bytes,
                       bool nulTerminated) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Constant *data = llvm::ConstantDataArray::getString(ctx, bytes, nulTerminated);
  auto *image = new llvm::GlobalVariable(module, data->getType(), /*isConstant=*/true,
                                         llvm::GlobalValue::ExternalLinkage, data, name);
  image->setAlignment(llvm::Align(64));
  uint64_t size = bytes.size() + (nulTerminated ? 1 : 0);
  new llvm::GlobalVariable(module, llvm::Type::getInt64Ty(ctx), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(llvm::Type::getInt64Ty(ctx), size),
                           (name + "_size").str());
}

/// Option lists the pipeline cannot diagnose itself: an empty entry would silently
/// mean the defaults (--dtypes=) or no GPU module at all (--cuda-targets=), and a
/// repeated one generates its kernels twice (a symbol clash, or a manifest the
/// runtime refuses).
static LogicalResult checkListOptions() {
  auto check = [](StringRef option, StringRef list, StringRef example) {
    SmallVector<StringRef> items;
    list.split(items, ',');
    llvm::StringSet<> seen;
    for (StringRef item : items) {
      item = item.trim();
      if (!item.empty() && seen.insert(item).second)
        continue;
      llvm::WithColor::error(llvm::errs(), "attn-compile") << "--" << option << "='" << list << "' names "
                   << (item.empty() ? "an empty entry" : "'" + item.str() + "' twice")
                   << "; expected a comma-separated list of distinct entries, e.g. --"
                   << option << "=" << example << "\n";
      return failure();
    }
    return success();
  };
  if (failed(check("dtypes", dtypes, "f32,f64")) ||
      (cudaDtypes.getNumOccurrences() && failed(check("cuda-dtypes", cudaDtypes, "f16,bf16,f32"))) ||
      (cudaHeadDims.getNumOccurrences() &&
       failed(check("cuda-head-dims", cudaHeadDims, allGpuHeadDims()))))
    return failure();
  if (!cudaTargets.empty() && failed(check("cuda-targets", llvm::join(cudaTargets, ","),
                                           "sm_80,sm_90")))
    return failure();
  return success();
}

/// --cuda-head-dims as numbers, each written as one (64, not 064 or 64.0, which the
/// list check would not see as a repeat). Whether the GPU kernels support a head dim
/// is attn-select-gpu-schedule's to say, as it is for --cuda-dtypes' types.
static FailureOr<SmallVector<int64_t>> parseCudaHeadDims() {
  SmallVector<int64_t> dims;
  if (!cudaHeadDims.getNumOccurrences())
    return dims;
  for (StringRef item : llvm::split(cudaHeadDims, ',')) {
    item = item.trim();
    int64_t dim;
    if (item.getAsInteger(10, dim) || dim < 1 || std::to_string(dim) != item) {
      llvm::WithColor::error(llvm::errs(), "attn-compile") << "--cuda-head-dims='" << cudaHeadDims << "' names '" << item
                   << "', which is not a head dim; expected positive integers, e.g. "
                      "--cuda-head-dims="
                   << allGpuHeadDims() << "\n";
      return failure();
    }
    dims.push_back(dim);
  }
  return dims;
}

/// --cpu must name a CPU of the host's target that can run its code: LLVM only warns
/// about an unknown name (and then compiles for a generic CPU), and a 32-bit x86
/// CPU (i386, pentium4) on an x86-64 host ends in an LLVM ERROR.
static LogicalResult checkCpu(const llvm::Target &target, const llvm::Triple &triple,
                              StringRef cpuName) {
  // The generic CPU's subtarget knows the names (asking with an unknown name warns).
  std::unique_ptr<llvm::MCSubtargetInfo> generic(target.createMCSubtargetInfo(triple, "", ""));
  StringRef problem;
  if (!generic || !generic->isCPUStringValid(cpuName))
    problem = "is not a CPU of";
  else if (triple.getArch() == llvm::Triple::x86_64 &&
           !std::unique_ptr<llvm::MCSubtargetInfo>(
                target.createMCSubtargetInfo(triple, cpuName, ""))
                ->checkFeatures("+64bit"))
    problem = "is a 32-bit CPU, which cannot run code for";
  if (problem.empty())
    return success();
  llvm::WithColor::error(llvm::errs(), "attn-compile") << "--cpu=" << cpuName << " " << problem << " the host target "
               << triple.str()
               << "; expected native or a 64-bit CPU of that target as LLVM names it "
                  "(e.g. x86-64, x86-64-v3, skylake-avx512; `llc -mcpu=help` lists them)\n";
  return failure();
}

static std::unique_ptr<llvm::TargetMachine> createTargetMachine() {
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    llvm::WithColor::error(llvm::errs(), "attn-compile") << "no LLVM target for " << triple.str() << ": " << error << "\n";
    return nullptr;
  }
  std::string cpuName = cpu == "native" ? llvm::sys::getHostCPUName().str() : cpu.getValue();
  if (failed(checkCpu(*target, triple, cpuName)))
    return nullptr;
  std::string features;
  if (cpu == "native") {
    llvm::SubtargetFeatures subtarget;
    for (const auto &[feature, enabled] : llvm::sys::getHostCPUFeatures())
      subtarget.AddFeature(feature, enabled);
    features = subtarget.getString();
  }
  llvm::TargetOptions options;
  auto machine = std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, cpuName, features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    llvm::WithColor::error(llvm::errs(), "attn-compile") << "cannot create a target machine for cpu '" << cpuName << "'\n";
  return machine;
}

/// LLVM's O3 pipeline for `machine` on `module`.
static llvm::Error optimize(llvm::Module &module, llvm::TargetMachine &machine) {
  if (llvm::Error err = makeOptimizingTransformer(3, 0, &machine)(&module))
    return llvm::createStringError("LLVM optimisation failed: " + llvm::toString(std::move(err)));
  return llvm::Error::success();
}

/// Optimises `module` and writes its object code to `path`.
static llvm::Error compileToObject(llvm::Module &module, llvm::TargetMachine &machine,
                                   StringRef path) {
  if (llvm::Error err = optimize(module, machine))
    return err;
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError("cannot write " + path + ": " + ec.message());
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, out, nullptr, llvm::CodeGenFileType::ObjectFile))
    return llvm::createStringError("the target cannot emit object files");
  pm.run(module);
  return llvm::Error::success();
}

/// A temporary file, removed when this goes out of scope and also when the process
/// ends abruptly: on a signal, or on an LLVM fatal error in a worker thread
/// (report_fatal_error runs the signal cleanups before it exits). While `cc` links,
/// a signal first stops the linker (LinkerGuard).
class TemporaryFile {
public:
  explicit TemporaryFile(StringRef path) : filePath(path.str()) {
    // Best effort: it fails only where no signal handler can be installed.
    llvm::sys::RemoveFileOnSignal(path);
  }
  TemporaryFile(const TemporaryFile &) = delete;
  TemporaryFile &operator=(const TemporaryFile &) = delete;
  ~TemporaryFile() {
    // Removed before it is unregistered, so that a signal in between still removes it.
    llvm::sys::fs::remove(filePath);
    llvm::sys::DontRemoveFileOnSignal(filePath);
  }
  const std::string &path() const { return filePath; }

private:
  std::string filePath;
};

/// Temporary object files (TemporaryFile).
struct TemporaryObjects {
  std::vector<std::unique_ptr<TemporaryFile>> files;

  /// A new temporary file's path.
  FailureOr<std::string> create() {
    SmallString<128> path;
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile("attn", "o", path)) {
      llvm::WithColor::error(llvm::errs(), "attn-compile") << "cannot create a temporary file: " << ec.message() << "\n";
      return failure();
    }
    files.push_back(std::make_unique<TemporaryFile>(path));
    return files.back()->path();
  }
  SmallVector<std::string> paths() const {
    return llvm::map_to_vector(files, [](const auto &file) { return file->path(); });
  }
};

/// The module's definitions in groups that can be compiled apart: each internal symbol
/// is in the group of every definition that uses it, and otherwise every definition is
/// a group of its own. (LLVM's SplitModule keeps such groups together too, but spreads
/// them over its parts by a hash of their names, which leaves the parts unbalanced.)
static SmallVector<SmallVector<const llvm::GlobalValue *>> separableGroups(
    const llvm::Module &module) {
  llvm::DenseMap<const llvm::GlobalValue *, unsigned> index;
  SmallVector<unsigned> parent;
  for (const llvm::GlobalValue &value : module.global_values())
    if (!value.isDeclaration()) {
      index[&value] = parent.size();
      parent.push_back(parent.size());
    }
  auto root = [&](unsigned i) {
    while (parent[i] != i)
      i = parent[i] = parent[parent[i]];
    return i;
  };
  for (const auto &[value, position] : index) {
    if (!value->hasLocalLinkage())
      continue;
    SmallVector<const llvm::User *> users(value->users());
    while (!users.empty()) {
      const llvm::User *user = users.pop_back_val();
      const llvm::GlobalValue *owner = dyn_cast<llvm::GlobalValue>(user);
      if (auto *instruction = dyn_cast<llvm::Instruction>(user))
        owner = instruction->getFunction();
      else if (!owner)
        llvm::append_range(users, user->users()); // a constant expression
      if (owner && index.contains(owner))
        parent[root(index.at(owner))] = root(position);
    }
  }
  llvm::DenseMap<unsigned, unsigned> groupOfRoot;
  SmallVector<SmallVector<const llvm::GlobalValue *>> groups;
  for (const llvm::GlobalValue &value : module.global_values())
    if (!value.isDeclaration()) {
      auto [it, added] = groupOfRoot.try_emplace(root(index.at(&value)), groups.size());
      if (added)
        groups.emplace_back();
      groups[it->second].push_back(&value);
    }
  return groups;
}

/// Optimises and compiles `module` into `objects`, on --jobs threads. An LLVMContext
/// is used by one thread at a time, so the module is split into separable groups
/// (above) that travel as bitcode into contexts of their own; the largest start first.
/// The entry points call nothing of each other's, so no inlining is lost.
static LogicalResult compileInParts(llvm::Module &module, llvm::TargetMachine &machine,
                                    TemporaryObjects &objects) {
  llvm::ThreadPoolStrategy threads = llvm::hardware_concurrency(jobs);
  if (threads.compute_thread_count() <= 1) {
    FailureOr<std::string> path = objects.create();
    if (failed(path))
      return failure();
    if (llvm::Error err = compileToObject(module, machine, *path)) {
      llvm::WithColor::error(llvm::errs(), "attn-compile") << "" << llvm::toString(std::move(err)) << "\n";
      return failure();
    }
    return success();
  }
  SmallVector<SmallString<0>> bitcode;
  for (ArrayRef<const llvm::GlobalValue *> group : separableGroups(module)) {
    llvm::SmallPtrSet<const llvm::GlobalValue *, 4> members(group.begin(), group.end());
    llvm::ValueToValueMapTy mapping;
    std::unique_ptr<llvm::Module> part = llvm::CloneModule(
        module, mapping, [&](const llvm::GlobalValue *value) { return members.contains(value); });
    llvm::raw_svector_ostream os(bitcode.emplace_back());
    llvm::WriteBitcodeToFile(*part, os);
  }
  llvm::stable_sort(bitcode, [](const SmallString<0> &a, const SmallString<0> &b) {
    return a.size() > b.size();
  });
  for (size_t i = 0; i < bitcode.size(); ++i)
    if (failed(objects.create()))
      return failure();
  // Part i's object.
  const SmallVector<std::string> created = objects.paths();
  ArrayRef<std::string> paths = ArrayRef(created).take_back(bitcode.size());
  SmallVector<std::string> errors(bitcode.size());
  {
    llvm::DefaultThreadPool pool(threads);
    for (size_t i = 0; i < bitcode.size(); ++i)
      pool.async([&, i] {
        llvm::LLVMContext context;
        llvm::Expected<std::unique_ptr<llvm::Module>> part = llvm::parseBitcodeFile(
            llvm::MemoryBufferRef(bitcode[i].str(), module.getName()), context);
        if (!part) {
          errors[i] = llvm::toString(part.takeError());
          return;
        }
        // A target machine is not shared between threads; this one's configuration
        // was checked when `machine` was created.
        std::unique_ptr<llvm::TargetMachine> partMachine(machine.getTarget().createTargetMachine(
            machine.getTargetTriple(), machine.getTargetCPU(), machine.getTargetFeatureString(),
            machine.Options, machine.getRelocationModel(), machine.getCodeModel(),
            machine.getOptLevel()));
        if (!partMachine) {
          errors[i] = "cannot create a target machine for cpu '" +
                      machine.getTargetCPU().str() + "'";
          return;
        }
        if (llvm::Error err = compileToObject(**part, *partMachine, paths[i]))
          errors[i] = llvm::toString(std::move(err));
      });
    pool.wait();
  }
  bool ok = true;
  for (const std::string &error : errors)
    if (!error.empty()) {
      llvm::WithColor::error(llvm::errs(), "attn-compile") << "" << error << "\n";
      ok = false;
    }
  return success(ok);
}

/// Writes text output (--emit=mlir|llvm) to -o.
static LogicalResult writeOutput(function_ref<void(llvm::raw_ostream &)> print) {
  std::string error;
  auto out = openOutputFile(outputFilename, &error);
  if (!out) {
    llvm::WithColor::error(llvm::errs(), "attn-compile") << "" << error << "\n";
    return failure();
  }
  print(out->os());
  out->keep();
  return success();
}

namespace {
/// The pid of the `cc` that links the artifact while it runs, else 0; `cc` leads its
/// own process group, which holds the programs it runs (collect2, ld).
std::atomic<pid_t> runningLinker{0};
/// True from just before `cc` is spawned until runningLinker holds its pid (or the
/// spawn failed).
std::atomic<bool> spawningLinker{false};
/// The handlers stopLinker hands each signal to: LLVM's (RemoveFileOnSignal's).
struct sigaction chainedHandlers[NSIG];
/// The signals on which LLVM's handler removes the temporary files.
constexpr int kCleanupSignals[] = {SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR2};

/// LLVM's handler removes the temporary files and re-raises the signal, but a linker
/// still running survives it and would write its output after that cleanup. So while
/// `cc` runs this handler goes first: it kills the linker's process group, waits (at
/// most a second) until no process of it is left, then hands the signal on.
/// Async-signal-safe calls only. A signal that arrives while `cc` is being spawned
/// must not miss it (under load `cc` may run, and write, before the spawning thread
/// stores its pid): the spawning thread blocks these signals until the pid is stored,
/// so a signal meant for the process waits for it there, and another thread that
/// takes one meanwhile waits (at most a second) for the store here.
void stopLinker(int sig, siginfo_t *info, void *context) {
  const int savedErrno = errno;
  for (int wait = 0; wait < 1000 && spawningLinker.load() && runningLinker.load() == 0; ++wait) {
    struct timespec millisecond {0, 1000000};
    ::nanosleep(&millisecond, nullptr);
  }
  if (pid_t pid = runningLinker.exchange(0); pid > 0) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    // cc's children are not ours to reap; whoever reaps orphans does it quickly.
    for (int wait = 0; wait < 1000 && ::kill(-pid, 0) == 0; ++wait) {
      struct timespec millisecond {0, 1000000};
      ::nanosleep(&millisecond, nullptr);
    }
  }
  errno = savedErrno;
  const struct sigaction &next = chainedHandlers[sig];
  if (next.sa_flags & SA_SIGINFO)
    return next.sa_sigaction(sig, info, context);
  if (next.sa_handler != SIG_DFL)
    return next.sa_handler(sig);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

/// stopLinker in front of the current handler of each cleanup signal not ignored,
/// for the lifetime of this object.
class LinkerGuard {
public:
  LinkerGuard() {
    struct sigaction ours {};
    ours.sa_sigaction = stopLinker;
    ours.sa_flags = SA_SIGINFO;
    sigemptyset(&ours.sa_mask);
    for (int sig : kCleanupSignals)
      sigaddset(&ours.sa_mask, sig);
    // The handler to chain to is saved before stopLinker can run.
    for (int sig : kCleanupSignals)
      if (::sigaction(sig, nullptr, &chainedHandlers[sig]) == 0 &&
          chainedHandlers[sig].sa_handler != SIG_IGN && ::sigaction(sig, &ours, nullptr) == 0)
        installed.push_back(sig);
  }
  LinkerGuard(const LinkerGuard &) = delete;
  LinkerGuard &operator=(const LinkerGuard &) = delete;
  ~LinkerGuard() {
    for (int sig : installed)
      ::sigaction(sig, &chainedHandlers[sig], nullptr);
  }

private:
  SmallVector<int, 5> installed;
};
} // namespace

/// Runs `cc` as the leader of its own process group (which LLVM's ExecuteAndWait
/// cannot), so that stopLinker can stop the linker it runs as well; returns its exit
/// status, or -1 with `error` set.
static int runLinker(StringRef linker, ArrayRef<StringRef> args, std::string &error) {
  std::vector<std::string> strings(args.begin(), args.end());
  std::vector<char *> argv;
  for (std::string &arg : strings)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  LinkerGuard guard;
  sigset_t cleanupSignals, unblocked;
  sigemptyset(&cleanupSignals);
  for (int sig : kCleanupSignals)
    sigaddset(&cleanupSignals, sig);
  ::pthread_sigmask(SIG_BLOCK, &cleanupSignals, &unblocked);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setsigmask(&attributes, &unblocked); // `cc` takes signals as we did
  pid_t pid = 0;
  const std::string program = linker.str();
  spawningLinker.store(true);
  int spawned = ::posix_spawn(&pid, program.c_str(), nullptr, &attributes, argv.data(), environ);
  posix_spawnattr_destroy(&attributes);
  if (spawned == 0)
    runningLinker.store(pid);
  spawningLinker.store(false);
  // A signal blocked meanwhile is handled now, with the pid known.
  ::pthread_sigmask(SIG_SETMASK, &unblocked, nullptr);
  if (spawned != 0) {
    error = std::strerror(spawned);
    return -1;
  }
  // Waits for the exit without reaping: until runningLinker is cleared, the pid
  // stopLinker may kill stays the linker's (a zombie), never a reused one.
  siginfo_t exited;
  while (::waitid(P_PID, pid, &exited, WEXITED | WNOWAIT) == -1 && errno == EINTR) {
  }
  runningLinker.store(0);
  int status = 0;
  while (::waitpid(pid, &status, 0) == -1) {
    if (errno != EINTR) {
      error = std::strerror(errno);
      return -1;
    }
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  error = "killed by signal " + std::to_string(WTERMSIG(status));
  return -1;
}

static LogicalResult linkSharedObject(ArrayRef<std::string> objects, StringRef output) {
  llvm::ErrorOr<std::string> linker = llvm::sys::findProgramByName("cc");
  if (!linker) {
    llvm::WithColor::error(llvm::errs(), "attn-compile") << "'cc' not found on PATH; it links the artifact\n";
    return failure();
  }
  SmallVector<StringRef> args{*linker, "-shared", "-o", output};
  llvm::append_range(args, objects);
  args.push_back("-lm");
  std::string error;
  int status = runLinker(*linker, args, error);
  if (status != 0) {
    llvm::WithColor::error(llvm::errs(), "attn-compile") << "linking " << output << " failed (" << status << ") " << error
                 << "\n";
    return failure();
  }
  return success();
}

/// attn_signature (runtime/include/attn/abi.h): what the entry points compiled from
/// `kernel` read, taken from the attn ops as every lowering takes them
/// (lib/Analysis/KernelSignature.h), so that the runtime can cross-check the manifest.
static SmallVector<int64_t> abiSignature(attn::KernelOp kernel) {
  attn::ScoreOp score = kernel.getScoreOp();
  SmallVector<attn::KernelWeight> weights = attn::kernelWeights(kernel);
  SmallVector<attn::InputOp> inputs = attn::kernelInputs(kernel);
  const int64_t scalars = attn::kernelParamNames(kernel).size();
  SmallVector<int64_t> signature{ATTN_ABI_VERSION, static_cast<int64_t>(inputs.size()),
                                 score ? score.getRequiredHeadDim() : 0,
                                 scalars + static_cast<int64_t>(weights.size())};
  // Each param as its rank and extents, in ABI order: the scalars, then the weights.
  signature.append(scalars, /*rank=*/0);
  for (const attn::KernelWeight &weight : weights) {
    signature.push_back(weight.shape.size());
    llvm::append_range(signature, weight.shape);
  }
  for (attn::InputOp input : inputs) {
    RankedTensorType type = input.getTensorType();
    Type element = type.getElementType();
    signature.push_back(type.getRank());
    signature.push_back(isa<FloatType>(element) ? ATTN_INPUT_FLOAT
                                                : element.getIntOrFloatBitWidth());
    signature.push_back(input.getLearnable() ? 1 : 0);
    for (int64_t extent : type.getShape())
      signature.push_back(ShapedType::isDynamic(extent) ? -1 : extent);
  }
  return signature;
}

/// Exports `signature` as the constant int64 array attn_signature.
static void embedSignature(llvm::Module &module, ArrayRef<int64_t> signature) {
  SmallVector<uint64_t> words(signature.begin(), signature.end());
  llvm::Constant *data = llvm::ConstantDataArray::get(module.getContext(), words);
  auto *global = new llvm::GlobalVariable(module, data->getType(), /*isConstant=*/true,
                                          llvm::GlobalValue::ExternalLinkage, data,
                                          ATTN_SIGNATURE_SYMBOL);
  global->setAlignment(llvm::Align(8));
}

/// The checksum trailer (runtime/include/attn/checksum.h) that seals `size` bytes of
/// `content` (Checksum.cpp).
std::string artifactChecksumTrailer(const char *content, size_t size);

/// Links `objects` into `output` the way every reader may rely on: into a temporary
/// file next to it, sealed with the checksum trailer (runtime/include/attn/checksum.h),
/// then renamed over `output`. Nobody ever sees a partial or unsealed artifact, and a
/// process that loaded the previous file keeps its (unchanged) copy.
static LogicalResult writeSealedArtifact(ArrayRef<std::string> objects, StringRef output) {
  SmallString<128> temporary;
  llvm::sys::fs::createUniquePath(output + ".%%%%%%%%.tmp", temporary, /*MakeAbsolute=*/false);
  TemporaryFile removeTemporary(temporary);
  if (failed(linkSharedObject(objects, temporary)))
    return failure();
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> linked =
      llvm::MemoryBuffer::getFile(temporary, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  std::error_code ec = linked.getError();
  if (!ec) {
    StringRef bytes = (*linked)->getBuffer();
    llvm::raw_fd_ostream append(temporary, ec, llvm::sys::fs::OF_Append);
    if (!ec) {
      append << artifactChecksumTrailer(bytes.data(), bytes.size());
      append.close();
      ec = append.error();
    }
  }
  if (!ec)
    ec = llvm::sys::fs::rename(temporary, output);
  if (ec) {
    llvm::WithColor::error(llvm::errs(), "attn-compile") << "cannot write " << output << ": " << ec.message() << "\n";
    return failure();
  }
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "attn compiler: attn IR -> CPU artifact\n");
  if (failed(checkListOptions()))
    return 1;
  FailureOr<SmallVector<int64_t>> headDims = parseCudaHeadDims();
  if (failed(headDims))
    return 1;

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registry.insert<attn::AttnDialect>();
  registerAllToLLVMIRTranslations(registry);
  MLIRContext context(registry);
  // Diagnostics name the offending op; a dump of the whole module would bury them.
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  std::string error;
  auto file = openInputFile(inputFilename, &error);
  if (!file) {
    llvm::WithColor::error(llvm::errs(), "attn-compile") << "" << error << "\n";
    return 1;
  }
  if (failed(attn::checkParserInput(*file)))
    return 1;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  const bool cuda = !cudaTargets.empty();
  attn::TritonPipelineOptions triton;
  setTritonOptions(triton, *headDims);

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  std::unique_ptr<llvm::TargetMachine> machine = createTargetMachine();
  if (!machine)
    return 1;
  // The tiled kernels' vectors match the target's registers.
  int64_t vectorBits =
      machine->getMCSubtargetInfo()->checkFeatures("+avx512f") ? 512 : 256;

  // Before the attn ops are copied for attn_signature: the input is part of the kernel.
  if (attnMask != MaskInput::None && failed(runPipeline(*module, [](OpPassManager &pm) {
        attn::AttnAddMaskInputOptions options;
        options.kernelName = kernelName;
        options.kind = attnMask == MaskInput::Bool       ? "bool"
                       : attnMask == MaskInput::Additive ? "additive"
                                                         : "learnable-additive";
        pm.addPass(attn::createAttnAddMaskInput(options));
      })))
    return 1;
  if (emit == Emit::Triton) {
    if (failed(runPipeline(*module, [&](OpPassManager &pm) {
          attn::buildTritonAnalysisPipeline(pm, triton);
        })))
      return 1;
    FailureOr<attn::KernelOp> kernel = attn::selectKernel(*module, kernelName);
    std::string text;
    llvm::raw_string_ostream python(text);
    if (failed(kernel) || failed(attn::emitTritonModule(*kernel, python)))
      return 1;
    return failed(writeOutput([&](llvm::raw_ostream &os) { os << text; })) ? 1 : 0;
  }
  TritonImages tritonImages;
  if (cuda && (emit == Emit::SharedObject || emit == Emit::Object || emit == Emit::LLVMIR)) {
    FailureOr<TritonImages> images = compileTritonImages(*module, triton);
    if (failed(images))
      return 1;
    tritonImages = std::move(*images);
  }
  OwningOpRef<ModuleOp> source = module->clone(); // the attn ops, for attn_signature
  if (failed(runPipeline(*module,
                         [&](OpPassManager &pm) { buildAttnPipeline(pm, vectorBits, *headDims); })))
    return 1;
  // The pipeline compiled the kernel --kernel names, or the module's only one.
  SmallVector<int64_t> signature = abiSignature(
      kernelName.empty() ? *source->getOps<attn::KernelOp>().begin()
                         : source->lookupSymbol<attn::KernelOp>(kernelName));
  if (emit == Emit::MLIR)
    return failed(writeOutput([&](llvm::raw_ostream &os) { module->print(os); })) ? 1 : 0;
  if (emit == Emit::Manifest)
    return failed(writeOutput([&](llvm::raw_ostream &os) { os << attn::manifestText(*module); }))
               ? 1
               : 0;
  if (failed(runPipeline(*module, attn::buildHostToLLVMPipeline)))
    return 1;
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(*module, llvmContext);
  if (!llvmModule) {
    llvm::WithColor::error(llvm::errs(), "attn-compile") << "translation to LLVM IR failed\n";
    return 1;
  }
  if (cuda) {
    embedImage(*llvmModule, "attn_triton_source", tritonImages.source, /*nulTerminated=*/true);
    embedImage(*llvmModule, "attn_triton_launch", tritonImages.launch, /*nulTerminated=*/true);
    for (const auto &[symbol, cubin] : tritonImages.cubins)
      embedImage(*llvmModule, symbol, cubin, /*nulTerminated=*/false);
  }
  embedSignature(*llvmModule, signature);
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());

  if (emit == Emit::LLVMIR || emit == Emit::Object) {
    llvm::Error err = emit == Emit::LLVMIR
                          ? optimize(*llvmModule, *machine)
                          : compileToObject(*llvmModule, *machine, outputFilename);
    if (err) {
      llvm::WithColor::error(llvm::errs(), "attn-compile") << "" << llvm::toString(std::move(err)) << "\n";
      return 1;
    }
    if (emit == Emit::LLVMIR)
      return failed(writeOutput([&](llvm::raw_ostream &os) { llvmModule->print(os, nullptr); }))
                 ? 1
                 : 0;
    return 0;
  }
  TemporaryObjects objects;
  if (failed(compileInParts(*llvmModule, *machine, objects)) ||
      failed(writeSealedArtifact(objects.paths(), outputFilename)))
    return 1;
  return 0;
}
