// Serving the web console's pages (docs/console.md) from the assets built
// into the library.
#include <harvest/api/console_assets.hpp>

namespace harvest::api {

namespace {

// The page as built names the default prefix; the server writes its own.
constexpr std::string_view kPrefixMeta = R"(name="harvest-api-prefix" content="/api/harvest")";

std::string html_attribute(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::optional<ApiResponse> console_response(std::string_view path, bool read,
                                            std::string_view api_prefix) {
  if (path != "/ui" && !path.starts_with("/ui/")) return std::nullopt;
  if (!read) {
    auto r = error_response(405, "method_not_allowed", "the console's pages answer GET and HEAD");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  if (path == "/ui") {
    ApiResponse r{
        .status = 308, .body = {}, .content_type = "text/plain", .headers = {}, .log_detail = {}};
    r.headers.emplace_back("Location", "/ui/");
    return r;
  }
  const ConsoleAsset* asset = find_console_asset(path == "/ui/" ? "index.html" : path.substr(4));
  if (!asset) {
    return error_response(404, "not_found", "the console has no page at this path");
  }
  std::string body(asset->body);
  if (asset->content_type.starts_with("text/html")) {
    if (const auto at = body.find(kPrefixMeta); at != std::string::npos) {
      body.replace(at, kPrefixMeta.size(),
                   R"(name="harvest-api-prefix" content=")" + html_attribute(api_prefix) + "\"");
    }
  }
  ApiResponse r{.status = 200,
                .body = std::move(body),
                .content_type = std::string(asset->content_type),
                .headers = {},
                .log_detail = {}};
  // Scripts and styles come from this server only: no inline script or
  // style, no framing, no plugins, no form posts elsewhere.
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; script-src 'self'; style-src 'self'; "
                         "img-src 'self'; connect-src 'self'; object-src 'none'; "
                         "base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

}  // namespace harvest::api
