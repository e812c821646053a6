// The one mapping from harvest error kinds to HTTP status codes (ENG-12).
#pragma once

#include <harvest/common/error.hpp>

namespace harvest::api {

// kBadRequest 400, kNotFound 404, kInvalidInput 422, kConflict 409,
// kTransient 503, kConfig and kInternal 500. Every API error response takes
// its status from here.
[[nodiscard]] int http_status(ErrorKind kind);

}  // namespace harvest::api
