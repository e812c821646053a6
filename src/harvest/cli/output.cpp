#include <algorithm>
#include <cstdlib>

#include <harvest/cli/output.hpp>

namespace harvest::cli {

void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) {
      s += cells[c];
      if (c + 1 < cells.size()) s += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    out << s << "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);
}

std::string or_dash(const std::optional<std::string>& v) {
  return v && !v->empty() ? *v : "-";
}

std::string one_line(std::string s, size_t max) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

int fail_with(std::ostream& err, const Error& e) {
  err << "error: " << one_line(e.message, 2000) << "\n";
  return 1;
}

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::move(fallback);
}

std::string default_requester() {
  const char* user = std::getenv("USER");
  return std::string("cli:") + (user && *user ? user : "unknown");
}

}  // namespace harvest::cli
