// Absolute http(s) URLs as harvest's own clients need them: the SQS client
// (endpoints, signing, the container credentials endpoint) and
// `harvest connectors status` (metrics URLs). Not a general URI parser.
#pragma once

#include <string>
#include <string_view>

#include <harvest/common/error.hpp>

namespace harvest {

struct Url {
  std::string scheme;         // "http" or "https", lower-case
  std::string host;           // without brackets for IPv6 literals
  std::string port;           // "" when the URL names none
  std::string path;           // "/" when the URL has none; fragment dropped
  std::string query;          // after '?', without it; "" when none
  bool path_given = false;    // the URL has a path (even just "/")
  bool has_userinfo = false;  // user[:password]@ before the host (not kept)
  // host[:port] as the Host header carries it (IPv6 literals bracketed).
  [[nodiscard]] std::string authority() const;
  // path[?query]: an HTTP request target.
  [[nodiscard]] std::string target() const;
};

// Parses `url`. Errors (kConfig): not http(s), no host, bad port, an
// unterminated IPv6 literal. Error messages name the URL with any userinfo
// replaced by "***", so a credential in it is never echoed.
[[nodiscard]] Result<Url> parse_url(std::string_view url);

}  // namespace harvest
