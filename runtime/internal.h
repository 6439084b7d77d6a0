//===- internal.h - runtime internals shared between translation units ----===//
#ifndef ATTN_RUNTIME_INTERNAL_H
#define ATTN_RUNTIME_INTERNAL_H

#include "attn/runtime.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace attn {
namespace detail {
/// The runtime's reader of the manifest text (format: attn/abi.h; golden files:
/// test/manifest/). Throws c10::Error naming `path` (the artifact) and the line.
Manifest parse_manifest(const std::string &path, const std::string &text);

/// The signature of the dispatcher op attn::attention (runtime/ops.cpp).
using AttentionSig = torch::Tensor(c10::string_view, const torch::Tensor &,
                                   const torch::Tensor &, const torch::Tensor &,
                                   const torch::Tensor &, bool,
                                   const std::optional<torch::Tensor> &,
                                   const std::optional<at::TensorList> &);
/// The op attn::attention (autograd-aware), called through the dispatcher.
const c10::TypedOperatorHandle<AttentionSig> &attention_op();

/// A CUDA target "sm_XY" / "sm_XYa" as compute capability X.Y.
struct CudaArch {
  int major = 0, minor = 0;
  bool arch_specific = false; // the 'a' suffix: runs only on exactly X.Y
};
c10::optional<CudaArch> parse_cuda_target(const std::string &target);

/// The image to load on a device of compute capability major.minor: the exact cubin
/// target, else the newest cubin of the same major with a lower minor, else "ptx" when
/// has_ptx, else "" (nothing fits).
std::string choose_cuda_image(const std::vector<std::string> &targets, bool has_ptx, int major,
                              int minor);

/// "f32" / "f16" / "bf16" (a cuda-kernel dtype), nullptr for other dtypes.
const char *cuda_dtype_tag(torch::ScalarType t);
} // namespace detail
} // namespace attn

#endif
