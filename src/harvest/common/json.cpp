#include <fmt/format.h>

#include <vector>

#include <harvest/common/ids.hpp>
#include <harvest/common/json.hpp>

namespace harvest {

namespace {

// nlohmann's DOM builder behind a depth counter: the parser itself is
// iterative, so aborting here at max_depth bounds both stack and memory.
class BoundedSax : public nlohmann::detail::json_sax_dom_parser<Json> {
  using Base = nlohmann::detail::json_sax_dom_parser<Json>;

 public:
  BoundedSax(Json& root, size_t max_depth) : Base(root, false), max_depth_(max_depth) {}

  bool start_object(std::size_t n) {
    if (++depth_ > max_depth_) return too_deep();
    return Base::start_object(n);
  }
  bool end_object() {
    --depth_;
    return Base::end_object();
  }
  bool start_array(std::size_t n) {
    if (++depth_ > max_depth_) return too_deep();
    return Base::start_array(n);
  }
  bool end_array() {
    --depth_;
    return Base::end_array();
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error_ = fmt::format("malformed JSON at byte {}: {}", position, e.what());
    return false;
  }

  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  bool too_deep() {
    error_ = fmt::format("JSON nests deeper than the limit of {} levels", max_depth_);
    return false;
  }
  size_t max_depth_;
  size_t depth_ = 0;
  std::string error_;
};

// Walks `value` without recursion, calling visit(node, depth).
template <typename F>
bool walk(const Json& value, F&& visit) {
  std::vector<std::pair<const Json*, size_t>> stack{{&value, 1}};
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (!visit(*node, depth)) return false;
    if (node->is_structured()) {
      for (const auto& child : *node) stack.emplace_back(&child, depth + 1);
    }
  }
  return true;
}

}  // namespace

Result<Json> parse_json(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return fail(Error::bad_request(fmt::format(
        "JSON text of {} bytes exceeds the limit of {} bytes", text.size(), limits.max_bytes)));
  }
  Json root;
  BoundedSax sax(root, limits.max_depth);
  const bool ok = Json::sax_parse(text.begin(), text.end(), &sax, Json::input_format_t::json, true);
  if (!ok || sax.is_errored()) {
    return fail(Error::bad_request(sax.error().empty() ? "malformed JSON" : sax.error()));
  }
  return root;
}

Status check_json_depth(const Json& value, size_t max_depth) {
  // A scalar is depth 0, like parse_json counts: only containers nest.
  const bool ok = walk(value, [&](const Json& node, size_t depth) {
    return !node.is_structured() || depth <= max_depth;
  });
  if (!ok) {
    return fail(Error::bad_request(
        fmt::format("JSON value nests deeper than the limit of {} levels", max_depth)));
  }
  return {};
}

Status check_json_storable(const Json& value, size_t max_depth) {
  if (auto depth = check_json_depth(value, max_depth); !depth) return depth;
  bool nul = false;
  bool utf8 = true;
  auto check = [&](const std::string& s) {
    if (s.find('\0') != std::string::npos) nul = true;
    if (!is_valid_utf8(s)) utf8 = false;
  };
  walk(value, [&](const Json& node, size_t) {
    if (node.is_string()) check(node.get_ref<const std::string&>());
    if (node.is_object()) {
      for (const auto& item : node.items()) check(item.key());
    }
    return !nul && utf8;
  });
  if (!utf8) {
    return fail(Error::bad_request(
        "JSON value holds a string that is not valid UTF-8, which cannot be stored"));
  }
  if (nul) {
    return fail(Error::bad_request(
        "JSON value holds a NUL character (\\u0000), which cannot be stored; remove it"));
  }
  return {};
}

}  // namespace harvest
