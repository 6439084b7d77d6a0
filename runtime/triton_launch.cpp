//===- triton_launch.cpp - reading an artifact's attn_triton_launch -------===//
//
// The Triton backend's launch description is the JSON python -m attn.triton_aot wrote
// (runtime/python/attn/triton_aot.py); attn-compile embeds it unchanged. Its schema is
// $defs.triton_launch of the manifest's schema (attn/manifest.schema.json), which the
// writer checks before writing and this reader (nlohmann-json) before reading a field.
//
//===----------------------------------------------------------------------===//
#include "internal.h"
#include "manifest_json.h"

namespace attn {

const char *triton_kernel_name(TritonKernel kernel) {
  switch (kernel) {
  case TritonKernel::Forward:
    return ATTN_TRITON_FORWARD;
  case TritonKernel::ForwardSplit:
    return ATTN_TRITON_FORWARD_SPLIT;
  case TritonKernel::ForwardMerge:
    return ATTN_TRITON_FORWARD_MERGE;
  case TritonKernel::BackwardPreprocess:
    return ATTN_TRITON_BACKWARD_PREPROCESS;
  case TritonKernel::BackwardKeys:
    return ATTN_TRITON_BACKWARD_KEYS;
  case TritonKernel::BackwardQueries:
    return ATTN_TRITON_BACKWARD_QUERIES;
  }
  return "?";
}

std::optional<TritonKernel> triton_kernel_named(const std::string &name) {
  for (TritonKernel kernel : kTritonKernels)
    if (name == triton_kernel_name(kernel))
      return kernel;
  return std::nullopt;
}

const char *triton_variant(TritonKernel kernel, bool causal) {
  // Their rows' D_i, and the merge of the chunks' row states, need no mask.
  if (kernel == TritonKernel::BackwardPreprocess || kernel == TritonKernel::ForwardMerge)
    return "any";
  return causal ? "causal" : "full";
}

std::vector<const char *> triton_variants(TritonKernel kernel) {
  const char *full = triton_variant(kernel, false), *causal = triton_variant(kernel, true);
  if (std::string(full) == causal)
    return {full};
  return {full, causal};
}

namespace detail {

TritonLaunch parse_triton_launch(const std::string &path, const std::string &text) {
  const std::string where = "attn: artifact " + path + ": attn_triton_launch";
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error &e) {
    TORCH_CHECK(false, where, " is not valid JSON (", e.what(), ")");
  }
  check_against_schema(doc, "triton_launch", where);
  TritonLaunch launch;
  launch.ptxas_version = doc["ptxas_version"].get<std::string>();
  if (doc.contains("decode"))
    launch.decode = TritonDecodeRule{doc["decode"]["max_rows"].get<int64_t>(),
                                     doc["decode"]["programs_per_sm"].get<int64_t>()};
  if (doc.contains("backward")) {
    launch.backward.rows_first = doc["backward"]["rows_first"].get<bool>();
    launch.backward.tile_states = doc["backward"]["tile_states"].get<std::vector<std::string>>();
  }
  for (const auto &entry : doc["inputs"]) // [name, kernel argument, element, extents, learnable]
    launch.inputs.push_back(TritonInput{entry[0].get<std::string>(), entry[1].get<std::string>(),
                                        entry[2].get<std::string>(), entry[4].get<bool>()});
  for (const auto &f : doc["images"]) {
    TritonImage image;
    image.symbol = f["symbol"].get<std::string>();
    image.chip = f["chip"].get<std::string>();
    image.dtype = f["dtype"].get<std::string>();
    image.head_dim = f["head_dim"].get<int64_t>();
    image.variant = f["variant"].get<std::string>();
    const std::string kernel = f["kernel"].get<std::string>();
    const std::optional<TritonKernel> role = triton_kernel_named(kernel);
    TORCH_CHECK(role, where, ": images[].kernel is '", kernel, "', expected one of ",
                ATTN_TRITON_FORWARD ", " ATTN_TRITON_FORWARD_SPLIT ", " ATTN_TRITON_FORWARD_MERGE
                ", " ATTN_TRITON_BACKWARD_PREPROCESS ", " ATTN_TRITON_BACKWARD_KEYS
                " or " ATTN_TRITON_BACKWARD_QUERIES);
    image.kernel = *role;
    image.function = f["function"].get<std::string>();
    for (const auto &p : f["parameters"])
      image.parameters.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
    image.block_m = f["block_m"].get<int64_t>();
    image.block_n = f["block_n"].get<int64_t>();
    image.num_warps = f["num_warps"].get<int64_t>();
    image.shared_bytes = f["shared_bytes"].get<int64_t>();
    image.global_scratch_size = f["global_scratch_size"].get<int64_t>();
    image.global_scratch_align = f["global_scratch_align"].get<int64_t>();
    image.profile_scratch_size = f["profile_scratch_size"].get<int64_t>();
    image.grid = f["grid"].get<std::string>();
    image.scale = f["scale"].get<double>();
    launch.images.push_back(std::move(image));
  }
  return launch;
}

} // namespace detail
} // namespace attn
