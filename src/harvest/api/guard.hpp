// The HTTP API's access checks, applied to every request before it reaches a
// handler: the Host header against the allowed names (DNS rebinding), the
// bearer token (constant-time), and the JSON content type on mutating routes
// (a cross-site form post cannot send one without a CORS preflight, which
// this server never grants). Internal to harvest_api.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace harvest::api {

// Whether `host` names this machine's loopback interface: "localhost",
// 127.0.0.0/8, "::1" (bracketed or not).
[[nodiscard]] bool is_loopback_host(std::string_view host);

// The Host names served when ApiConfig::allowed_hosts is empty: the loopback
// names, plus `bind_host` when it is a specific address (not 0.0.0.0 / ::).
[[nodiscard]] std::vector<std::string> default_allowed_hosts(std::string_view bind_host);

// Whether the Host header value (name or address, optional ":port") is one
// of `allowed` (compared case-insensitively; an entry "*" allows any).
[[nodiscard]] bool host_allowed(std::string_view host_header,
                                const std::vector<std::string>& allowed);

// Whether `authorization` is "Bearer <token>" for exactly `token`. The
// comparison takes the same time wherever the values differ.
[[nodiscard]] bool bearer_matches(std::string_view authorization, std::string_view token);

// Whether a Content-Type value is application/json (parameters allowed).
[[nodiscard]] bool is_json_content_type(std::string_view content_type);

}  // namespace harvest::api
