#include <harvest/api/http_status.hpp>

namespace harvest::api {

int http_status(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kBadRequest:
      return 400;
    case ErrorKind::kNotFound:
      return 404;
    case ErrorKind::kInvalidInput:
      return 422;
    case ErrorKind::kConflict:
      return 409;
    case ErrorKind::kTransient:
      return 503;
    case ErrorKind::kConfig:
    case ErrorKind::kInternal:
      return 500;
  }
  return 500;
}

}  // namespace harvest::api
