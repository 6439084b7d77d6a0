//===- triton_launch.cpp - reading an artifact's attn_triton_launch -------===//
//
// The Triton backend's launch description is the JSON python -m attn.triton_aot wrote
// (runtime/python/attn/triton_aot.py); attn-compile embeds it unchanged. This reads
// the part the launcher needs into attn::TritonLaunch, with a JSON reader of its own
// (LibTorch ships none) that accepts exactly RFC 8259 JSON.
//
//===----------------------------------------------------------------------===//
#include "internal.h"

#include <cmath>
#include <cstdlib>

namespace attn {
namespace detail {

namespace {

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json *find(const std::string &key) const {
    for (const auto &[name, value] : members)
      if (name == key)
        return &value;
    return nullptr;
  }
};

class JsonReader {
public:
  JsonReader(const std::string &text, const std::string &where) : text_(text), where_(where) {}

  Json document() {
    Json value = parse_value(0);
    skip_space();
    if (pos_ != text_.size())
      fail("the end of the document");
    return value;
  }

private:
  [[noreturn]] void fail(const std::string &expected) {
    TORCH_CHECK(false, where_, ": not valid JSON: expected ", expected, " at byte ", pos_,
                pos_ < text_.size() ? ", found '" + text_.substr(pos_, 16) + "'"
                                    : std::string(", found the end"));
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t'))
      ++pos_;
  }

  bool consume(const char *word) {
    const size_t n = std::char_traits<char>::length(word);
    if (text_.compare(pos_, n, word) != 0)
      return false;
    pos_ += n;
    return true;
  }

  Json parse_value(int depth) {
    if (depth > 64)
      fail("at most 64 nested arrays or objects");
    skip_space();
    Json v;
    if (pos_ >= text_.size())
      fail("a value");
    const char c = text_[pos_];
    if (c == '{') {
      v.kind = Json::Object;
      ++pos_;
      skip_space();
      if (consume("}"))
        return v;
      do {
        skip_space();
        if (pos_ >= text_.size() || text_[pos_] != '"')
          fail("a member name (a string)");
        std::string name = parse_string();
        skip_space();
        if (!consume(":"))
          fail("':'");
        v.members.emplace_back(std::move(name), parse_value(depth + 1));
        skip_space();
      } while (consume(","));
      if (!consume("}"))
        fail("',' or '}'");
    } else if (c == '[') {
      v.kind = Json::Array;
      ++pos_;
      skip_space();
      if (consume("]"))
        return v;
      do
        v.items.push_back(parse_value(depth + 1));
      while ((skip_space(), consume(",")));
      if (!consume("]"))
        fail("',' or ']'");
    } else if (c == '"') {
      v.kind = Json::String;
      v.string = parse_string();
    } else if (consume("true")) {
      v.kind = Json::Bool;
      v.boolean = true;
    } else if (consume("false")) {
      v.kind = Json::Bool;
    } else if (consume("null")) {
      v.kind = Json::Null;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const char *begin = text_.c_str() + pos_;
      char *end = nullptr;
      v.kind = Json::Number;
      v.number = std::strtod(begin, &end);
      if (end == begin)
        fail("a number");
      pos_ += static_cast<size_t>(end - begin);
    } else {
      fail("a value");
    }
    return v;
  }

  std::string parse_string() {
    ++pos_; // the opening quote
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (static_cast<unsigned char>(c) < 0x20)
        fail("no control characters in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size())
        fail("an escape");
      c = text_[pos_++];
      switch (c) {
      case '"': case '\\': case '/': out += c; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        if (pos_ + 4 > text_.size())
          fail("four hex digits after \\u");
        const std::string hex = text_.substr(pos_, 4);
        char *end = nullptr;
        const long code = std::strtol(hex.c_str(), &end, 16);
        if (end != hex.c_str() + 4)
          fail("four hex digits after \\u");
        pos_ += 4;
        // The description's names are ASCII; anything else is kept as UTF-8.
        if (code < 0x80) {
          out += static_cast<char>(code);
        } else if (code < 0x800) {
          out += static_cast<char>(0xC0 | (code >> 6));
          out += static_cast<char>(0x80 | (code & 0x3F));
        } else {
          out += static_cast<char>(0xE0 | (code >> 12));
          out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (code & 0x3F));
        }
        break;
      }
      default:
        fail("an escape among \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u");
      }
    }
    if (pos_ >= text_.size())
      fail("the closing '\"' of a string");
    ++pos_;
    return out;
  }

  const std::string &text_;
  const std::string &where_;
  size_t pos_ = 0;
};

/// Typed access to the members of the description, with errors that say where.
class Fields {
public:
  Fields(const Json &object, std::string where) : object_(object), where_(std::move(where)) {
    TORCH_CHECK(object.kind == Json::Object, where_, " must be a JSON object");
  }
  const Json &get(const std::string &key, Json::Kind kind, const char *what) const {
    const Json *v = object_.find(key);
    TORCH_CHECK(v && v->kind == kind, where_, ".", key, " must be ", what,
                v ? "" : " (it is missing)");
    return *v;
  }
  std::string str(const std::string &key) const { return get(key, Json::String, "a string").string; }
  double number(const std::string &key) const {
    return get(key, Json::Number, "a number").number;
  }
  int64_t integer(const std::string &key, int64_t least) const {
    const double v = number(key);
    TORCH_CHECK(v == std::floor(v) && v >= static_cast<double>(least) && v < 9.0e15, where_, ".",
                key, " must be an integer >= ", least, ", found ", v);
    return static_cast<int64_t>(v);
  }
  const std::vector<Json> &array(const std::string &key) const {
    return get(key, Json::Array, "an array").items;
  }
  const std::string &where() const { return where_; }

private:
  const Json &object_;
  std::string where_;
};

} // namespace

TritonLaunch parse_triton_launch(const std::string &path, const std::string &text) {
  const std::string where = "attn: artifact " + path + ": attn_triton_launch";
  const Json doc = JsonReader(text, where).document();
  const Fields top(doc, where);
  TritonLaunch launch;
  launch.ptxas_version = top.str("ptxas_version");
  const auto &inputs = top.array("inputs");
  for (size_t n = 0; n < inputs.size(); ++n) {
    // [name, kernel argument, element type, extents, learnable]
    const Json &entry = inputs[n];
    const std::string at = where + ".inputs[" + std::to_string(n) + "]";
    TORCH_CHECK(entry.kind == Json::Array && entry.items.size() == 5 &&
                    entry.items[0].kind == Json::String && entry.items[1].kind == Json::String &&
                    entry.items[2].kind == Json::String && entry.items[4].kind == Json::Bool,
                at, " must be [name, argument, element type, extents, learnable]");
    launch.inputs.push_back(TritonInput{entry.items[0].string, entry.items[1].string,
                                        entry.items[2].string, entry.items[4].boolean});
  }
  const auto &images = top.array("images");
  for (size_t n = 0; n < images.size(); ++n) {
    const Fields f(images[n], where + ".images[" + std::to_string(n) + "]");
    TritonImage image;
    image.symbol = f.str("symbol");
    image.chip = f.str("chip");
    image.dtype = f.str("dtype");
    image.head_dim = f.integer("head_dim", 1);
    image.variant = f.str("variant");
    image.kernel = f.str("kernel");
    image.function = f.str("function");
    const auto &params = f.array("parameters");
    for (size_t i = 0; i < params.size(); ++i) {
      const Json &p = params[i];
      TORCH_CHECK(p.kind == Json::Array && p.items.size() == 2 &&
                      p.items[0].kind == Json::String && p.items[1].kind == Json::String,
                  f.where(), ".parameters[", i, "] must be [name, Triton type]");
      image.parameters.emplace_back(p.items[0].string, p.items[1].string);
    }
    image.block_m = f.integer("block_m", 1);
    image.block_n = f.integer("block_n", 1);
    image.num_warps = f.integer("num_warps", 1);
    image.shared_bytes = f.integer("shared_bytes", 0);
    image.global_scratch_size = f.integer("global_scratch_size", 0);
    image.global_scratch_align = f.integer("global_scratch_align", 1);
    image.profile_scratch_size = f.integer("profile_scratch_size", 0);
    image.grid = f.str("grid");
    image.scale = f.number("scale");
    launch.images.push_back(std::move(image));
  }
  return launch;
}

} // namespace detail
} // namespace attn
