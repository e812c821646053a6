#include <regex>

#include <harvest/common/redact.hpp>

namespace harvest {

namespace {

// Compiled once; std::regex objects are safe to share for matching.
const std::regex& userinfo() {
  static const std::regex re(R"(([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@?#]*:)([^@\s/?#]*)@)");
  return re;
}
const std::regex& keyed() {
  static const std::regex re(
      R"(\b(password|sslpassword|aws_secret_access_key|aws_session_token|secret_access_key|)"
      R"(session_token|secretaccesskey|sessiontoken|x-amz-security-token|x-amz-signature|)"
      R"(signature|api_token)("?\s*[=:]\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s&,;'"]+))",
      std::regex::icase);
  return re;
}
const std::regex& bearer() {
  static const std::regex re(R"(\b(bearer\s+)[A-Za-z0-9._~+/=-]+)", std::regex::icase);
  return re;
}

}  // namespace

std::string redact_secrets(std::string_view text) {
  std::string out(text);
  out = std::regex_replace(out, userinfo(), "$1***@");
  out = std::regex_replace(out, keyed(), "$1$2***");
  out = std::regex_replace(out, bearer(), "$1***");
  return out;
}

}  // namespace harvest
