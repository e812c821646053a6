#include <re2/re2.h>

#include <chrono>

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
  static const RE2 kShape(
      R"((\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,6})?(?:[Zz]|[+-](\d{2}):(\d{2})))");
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  std::string off_h, off_m;  // empty for Z
  if (!RE2::FullMatch(s, kShape, &year, &month, &day, &hour, &minute, &second, &off_h, &off_m)) {
    return false;
  }
  const std::chrono::year_month_day date{std::chrono::year(year),
                                         std::chrono::month(static_cast<unsigned>(month)),
                                         std::chrono::day(static_cast<unsigned>(day))};
  if (!date.ok() || year < 1) return false;
  if (hour > 23 || minute > 59 || second > 59) return false;
  if (!off_h.empty() && (std::stoi(off_h) > 23 || std::stoi(off_m) > 59)) return false;
  return true;
}

}  // namespace harvest
