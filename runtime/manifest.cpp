//===- manifest.cpp - the runtime's reader of an artifact's manifest ------===//
//
// The manifest is JSON (lib/Codegen/Manifest.cpp writes it) with one schema,
// runtime/python/attn/manifest.schema.json, compiled in as kManifestSchema. This
// reads it with nlohmann-json: the ABI version first, then the whole document against
// the schema, then what a schema cannot say (distinct names, the cuda section exactly
// with the cuda device). The Python reader (attn/manifest.py) checks the same schema
// with the same rules and messages.
//
//===----------------------------------------------------------------------===//
#include "internal.h"
#include "manifest_json.h"

#include <algorithm>
#include <regex>
#include <set>

namespace attn {
namespace detail {

namespace {

using Json = nlohmann::json;

/// A value that does not fit the schema: its field ("inputs[0].element"), what the
/// schema expected there and what was found.
struct Mismatch {
  std::string field, expected, found;
};

std::string type_of(const Json &v) {
  if (v.is_number_integer())
    return "integer";
  if (v.is_number())
    return "number";
  if (v.is_string())
    return "string";
  if (v.is_boolean())
    return "boolean";
  if (v.is_array())
    return "array";
  if (v.is_object())
    return "object";
  return "null";
}

bool has_type(const Json &v, const std::string &type) {
  const std::string actual = type_of(v);
  return actual == type || (type == "number" && actual == "integer");
}

std::string shown(const Json &v) {
  std::string text = v.dump();
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

std::string joined(const Json &items, const char *last) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i)
    text += (i == 0 ? "" : i + 1 == items.size() ? last : ", ") +
            (items[i].is_string() ? items[i].get<std::string>() : items[i].dump());
  return text;
}

/// What `schema` asks of a value, in words: "an integer >= 1", "one of f32, f64".
std::string describe(const Json &schema) {
  if (schema.contains("anyOf")) {
    std::string text;
    for (const Json &option : schema["anyOf"])
      text += (text.empty() ? "" : ", or ") + describe(option);
    return text;
  }
  if (schema.contains("const"))
    return shown(schema["const"]);
  if (schema.contains("enum"))
    return "one of " + joined(schema["enum"], ", ");
  Json types = schema.value("type", Json::array());
  if (types.is_string())
    types = Json::array({types});
  std::string text;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string type = types[i].get<std::string>();
    text += (i ? " or " : "") + std::string(type == "integer" || type == "array" ||
                                                    type == "object"
                                                ? "an "
                                            : type == "null" ? ""
                                                             : "a ") +
            type;
  }
  if (schema.contains("minimum"))
    text += " >= " + schema["minimum"].dump();
  if (schema.contains("pattern"))
    text += " matching " + schema["pattern"].get<std::string>();
  return text;
}

std::string item_field(const std::string &field, size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

std::string member_field(const std::string &field, const std::string &name) {
  return field.empty() ? name : field + "." + name;
}

/// The first place where `value` (at `field`) does not fit `schema`, if any.
std::optional<Mismatch> check(const Json &value, const Json &schema, const std::string &field) {
  auto mismatch = [&](const std::string &expected) {
    return Mismatch{field, expected, shown(value)};
  };
  if (schema.contains("anyOf")) {
    for (const Json &option : schema["anyOf"])
      if (!check(value, option, field))
        return std::nullopt;
    // Of the options of the value's type, the first one's complaint is the precise one.
    for (const Json &option : schema["anyOf"])
      if (option.contains("type") && has_type(value, option["type"].get<std::string>()))
        return check(value, option, field);
    return mismatch(describe(schema));
  }
  if (schema.contains("type")) {
    Json types = schema["type"];
    if (types.is_string())
      types = Json::array({types});
    if (std::none_of(types.begin(), types.end(),
                     [&](const Json &t) { return has_type(value, t.get<std::string>()); }))
      return mismatch(describe(schema));
  }
  if (schema.contains("const") && value != schema["const"])
    return mismatch(shown(schema["const"]));
  if (schema.contains("enum")) {
    const Json &options = schema["enum"];
    if (std::find(options.begin(), options.end(), value) == options.end())
      return mismatch("one of " + joined(options, ", "));
  }
  if (schema.contains("minimum") && value.is_number() &&
      value.get<double>() < schema["minimum"].get<double>())
    return mismatch(describe(schema));
  if (schema.contains("pattern") && value.is_string() &&
      !std::regex_search(value.get<std::string>(),
                         std::regex(schema["pattern"].get<std::string>())))
    return mismatch(describe(schema));
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>())
      return mismatch("at least " + schema["minItems"].dump() + " items");
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>())
      return mismatch("at most " + schema["maxItems"].dump() + " items");
    for (size_t i = 0; i < value.size(); ++i) {
      if (schema.contains("prefixItems") && i < schema["prefixItems"].size())
        if (auto m = check(value[i], schema["prefixItems"][i], item_field(field, i)))
          return m;
      if (schema.contains("items"))
        if (auto m = check(value[i], schema["items"], item_field(field, i)))
          return m;
      if (schema.value("uniqueItems", false))
        for (size_t j = 0; j < i; ++j)
          if (value[j] == value[i])
            return Mismatch{item_field(field, i), "distinct items (it repeats " +
                                                      item_field(field, j) + ")",
                            shown(value[i])};
    }
  }
  if (value.is_object()) {
    for (const Json &name : schema.value("required", Json::array()))
      if (!value.contains(name.get<std::string>()))
        return Mismatch{member_field(field, name.get<std::string>()),
                        describe(schema["properties"][name.get<std::string>()]), "nothing"};
    // Fields the schema does not name are ignored: a later compiler may add
    // informational ones without changing the ABI version.
    const Json properties = schema.value("properties", Json::object());
    for (const auto &[name, member] : properties.items())
      if (value.contains(name))
        if (auto m = check(value[name], member, member_field(field, name)))
          return m;
  }
  return std::nullopt;
}

const Json &schema() {
  static const Json parsed = Json::parse(kManifestSchema);
  return parsed;
}

} // namespace

void check_against_schema(const nlohmann::json &document, const char *definition,
                          const std::string &where) {
  const Json &part = definition ? schema()["$defs"][definition] : schema();
  if (auto m = check(document, part, ""))
    TORCH_CHECK(false, where, " field '", m->field, "': expected ", m->expected, ", found ",
                m->found, " (schema: attn/manifest.schema.json)");
}

int manifest_schema_abi() { return schema()["properties"]["abi"]["const"].get<int>(); }

Manifest parse_manifest(const std::string &path, const std::string &text) {
  const std::string artifact = "attn: artifact " + path + ": ";
  auto refuse = [&](const std::string &field, const std::string &expected,
                    const std::string &found) {
    TORCH_CHECK(false, artifact, "manifest field '", field, "': expected ", expected, ", found ",
                found, " (schema: attn/manifest.schema.json)");
  };
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text.compare(first, 8, "attn-abi") == 0)
    TORCH_CHECK(false, artifact, "ABI version mismatch: its manifest is the text format of an ",
                "older attn-compile ('", text.substr(first, text.find('\n', first) - first),
                "'), this runtime reads JSON manifests of ABI ", ATTN_ABI_VERSION,
                "; recompile the artifact with an attn-compile matching this runtime");
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error &e) {
    TORCH_CHECK(false, artifact, "its manifest is not valid JSON (", e.what(),
                "); expected the JSON object attn-compile writes");
  }
  if (!doc.is_object())
    refuse("(the document)", "an object", shown(doc));
  // The ABI version first, so that an artifact of another ABI is reported as such
  // even if the rest of its manifest follows another schema.
  const std::string abi = describe(schema()["properties"]["abi"]);
  if (!doc.contains("abi"))
    refuse("abi", abi, "nothing");
  if (!doc["abi"].is_number_integer())
    refuse("abi", abi, shown(doc["abi"]));
  TORCH_CHECK(doc["abi"].get<int64_t>() == ATTN_ABI_VERSION, artifact,
              "ABI version mismatch: manifest field 'abi': expected ", ATTN_ABI_VERSION,
              " (ATTN_ABI_VERSION of this runtime), found ", doc["abi"].dump(),
              "; recompile the artifact with an attn-compile matching this runtime");
  check_against_schema(doc, nullptr, artifact + "manifest");

  Manifest m;
  m.abi_version = doc["abi"].get<int>();
  m.kernel = doc["kernel"].get<std::string>();
  m.normalizer = doc["normalizer"].get<std::string>();
  m.algorithm = doc["algorithm"].get<std::string>();
  {
    const Json &section = doc["splits"];
    auto split = [](const Json &name) {
      return name == "whole" ? SliceSplit::Whole
             : name == "rows" ? SliceSplit::Rows
                              : SliceSplit::KeyChunks; // the schema's enum
    };
    m.splits.forward = split(section["forward"]);
    m.splits.backward = split(section["backward"]);
    m.splits.partial_calls = section["partial_calls"].get<bool>();
    if (m.splits.partial_calls && (m.splits.forward != SliceSplit::KeyChunks ||
                                   m.splits.backward != SliceSplit::KeyChunks))
      refuse("splits.partial_calls",
             "false unless splits.forward and splits.backward are key_chunks (a key block's "
             "partial state is a key chunk's)",
             "true with forward " + section["forward"].dump() + ", backward " +
                 section["backward"].dump());
  }
  m.denominator = doc["denominator"].get<std::string>();
  m.mask = doc["mask"].get<std::string>();
  std::set<std::string> names;
  for (size_t i = 0; i < doc["params"].size(); ++i) {
    const Json &param = doc["params"][i];
    const std::string field = item_field("params", i);
    const std::string name = param["name"].get<std::string>();
    if (!names.insert(name).second)
      refuse(field + ".name", "distinct parameter names", shown(param["name"]) + " twice");
    const auto shape = param["shape"].get<std::vector<int64_t>>();
    const bool identity = param["init"].is_string();
    if (identity && shape.size() != 2)
      refuse(field + ".init", "a number (identity is for 2-D weights only)",
             shown(param["init"]) + " on shape " + param["shape"].dump());
    m.param_names.push_back(name);
    m.param_inits.push_back(identity ? 0.0 : param["init"].get<double>());
    m.param_shapes.push_back(shape);
    m.param_identity.push_back(identity);
  }
  m.head_dim = doc.value("head_dim", int64_t{0});
  for (size_t i = 0; i < doc["inputs"].size(); ++i) {
    const Json &entry = doc["inputs"][i];
    const std::string field = item_field("inputs", i);
    TensorInput input;
    input.name = entry["name"].get<std::string>();
    input.element = entry["element"].get<std::string>();
    for (const Json &extent : entry["shape"]) {
      const bool named = extent.is_string() && extent != "?";
      input.shape.push_back(extent.is_number() ? extent.get<int64_t>() : -1);
      input.dims.push_back(named ? extent.get<std::string>() : "");
    }
    input.learnable = entry["learnable"].get<bool>();
    if (input.learnable && input.element != "float")
      refuse(field + ".learnable", "false for an " + input.element + " input (only float inputs "
             "are learnable)", "true");
    if (entry.contains("init"))
      input.init = entry["init"].get<double>();
    for (const TensorInput &earlier : m.inputs)
      if (earlier.name == input.name)
        refuse(field + ".name", "distinct input names", shown(entry["name"]) + " twice");
    m.inputs.push_back(std::move(input));
  }
  m.dtypes = doc["dtypes"].get<std::vector<std::string>>();
  m.devices = doc["devices"].get<std::vector<std::string>>();
  if (doc.contains("cpu_cost")) {
    for (size_t i = 0; i < doc["cpu_cost"].size(); ++i) {
      const Json &entry = doc["cpu_cost"][i];
      CpuPairCost cost{entry["dtype"].get<std::string>(), entry.value("head_dim", int64_t{0}),
                       entry.value("d", int64_t{0}), entry["forward"].get<double>(),
                       entry["backward"].get<double>()};
      if ((cost.head_dim == 0) != (cost.d == 0))
        refuse(item_field("cpu_cost", i), "head_dim and d together (a tiled schedule) or neither",
               shown(entry));
      for (const CpuPairCost &earlier : m.cpu_cost)
        if (earlier.dtype == cost.dtype && earlier.head_dim == cost.head_dim)
          refuse(item_field("cpu_cost", i),
                 "one entry per dtype and head dim (none: the generic loops)",
                 shown(entry) + ", whose dtype and head dim an earlier entry has");
      m.cpu_cost.push_back(std::move(cost));
    }
    // The entry without a head dim is what every call that no tiled schedule takes costs.
    for (const std::string &dtype : m.dtypes)
      if (std::none_of(m.cpu_cost.begin(), m.cpu_cost.end(), [&](const CpuPairCost &cost) {
            return cost.dtype == dtype && cost.head_dim == 0;
          }))
        refuse("cpu_cost", "an entry without head_dim for every dtype of dtypes",
               "none for " + dtype + " in " + shown(doc["cpu_cost"]));
  }
  const bool cuda = std::find(m.devices.begin(), m.devices.end(), "cuda") != m.devices.end();
  if (cuda != doc.contains("cuda"))
    refuse("cuda",
           cuda ? "the GPU kernels' section, as devices lists cuda"
                : "no GPU kernels' section, as devices does not list cuda",
           cuda ? "nothing" : shown(doc["cuda"]));
  if (cuda) {
    const Json &section = doc["cuda"];
    m.cuda_targets = section["targets"].get<std::vector<std::string>>();
    for (size_t i = 0; i < m.cuda_targets.size(); ++i)
      if (!parse_cuda_target(m.cuda_targets[i]))
        refuse(item_field("cuda.targets", i), "a CUDA target sm_<major><minor> (e.g. sm_80)",
               shown(section["targets"][i]));
    m.triton = true;
    for (const Json &kernel : section["kernels"])
      m.triton_kernels.emplace_back(kernel["dtype"].get<std::string>(),
                                    kernel["head_dim"].get<int64_t>());
  }
  return m;
}

} // namespace detail
} // namespace attn
