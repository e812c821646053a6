// The web console's files (src/harvest/api/console), built into the library
// by cmake/EmbedConsole.cmake: nothing is read from disk or fetched at run
// time. Internal to harvest_api.
#pragma once

#include <optional>
#include <string_view>

#include <harvest/api/handlers.hpp>

namespace harvest::api {

struct ConsoleAsset {
  std::string_view content_type;  ///< with its charset
  std::string_view body;
};

// The asset named `name` ("index.html", "app.js"), or null.
[[nodiscard]] const ConsoleAsset* find_console_asset(std::string_view name);

// The answer for a request to `path` when it is the console's (/ui or under
// it), with the pages' Content-Security-Policy; nullopt for any other path.
// `read`: the request is a GET or HEAD (anything else is a 405). The page
// carries `api_prefix` (ApiConfig::prefix, HTML-escaped) for its script.
[[nodiscard]] std::optional<ApiResponse> console_response(std::string_view path, bool read,
                                                          std::string_view api_prefix);

}  // namespace harvest::api
