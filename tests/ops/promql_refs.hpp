// Test support: the metric names and label names a PromQL expression uses,
// read with a small tokenizer (enough for the project's dashboard and alert
// rules, strict about what it does not understand) so tests can check them
// against a real /metrics exposition.
#pragma once

#include <cctype>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

namespace harvest::testing {

struct PromqlRefs {
  // Metric name → label names its `{...}` matchers use.
  std::map<std::string, std::set<std::string>> metrics;
  // Label names in by/without/on/ignoring/group_left/group_right lists.
  std::set<std::string> grouping;
  // Whether any aggregation operator appears (then the result carries only
  // the grouping labels).
  bool aggregates = false;
};

// Throws std::invalid_argument naming what it cannot read.
inline PromqlRefs promql_refs(std::string_view e) {
  static const std::set<std::string, std::less<>> kAggregations = {
      "sum",   "min",          "max",     "avg",  "group",    "stddev", "stdvar",
      "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"};
  static const std::set<std::string, std::less<>> kKeywords = {"and",    "or",   "unless",
                                                               "offset", "bool", "atan2"};
  static const std::set<std::string, std::less<>> kGrouping = {
      "by", "without", "on", "ignoring", "group_left", "group_right"};
  auto fail = [&](const std::string& what, size_t at) {
    throw std::invalid_argument(what + " at " + std::to_string(at) + " in: " + std::string(e));
  };
  auto ident_start = [](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  };
  auto ident_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  };
  auto skip_space = [&](size_t i) {
    while (i < e.size() && std::isspace(static_cast<unsigned char>(e[i]))) ++i;
    return i;
  };
  auto skip_string = [&](size_t i) {
    const char q = e[i];
    for (++i; i < e.size(); ++i) {
      if (e[i] == '\\' && q != '`') {
        ++i;
      } else if (e[i] == q) {
        return i + 1;
      }
    }
    fail("unterminated string", i);
    return i;
  };
  auto read_ident = [&](size_t& i) {
    size_t start = i;
    while (i < e.size() && ident_char(e[i])) ++i;
    return std::string(e.substr(start, i - start));
  };

  PromqlRefs out;
  std::string last_metric;  // the selector a following `{` belongs to
  size_t i = 0;
  while ((i = skip_space(i)) < e.size()) {
    const char c = e[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = skip_string(i);
      last_metric.clear();
    } else if (c == '[') {
      // A range or subquery: durations and Grafana variables only.
      size_t close = e.find(']', i);
      if (close == std::string_view::npos) fail("unterminated range", i);
      i = close + 1;
    } else if (c == '{') {
      if (last_metric.empty()) fail("a selector without a metric name", i);
      ++i;
      while ((i = skip_space(i)) < e.size() && e[i] != '}') {
        if (!ident_start(e[i])) fail("expected a label name", i);
        std::string label = read_ident(i);
        out.metrics[last_metric].insert(label);
        i = skip_space(i);
        if (e.substr(i, 2) == "=~" || e.substr(i, 2) == "!~" || e.substr(i, 2) == "!=") {
          i += 2;
        } else if (i < e.size() && e[i] == '=') {
          ++i;
        } else {
          fail("expected a matcher operator", i);
        }
        i = skip_space(i);
        if (i >= e.size() || (e[i] != '"' && e[i] != '\'' && e[i] != '`')) {
          fail("expected a quoted label value", i);
        }
        i = skip_string(i);
        i = skip_space(i);
        if (i < e.size() && e[i] == ',') ++i;
      }
      if (i >= e.size()) fail("unterminated matcher list", i);
      ++i;
      last_metric.clear();
    } else if (c == '$') {
      // A Grafana variable ($source, ${source}, $__rate_interval).
      ++i;
      if (i < e.size() && e[i] == '{') {
        size_t close = e.find('}', i);
        if (close == std::string_view::npos) fail("unterminated variable", i);
        i = close + 1;
      } else {
        (void)read_ident(i);
      }
      last_metric.clear();
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < e.size() &&
                std::isdigit(static_cast<unsigned char>(e[i + 1])))) {
      // A number or a duration (15m, 1h30m).
      while (i < e.size() && (std::isalnum(static_cast<unsigned char>(e[i])) || e[i] == '.')) ++i;
      last_metric.clear();
    } else if (ident_start(c)) {
      std::string word = read_ident(i);
      size_t next = skip_space(i);
      const bool call = next < e.size() && e[next] == '(';
      last_metric.clear();
      if (kGrouping.contains(word)) {
        if (!call) fail("expected a label list after '" + word + "'", next);
        i = next + 1;
        while ((i = skip_space(i)) < e.size() && e[i] != ')') {
          if (!ident_start(e[i])) fail("expected a label name", i);
          out.grouping.insert(read_ident(i));
          i = skip_space(i);
          if (i < e.size() && e[i] == ',') ++i;
        }
        if (i >= e.size()) fail("unterminated label list", i);
        ++i;
      } else if (kAggregations.contains(word)) {
        out.aggregates = true;
      } else if (kKeywords.contains(word) || call) {
        // an operator keyword, or a function
      } else {
        out.metrics[word];  // a metric selector
        last_metric = word;
      }
    } else if (std::string_view("()+-*/%^=!<>,").find(c) != std::string_view::npos) {
      ++i;
      last_metric.clear();
    } else {
      fail(std::string("unexpected character '") + c + "'", i);
    }
  }
  return out;
}

}  // namespace harvest::testing
