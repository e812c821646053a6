// The web console's files (src/harvest/api/console), built into the library
// by cmake/EmbedConsole.cmake: nothing is read from disk or fetched at run
// time. Internal to harvest_api.
#pragma once

#include <string_view>

namespace harvest::api {

struct ConsoleAsset {
  std::string_view content_type;  ///< with its charset
  std::string_view body;
};

// The asset named `name` ("index.html", "app.js"), or null.
[[nodiscard]] const ConsoleAsset* find_console_asset(std::string_view name);

}  // namespace harvest::api
