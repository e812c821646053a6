#include <re2/re2.h>

#include <harvest/common/redact.hpp>

namespace harvest {

namespace {

// RE2, not the standard library's regex: every log line passes through here, and a line can
// carry text from a broker or a workflow's error. libstdc++'s matcher
// recurses once per character of a repeated group, so a "password=" or
// "Bearer " followed by some 100 KB without a space overflowed the stack and
// took the process down; RE2 runs in time and memory linear in the input,
// with no recursion, and its compiled patterns are safe to share across
// threads. Latin-1 mode: the patterns are ASCII, and the input is matched
// byte by byte whatever its encoding.
RE2::Options options(bool case_sensitive) {
  RE2::Options o;
  o.set_encoding(RE2::Options::EncodingLatin1);
  o.set_case_sensitive(case_sensitive);
  o.set_log_errors(false);
  return o;
}

const RE2& userinfo() {
  static const RE2 re(R"(([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@?#]*:)([^@\s/?#]*)@)", options(true));
  return re;
}
const RE2& keyed() {
  static const RE2 re(
      R"(\b(password|sslpassword|aws_secret_access_key|aws_session_token|secret_access_key|)"
      R"(session_token|secretaccesskey|sessiontoken|x-amz-security-token|x-amz-signature|)"
      R"(signature|api_token)("?\s*[=:]\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s&,;'"]+))",
      options(false));
  return re;
}
const RE2& bearer() {
  static const RE2 re(R"(\b(bearer\s+)[A-Za-z0-9._~+/=-]+)", options(false));
  return re;
}

}  // namespace

std::string redact_secrets(std::string_view text) {
  std::string out(text);
  RE2::GlobalReplace(&out, userinfo(), R"(\1***@)");
  RE2::GlobalReplace(&out, keyed(), R"(\1\2***)");
  RE2::GlobalReplace(&out, bearer(), R"(\1***)");
  return out;
}

}  // namespace harvest
