// A small blocking HTTP client over libcurl, shared by the SQS client and the
// credential providers.
//
// Every call carries a connect timeout and a total timeout; transport failures
// (refused, reset, timed out, DNS) come back as transient `Error`s and a
// malformed URL or unsupported scheme as a config error, so no libcurl type
// leaves this file. Responses with any HTTP status are returned as values: the
// caller owns the protocol-level interpretation.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/common/url.hpp>

namespace harvest::sqs {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  // "GET", "PUT" or "POST".
  std::string method = "GET";
  // Absolute URL, scheme http or https.
  std::string url;
  // Sent as given, in order. The transport adds no Expect header and no
  // body-derived header other than Content-Length.
  HttpHeaders headers;
  std::string body;
  // Longest wait for the TCP (and TLS) connection. Default 3 s.
  std::chrono::milliseconds connect_timeout{3000};
  // Longest wait for the whole exchange, connection included. Default 10 s.
  std::chrono::milliseconds timeout{10000};
  // Ignore http_proxy / https_proxy for this request. Set for link-local
  // metadata endpoints, which a proxy cannot (and must not) reach.
  bool bypass_proxy = false;
};

struct HttpResponse {
  long status = 0;
  std::string body;
  // Response headers, names lower-cased, in arrival order.
  HttpHeaders headers;

  // The first header named `name` (lower-case), or "" when absent.
  [[nodiscard]] std::string header(std::string_view name) const;
};

// Thread-safe. Keeps a small pool of libcurl easy handles so that sequential
// calls (on any thread) reuse open connections instead of paying a TCP/TLS
// handshake each; a handle is owned by one call at a time. Destroying the
// transport while a call is in flight is a bug.
class HttpTransport {
 public:
  HttpTransport();
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Performs `request`. Any HTTP status is a value. Errors: kTransient for
  // transport failures and timeouts (the message says which), kConfig for a
  // malformed URL or unsupported scheme, kInternal for libcurl misuse.
  [[nodiscard]] Result<HttpResponse> perform(const HttpRequest& request);

 private:
  struct Handle;
  std::unique_ptr<Handle> acquire();
  void release(std::unique_ptr<Handle> handle);

  std::mutex mu_;
  std::vector<std::unique_ptr<Handle>> idle_;  // guarded by mu_
};

// Percent-encodes `s` for an application/x-www-form-urlencoded body or a
// query string (RFC 3986 unreserved characters pass through).
[[nodiscard]] std::string url_encode(std::string_view s);

}  // namespace harvest::sqs
