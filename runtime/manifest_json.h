//===- manifest_json.h - the schema check shared by the JSON readers ------===//
#ifndef ATTN_RUNTIME_MANIFEST_JSON_H
#define ATTN_RUNTIME_MANIFEST_JSON_H

#include <nlohmann/json.hpp>

#include <string>

namespace attn::detail {

/// Throws c10::Error "<where> field '<field>': expected <what>, found <value>" at the
/// first place where `document` does not fit the schema (attn/manifest.schema.json):
/// the whole manifest's, or with `definition` its $defs entry (e.g. "triton_launch").
void check_against_schema(const nlohmann::json &document, const char *definition,
                          const std::string &where);

} // namespace attn::detail

#endif
