//===- attn-compile.cpp - one-shot driver: attn IR -> artifact .so --------===//
//
//   attn-compile tanhmax.mlir -o tanhmax.so [--kernel=name] [--dtypes=f32,f64]
//                [--cpu=native|<llvm cpu name>] [--emit=so|obj|llvm|mlir]
//
// Runs the attn pipeline (verify, classify, derive backward, lower to loops),
// the upstream lowering to the LLVM dialect, LLVM's O3 pipeline for the target
// CPU, emits an object file and links it into a shared object with `cc`.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttnDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

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
enum class Emit { SharedObject, Object, LLVMIR, MLIR };
static cl::opt<Emit> emit(
    "emit", cl::desc("What to write"), cl::init(Emit::SharedObject),
    cl::values(clEnumValN(Emit::SharedObject, "so", "linked shared object (default)"),
               clEnumValN(Emit::Object, "obj", "object file"),
               clEnumValN(Emit::LLVMIR, "llvm", "optimised LLVM IR"),
               clEnumValN(Emit::MLIR, "mlir", "MLIR after the attn passes (loops)")));

static std::string attnPipeline(int64_t vectorBits) {
  std::string types = dtypes;
  return "attn-verify,attn-classify-normalizer,attn-derive-backward,"
         "attn-lower-to-loops{kernel=" +
         std::string(kernelName) + " element-types=" + types +
         " vector-bits=" + std::to_string(vectorBits) +
         "},inline,symbol-dce,attn-approximate-math,canonicalize,cse,"
         "loop-invariant-code-motion,canonicalize";
}

static const char *llvmLoweringPipeline =
    "convert-scf-to-cf,expand-strided-metadata,lower-affine,convert-vector-to-llvm,"
    "finalize-memref-to-llvm,convert-math-to-llvm,convert-math-to-libm,"
    "convert-arith-to-llvm,convert-index-to-llvm,convert-cf-to-llvm,"
    "convert-func-to-llvm,reconcile-unrealized-casts";

/// Runs `pipeline`, a comma-separated list of module passes.
static LogicalResult runPipeline(ModuleOp module, StringRef pipeline) {
  PassManager pm(module.getContext());
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    return failure();
  return pm.run(module);
}

static std::unique_ptr<llvm::TargetMachine> createTargetMachine() {
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    llvm::errs() << "attn-compile: no LLVM target for " << triple.str() << ": " << error << "\n";
    return nullptr;
  }
  std::string cpuName = cpu == "native" ? llvm::sys::getHostCPUName().str() : cpu.getValue();
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
    llvm::errs() << "attn-compile: cannot create a target machine for cpu '" << cpuName << "'\n";
  return machine;
}

static LogicalResult writeObject(llvm::Module &module, llvm::TargetMachine &machine,
                                 StringRef path) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "attn-compile: cannot write " << path << ": " << ec.message() << "\n";
    return failure();
  }
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, out, nullptr, llvm::CodeGenFileType::ObjectFile)) {
    llvm::errs() << "attn-compile: the target cannot emit object files\n";
    return failure();
  }
  pm.run(module);
  return success();
}

/// Writes text output (--emit=mlir|llvm) to -o.
static LogicalResult writeOutput(function_ref<void(llvm::raw_ostream &)> print) {
  std::string error;
  auto out = openOutputFile(outputFilename, &error);
  if (!out) {
    llvm::errs() << "attn-compile: " << error << "\n";
    return failure();
  }
  print(out->os());
  out->keep();
  return success();
}

static LogicalResult linkSharedObject(StringRef object, StringRef output) {
  llvm::ErrorOr<std::string> linker = llvm::sys::findProgramByName("cc");
  if (!linker) {
    llvm::errs() << "attn-compile: 'cc' not found on PATH; it links the artifact\n";
    return failure();
  }
  SmallVector<StringRef> args{*linker, "-shared", "-o", output, object, "-lm"};
  std::string error;
  int status = llvm::sys::ExecuteAndWait(*linker, args, std::nullopt, {}, 0, 0, &error);
  if (status != 0) {
    llvm::errs() << "attn-compile: linking " << output << " failed (" << status << ") " << error
                 << "\n";
    return failure();
  }
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAllPasses();
  attn::registerAttnPasses();
  cl::ParseCommandLineOptions(argc, argv, "attn compiler: attn IR -> CPU artifact\n");

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registry.insert<attn::AttnDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  std::string error;
  auto file = openInputFile(inputFilename, &error);
  if (!file) {
    llvm::errs() << "attn-compile: " << error << "\n";
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  std::unique_ptr<llvm::TargetMachine> machine = createTargetMachine();
  if (!machine)
    return 1;
  // The tiled kernels' vectors match the target's registers.
  int64_t vectorBits =
      machine->getMCSubtargetInfo()->checkFeatures("+avx512f") ? 512 : 256;

  if (failed(runPipeline(*module, attnPipeline(vectorBits))))
    return 1;
  if (emit == Emit::MLIR)
    return failed(writeOutput([&](llvm::raw_ostream &os) { module->print(os); })) ? 1 : 0;
  if (failed(runPipeline(*module, llvmLoweringPipeline)))
    return 1;
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(*module, llvmContext);
  if (!llvmModule) {
    llvm::errs() << "attn-compile: translation to LLVM IR failed\n";
    return 1;
  }
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  if (llvm::Error err = makeOptimizingTransformer(3, 0, machine.get())(llvmModule.get())) {
    llvm::errs() << "attn-compile: LLVM optimisation failed: " << llvm::toString(std::move(err))
                 << "\n";
    return 1;
  }

  if (emit == Emit::LLVMIR)
    return failed(writeOutput([&](llvm::raw_ostream &os) { llvmModule->print(os, nullptr); })) ? 1 : 0;
  if (emit == Emit::Object)
    return failed(writeObject(*llvmModule, *machine, outputFilename)) ? 1 : 0;

  SmallString<128> objectPath;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("attn", "o", objectPath)) {
    llvm::errs() << "attn-compile: cannot create a temporary file: " << ec.message() << "\n";
    return 1;
  }
  llvm::FileRemover removeObject(objectPath);
  if (failed(writeObject(*llvmModule, *machine, objectPath)) ||
      failed(linkSharedObject(objectPath, outputFilename)))
    return 1;
  return 0;
}
