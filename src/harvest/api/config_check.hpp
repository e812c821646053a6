// Checking an ApiConfig before the server binds (HttpServer::start): a
// config error names the field that is wrong (never the token's value).
// Internal to harvest_api.
#pragma once

#include <harvest/api/http_server.hpp>
#include <harvest/common/error.hpp>

namespace harvest::api {

[[nodiscard]] Status validate_api_config(const ApiConfig& config);

}  // namespace harvest::api
