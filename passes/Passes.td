//===- Passes.td - attn passes ------------------------------*- tablegen -*-===//
#ifndef ATTN_PASSES
#define ATTN_PASSES

include "mlir/Pass/PassBase.td"

def AttnVerify : Pass<"attn-verify", "::mlir::ModuleOp"> {
  let summary = "Checks that every attn.kernel can be compiled";
  let description = [{
    Beyond the op verifiers: every attn.kernel names a normalizer, and a module that
    is compiled holds at least one attn.kernel.
  }];
}

#endif // ATTN_PASSES
