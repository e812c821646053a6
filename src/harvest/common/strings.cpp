#include <chrono>
#include <regex>

#include <harvest/common/strings.hpp>

namespace harvest {

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(kSpace);
  return s.substr(first, last - first + 1);
}

std::vector<std::string> split_list(std::string_view list, char separator) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(separator, pos);
    if (end == std::string_view::npos) end = list.size();
    if (auto item = trim(list.substr(pos, end - pos)); !item.empty()) out.emplace_back(item);
    pos = end + 1;
  }
  return out;
}

bool is_timestamp(const std::string& s) {
  static const std::regex kShape(
      R"(^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,6})?([Zz]|[+-](\d{2}):(\d{2}))$)");
  std::smatch m;
  if (!std::regex_match(s, m, kShape)) return false;
  const auto num = [&](int g) { return std::stoi(m[g].str()); };
  const std::chrono::year_month_day date{std::chrono::year(num(1)),
                                         std::chrono::month(static_cast<unsigned>(num(2))),
                                         std::chrono::day(static_cast<unsigned>(num(3)))};
  if (!date.ok() || num(1) < 1) return false;
  if (num(4) > 23 || num(5) > 59 || num(6) > 59) return false;
  if (m[9].matched && (num(9) > 23 || num(10) > 59)) return false;
  return true;
}

}  // namespace harvest
