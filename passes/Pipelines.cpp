//===- Pipelines.cpp - the registered attn pipelines ----------------------===//
#include "passes/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::attn;

/// The passes both pipelines share, with the GPU schedule when `cuda` holds.
static void buildArtifactPipeline(OpPassManager &pm, StringRef kernel,
                                  ArrayRef<std::string> elementTypes, int64_t vectorBits,
                                  const CudaPipelineOptions *cuda) {
  pm.addPass(createAttnExpandSharedRegions());
  pm.addPass(createAttnVerify());
  pm.addPass(createAttnClassifyNormalizer());
  pm.addPass(createAttnDeriveBackward());
  pm.addPass(createAttnAnalyzeBlockSparsity());
  AttnSelectScheduleOptions schedule;
  schedule.kernelName = kernel.str();
  schedule.elementTypes.assign(elementTypes.begin(), elementTypes.end());
  schedule.vectorBits = vectorBits;
  pm.addPass(createAttnSelectSchedule(schedule));
  if (cuda) {
    AttnSelectGpuScheduleOptions gpuSchedule;
    gpuSchedule.kernelName = kernel.str();
    gpuSchedule.targets.assign(cuda->targets.begin(), cuda->targets.end());
    gpuSchedule.elementTypes.assign(cuda->gpuElementTypes.begin(), cuda->gpuElementTypes.end());
    gpuSchedule.headDims.assign(cuda->headDims.begin(), cuda->headDims.end());
    pm.addPass(createAttnSelectGpuSchedule(gpuSchedule));
  }
  pm.addPass(createAttnInstantiateFunctions());
  pm.addPass(createAttnLowerToLoops());
  pm.addPass(createAttnEmitManifest());
  pm.addPass(createAttnEraseDeclarations());
  pm.addPass(createInlinerPass());
  pm.addPass(createSymbolDCEPass());
  pm.addPass(createAttnApproximateMath(AttnApproximateMathOptions{/*avx512=*/vectorBits >= 512}));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createLoopInvariantCodeMotionPass());
  pm.addPass(createCanonicalizerPass());
}

void mlir::attn::buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options) {
  buildArtifactPipeline(pm, options.kernel, options.elementTypes, options.vectorBits, nullptr);
}

void mlir::attn::buildCudaPipeline(OpPassManager &pm, const CudaPipelineOptions &options) {
  buildArtifactPipeline(pm, options.kernel, options.elementTypes, options.vectorBits, &options);
}

void mlir::attn::buildHostToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // Before the vector lowering: math-to-libm unrolls a vector op without an LLVM
  // intrinsic (f64 erf in a vectorised schedule) into vector.extract/insert around
  // libm calls, which vector-to-llvm must still see.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.x86Vector = true; // x86vector ops only exist where the target has them
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

/// Expands the short forms, verifies, classifies and derives the backward.
static void addDerivePasses(OpPassManager &pm) {
  pm.addPass(createAttnExpandSharedRegions());
  pm.addPass(createAttnVerify());
  pm.addPass(createAttnClassifyNormalizer());
  pm.addPass(createAttnDeriveBackward());
}

/// attn-explain: classify and derive, clean the derived functions up, print them.
static void buildExplainPipeline(OpPassManager &pm) {
  addDerivePasses(pm);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createAttnPrintExplanation());
}

void mlir::attn::buildTritonAnalysisPipeline(OpPassManager &pm,
                                             const TritonPipelineOptions &options) {
  addDerivePasses(pm);
  pm.addPass(createAttnAnalyzeBlockSparsity());
  AttnSelectGpuScheduleOptions gpuSchedule;
  gpuSchedule.kernelName = options.kernel;
  gpuSchedule.targets.assign(options.targets.begin(), options.targets.end());
  gpuSchedule.elementTypes.assign(options.gpuElementTypes.begin(), options.gpuElementTypes.end());
  gpuSchedule.headDims.assign(options.headDims.begin(), options.headDims.end());
  pm.addPass(createAttnSelectGpuSchedule(gpuSchedule));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::attn::registerAttnPipelines() {
  PassPipelineRegistration<CpuPipelineOptions>(
      "attn-cpu-pipeline", "An attn module to the CPU code and manifest of one artifact",
      buildCpuPipeline);
  PassPipelineRegistration<CudaPipelineOptions>(
      "attn-cuda-pipeline",
      "An attn module to the CPU code and manifest of one artifact whose GPU kernels are "
      "the Triton module's (the gpu_schedule's cuda-targets and triton-kernel lines)",
      buildCudaPipeline);
  PassPipelineRegistration<>("attn-host-to-llvm", "An artifact's host code to the LLVM dialect",
                             buildHostToLLVMPipeline);
  PassPipelineRegistration<>(
      "attn-explain",
      "Prints each kernel's algorithm, stabiliser and derived gradients as formulas",
      buildExplainPipeline);
  PassPipelineRegistration<TritonPipelineOptions>(
      "attn-triton", "Prints the module's kernel as a Python module of Triton kernels",
      [](OpPassManager &pm, const TritonPipelineOptions &options) {
        buildTritonAnalysisPipeline(pm, options);
        pm.addPass(createAttnEmitTriton());
      });
}
