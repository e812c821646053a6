// Test support: a strict reader for the block-style YAML subset the
// project's hand-written documents use (docs/openapi.yaml,
// deploy/prometheus/alerts.yml), so tests can check them without a YAML
// library. Understood: block mappings and `- ` sequences indented with
// spaces, plain, 'single' and "double" quoted scalars, `|`/`>` block scalars
// (as text), flow lists of scalars `[a, b]`, `[]`, `{}`, and comments.
// Anything else (anchors, tags, flow mappings with members, tabs, a plain
// scalar holding ": ", duplicate keys) throws std::runtime_error naming the
// line, so a document drifting out of the subset fails its test loudly
// rather than being misread.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace harvest::testing {

class BlockYaml {
 public:
  // Parses `text`; throws std::runtime_error("line N: ...").
  static nlohmann::json parse(const std::string& text) {
    BlockYaml y(text);
    if (y.lines_.empty()) return nlohmann::json();
    nlohmann::json out = y.node(y.lines_.front().indent);
    if (y.at_ < y.lines_.size()) y.error(y.lines_[y.at_], "unexpected indentation");
    return out;
  }

  static nlohmann::json parse_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    return parse(ss.str());
  }

 private:
  struct Line {
    size_t number;     // 1-based, in the source
    size_t indent;     // leading spaces
    std::string text;  // without indentation and comment
    std::string raw;   // the whole source line (block scalars)
  };

  explicit BlockYaml(const std::string& text) {
    std::istringstream in(text);
    std::string raw;
    size_t n = 0;
    while (std::getline(in, raw)) {
      ++n;
      if (!raw.empty() && raw.back() == '\r') raw.pop_back();
      raw_.push_back(raw);
      size_t indent = raw.find_first_not_of(' ');
      if (indent == std::string::npos) continue;
      if (raw[indent] == '\t') throw std::runtime_error(where(n) + "tab in indentation");
      std::string body = strip_comment(raw.substr(indent));
      if (body.empty()) continue;
      if (body == "---" || body.starts_with("%")) {
        throw std::runtime_error(where(n) + "directives and document markers are not supported");
      }
      lines_.push_back(Line{n, indent, body, raw});
    }
  }

  static std::string where(size_t n) { return "line " + std::to_string(n) + ": "; }
  [[noreturn]] static void error(const Line& l, const std::string& what) {
    throw std::runtime_error(where(l.number) + what + " in '" + l.text + "'");
  }

  // Drops a comment: '#' at the start or after a space, outside quotes.
  static std::string strip_comment(const std::string& s) {
    char quote = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (quote) {
        if (c == '\\' && quote == '"') {
          ++i;
        } else if (c == quote) {
          quote = 0;
        }
      } else if ((c == '"' || c == '\'') && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '[' ||
                                             s[i - 1] == ',' || s[i - 1] == '-')) {
        quote = c;
      } else if (c == '#' && (i == 0 || s[i - 1] == ' ')) {
        std::string out = s.substr(0, i);
        while (!out.empty() && out.back() == ' ') out.pop_back();
        return out;
      }
    }
    std::string out = s;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  }

  static bool is_seq_item(const std::string& t) { return t == "-" || t.starts_with("- "); }

  // The node whose lines start at lines_[at_] with exactly `indent`.
  nlohmann::json node(size_t indent) {
    const Line& first = lines_[at_];
    if (first.indent != indent) error(first, "unexpected indentation");
    return is_seq_item(first.text) ? sequence(indent) : mapping(indent);
  }

  nlohmann::json sequence(size_t indent) {
    nlohmann::json out = nlohmann::json::array();
    while (at_ < lines_.size() && lines_[at_].indent == indent && is_seq_item(lines_[at_].text)) {
      Line& l = lines_[at_];
      if (l.text == "-") {
        ++at_;
        if (at_ >= lines_.size() || lines_[at_].indent <= indent) error(l, "empty sequence item");
        out.push_back(node(lines_[at_].indent));
        continue;
      }
      // "- rest": read rest as if it stood on its own line two columns in.
      std::string rest = l.text.substr(2);
      size_t skip = rest.find_first_not_of(' ');
      l.indent = indent + 2 + skip;
      l.text = rest.substr(skip);
      if (is_seq_item(l.text)) error(l, "nested inline sequences are not supported");
      if (find_key_end(l).has_value()) {
        out.push_back(mapping(l.indent));
      } else {
        ++at_;
        out.push_back(scalar_value(l, l.text, indent));
      }
    }
    return out;
  }

  // Where the key of `l` ends (index of its ':'), if the line is `key:` or
  // `key: value`.
  static std::optional<size_t> find_key_end(const Line& l) {
    const std::string& t = l.text;
    if (t.empty()) return std::nullopt;
    if (t[0] == '"' || t[0] == '\'') {
      size_t close = closing_quote(t, 0);
      if (close == std::string::npos) return std::nullopt;
      if (close + 1 < t.size() && t[close + 1] == ':' &&
          (close + 2 == t.size() || t[close + 2] == ' ')) {
        return close + 1;
      }
      return std::nullopt;
    }
    if (t[0] == '[' || t[0] == '{') return std::nullopt;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == ':' && (i + 1 == t.size() || t[i + 1] == ' ')) return i;
    }
    return std::nullopt;
  }

  static size_t closing_quote(const std::string& t, size_t open) {
    char q = t[open];
    for (size_t i = open + 1; i < t.size(); ++i) {
      if (q == '"' && t[i] == '\\') {
        ++i;
      } else if (t[i] == q) {
        if (q == '\'' && i + 1 < t.size() && t[i + 1] == '\'') {
          ++i;
          continue;
        }
        return i;
      }
    }
    return std::string::npos;
  }

  nlohmann::json mapping(size_t indent) {
    nlohmann::json out = nlohmann::json::object();
    while (at_ < lines_.size() && lines_[at_].indent == indent) {
      const Line& l = lines_[at_];
      if (is_seq_item(l.text)) error(l, "a sequence item where a mapping key was expected");
      auto colon = find_key_end(l);
      if (!colon) error(l, "expected 'key: value'");
      std::string key_text = l.text.substr(0, *colon);
      std::string key =
          (key_text[0] == '"' || key_text[0] == '\'') ? unquote(l, key_text) : key_text;
      if (out.contains(key)) error(l, "duplicate key '" + key + "'");
      std::string rest = l.text.substr(*colon + 1);
      rest.erase(0, rest.find_first_not_of(' ') == std::string::npos ? rest.size()
                                                                     : rest.find_first_not_of(' '));
      ++at_;
      if (rest.empty()) {
        // A nested block, more indented (a sequence may sit at the key's
        // own indentation), or null.
        if (at_ < lines_.size() &&
            (lines_[at_].indent > indent ||
             (lines_[at_].indent == indent && is_seq_item(lines_[at_].text)))) {
          out[key] = node(lines_[at_].indent);
        } else {
          out[key] = nullptr;
        }
      } else {
        out[key] = scalar_value(l, rest, indent);
      }
    }
    return out;
  }

  // The value after a key or a "- ": a scalar, a flow list, {} or a block
  // scalar whose text is the following lines indented past `parent`.
  nlohmann::json scalar_value(const Line& l, const std::string& v, size_t parent) {
    if (v == "|" || v == ">" || v == "|-" || v == ">-") return block_scalar(l, v, parent);
    if (v == "{}") return nlohmann::json::object();
    if (v[0] == '{') error(l, "flow mappings with members are not supported");
    if (v[0] == '[') {
      if (v.back() != ']') error(l, "unterminated flow list");
      nlohmann::json list = nlohmann::json::array();
      std::string inner = v.substr(1, v.size() - 2);
      if (inner.find_first_not_of(' ') == std::string::npos) return list;
      if (inner.find_first_of("[]{}") != std::string::npos) error(l, "nested flow collections");
      std::stringstream ss(inner);
      std::string item;
      while (std::getline(ss, item, ',')) {
        size_t b = item.find_first_not_of(' ');
        size_t e = item.find_last_not_of(' ');
        if (b == std::string::npos) error(l, "empty flow list item");
        list.push_back(scalar(l, item.substr(b, e - b + 1)));
      }
      return list;
    }
    return scalar(l, v);
  }

  nlohmann::json block_scalar(const Line& l, const std::string& style, size_t parent) {
    // The text is every source line after `l` indented past `parent` (blank
    // lines included) up to the next line that is not.
    std::vector<std::string> text;
    size_t src = l.number;  // index of the next source line in raw_
    size_t block_indent = std::string::npos;
    while (src < raw_.size()) {
      const std::string& r = raw_[src];
      size_t ind = r.find_first_not_of(' ');
      if (ind == std::string::npos) {
        text.emplace_back();
        ++src;
        continue;
      }
      if (ind <= parent) break;
      if (block_indent == std::string::npos) block_indent = ind;
      if (ind < block_indent) throw std::runtime_error(where(src + 1) + "block scalar dedent");
      text.push_back(r.substr(block_indent));
      ++src;
    }
    while (!text.empty() && text.back().empty()) text.pop_back();
    if (text.empty()) error(l, "empty block scalar");
    // Skip the parsed lines that belong to the block.
    while (at_ < lines_.size() && lines_[at_].number <= src) ++at_;
    std::string out;
    const bool folded = style[0] == '>';
    for (size_t i = 0; i < text.size(); ++i) {
      if (i > 0) out += (folded && !text[i].empty() && !text[i - 1].empty()) ? " " : "\n";
      out += text[i];
    }
    if (style.size() == 1) out += "\n";
    return out;
  }

  static std::string unquote(const Line& l, const std::string& v) {
    size_t close = closing_quote(v, 0);
    if (close != v.size() - 1) error(l, "text after a quoted scalar");
    std::string out;
    for (size_t i = 1; i < close; ++i) {
      char c = v[i];
      if (v[0] == '"' && c == '\\') {
        char e = v[++i];
        out.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
      } else if (v[0] == '\'' && c == '\'') {
        out.push_back(v[++i]);
      } else {
        out.push_back(c);
      }
    }
    return out;
  }

  static nlohmann::json scalar(const Line& l, const std::string& v) {
    if (v[0] == '"' || v[0] == '\'') return unquote(l, v);
    if (std::string_view("&*!|>%@`").find(v[0]) != std::string_view::npos) {
      error(l, "unsupported YAML indicator '" + std::string(1, v[0]) + "'");
    }
    if (v.find(": ") != std::string::npos || v.ends_with(":")) {
      error(l, "a plain scalar may not hold ': ' (quote it)");
    }
    if (v == "true") return true;
    if (v == "false") return false;
    if (v == "null" || v == "~") return nullptr;
    if (v.find_first_not_of("-0123456789") == std::string::npos && v != "-") {
      return std::stoll(v);
    }
    return v;
  }

  std::vector<std::string> raw_;
  std::vector<Line> lines_;
  size_t at_ = 0;
};

}  // namespace harvest::testing
